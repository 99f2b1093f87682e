"""Diagnostics (errors and warnings as data) and the exception types that carry them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from pipelinez.core.codes import lookup
from pipelinez.core.json_types import JsonObject
from pipelinez.core.printable import printable


class DiagnosticSeverity(StrEnum):
    """How bad a diagnostic is: an error stops the command, a warning is reported and the command goes on.
    Not a check's severity (`core.vocabulary.CheckSeverity`, whose values are `error` and `warn`)."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Place:
    """Where a diagnostic points: a project file (relative path, 1-based line/col) and/or a node."""

    file: str | None = None
    line: int | None = None
    col: int | None = None
    node: str | None = None

    def __post_init__(self) -> None:
        # a file or node name a user chose: one line, whatever it holds (most are printable: kept as they are)
        if self.file is not None and not self.file.isprintable():
            object.__setattr__(self, "file", printable(self.file))
        if self.node is not None and not self.node.isprintable():
            object.__setattr__(self, "node", printable(self.node))

    def render(self) -> str:
        if self.file:
            text = self.file
            if self.line:
                text += f":{self.line}"
                if self.col:
                    text += f":{self.col}"
            return text
        return f"node '{self.node}'" if self.node else "project"


@dataclass(frozen=True)
class Diagnostic:
    """One error or warning: its PZ code, message, place and next step (one line each)."""

    code: str
    message: str
    place: Place = field(default_factory=Place)
    next_step: str = ""
    severity: DiagnosticSeverity = DiagnosticSeverity.ERROR

    def __post_init__(self) -> None:
        # names the message quotes are user text: escaped here, so every diagnostic is one line
        object.__setattr__(self, "message", printable(self.message))
        object.__setattr__(self, "next_step", printable(self.next_step or lookup(self.code).next_step))

    @property
    def is_error(self) -> bool:
        return self.severity == DiagnosticSeverity.ERROR

    def to_dict(self) -> JsonObject:
        data = asdict(self)
        data["place"] = {k: v for k, v in data["place"].items() if v is not None}
        return data


def sort_diagnostics(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """The one order diagnostics are reported in: deduplicated, by file (those without one last), line,
    column, code and message."""
    unique = dict.fromkeys(diagnostics)
    return sorted(
        unique, key=lambda d: (d.place.file or "~", d.place.line or 0, d.place.col or 0, d.code, d.message)
    )


def error(
    code: str,
    message: str,
    *,
    place: Place | None = None,
    file: str | None = None,
    line: int | None = None,
    col: int | None = None,
    node: str | None = None,
    next_step: str = "",
) -> Diagnostic:
    return Diagnostic(
        code, message, place or Place(file, line, col, node), next_step, DiagnosticSeverity.ERROR
    )


def warning(
    code: str,
    message: str,
    *,
    place: Place | None = None,
    file: str | None = None,
    line: int | None = None,
    col: int | None = None,
    node: str | None = None,
    next_step: str = "",
) -> Diagnostic:
    return Diagnostic(
        code, message, place or Place(file, line, col, node), next_step, DiagnosticSeverity.WARNING
    )


def _rebuilt(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> BaseException:
    exc = cls.__new__(cls)
    BaseException.__setattr__(exc, "args", args)  # also for frozen dataclass exceptions
    exc.__dict__.update(state)
    return exc


def reduce_exception(exc: BaseException) -> tuple[Any, ...]:
    """`__reduce__` for exceptions whose __init__ does not take their args back (keyword-only arguments,
    dataclasses): rebuilt from args and attributes, so they cross a process boundary (a pool, a Ray task)."""
    return (_rebuilt, (type(exc), exc.args, dict(exc.__dict__)))


class PzError(Exception):
    """Base of every user-facing pz exception; always carries at least one diagnostic."""

    exit_code = 2

    def __reduce__(self) -> tuple[Any, ...]:
        return reduce_exception(self)

    def __init__(self, diagnostics: Iterable[Diagnostic]):
        self.diagnostics: tuple[Diagnostic, ...] = tuple(diagnostics)
        super().__init__("; ".join(f"{d.code}: {d.message}" for d in self.diagnostics))


class PzConfigError(PzError):
    """Project or configuration error found before planning."""


class PzUsageError(PzError):
    """A call made wrongly (PZ0513): a Python API argument of the wrong type or value, every one of the call
    reported together."""


class PzValidationError(PzError):
    """Aggregated validation failures of one or more tiers."""


class ConnectorHostError(PzError):
    """A connector package could not be loaded or its manifest is malformed (PZ07xx)."""


class RestoreError(PzError):
    """Lock or package resolution failed during `pz restore` (PZ07xx)."""


class PzConnectorError(Exception):
    """A connector failure. `is_transient` and `retry_after` (seconds) drive the engine's retry policy.

    Anything a connector raises that is not a PzConnectorError counts as terminal: never retried.
    """

    def __init__(
        self,
        message: str,
        *,
        is_transient: bool = False,
        retry_after: float | None = None,
        code: str | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.is_transient = is_transient
        self.retry_after = retry_after
        self.code = code

    def __reduce__(self) -> tuple[Any, ...]:
        return reduce_exception(self)
