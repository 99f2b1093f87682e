"""Typed variables and declared environment variables: parsing, SQL literals, secrets."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from pipelinez.config.model import EnvSpec, Project, VarSpec
from pipelinez.core.diagnostics import Diagnostic, error, warning
from pipelinez.core.sqlnames import quote_literal

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def parse_typed(type_name: str, raw: Any) -> Any:
    """The value of `raw` as `type_name`; ValueError when it does not parse."""
    text = str(raw).strip() if not isinstance(raw, bool) else ("true" if raw else "false")
    if type_name == "string":
        return str(raw)
    if type_name in ("int", "bigint"):
        if isinstance(raw, bool):
            raise ValueError("a boolean is not an integer")
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"'{text}' is not a whole number") from None
        if type_name == "int" and not -(2**31) <= value < 2**31:
            raise ValueError(f"{value} is out of range for int")
        if not -(2**63) <= value < 2**63:
            raise ValueError(f"{value} is out of range for bigint")
        return value
    if type_name == "decimal":
        try:
            return Decimal(text)
        except InvalidOperation as exc:
            raise ValueError(f"'{text}' is not a decimal") from exc
    if type_name == "bool":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ValueError(f"'{text}' is not a boolean (true/false)")
    if type_name == "date":
        if isinstance(raw, dt.date) and not isinstance(raw, dt.datetime):
            return raw
        try:
            return dt.date.fromisoformat(text)
        except ValueError:
            raise ValueError(f"'{text}' is not a date (write it as YYYY-MM-DD)") from None
    if type_name == "timestamp":
        if isinstance(raw, dt.datetime):
            return raw
        if isinstance(raw, dt.date):
            return dt.datetime(raw.year, raw.month, raw.day)
        try:
            return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"'{text}' is not a timestamp (write it as YYYY-MM-DD HH:MM:SS)") from None
    raise ValueError(f"unknown type {type_name}")


def sql_literal(type_name: str, value: Any) -> str:
    """A typed SQL literal for a parsed variable value (never raw text)."""
    if type_name in ("int", "bigint", "decimal"):
        return str(value)
    if type_name == "bool":
        return "TRUE" if value else "FALSE"
    if type_name == "date":
        return f"DATE {quote_literal(value.isoformat())}"
    if type_name == "timestamp":
        return f"TIMESTAMP {quote_literal(value.isoformat(sep=' '))}"
    return quote_literal(str(value))


def yaml_text(type_name: str, value: Any) -> str:
    if type_name == "bool":
        return "true" if value else "false"
    if type_name == "timestamp":
        return str(value.isoformat(sep=" "))
    if type_name == "date":
        return str(value.isoformat())
    return str(value)


class TypedValue(str):
    """What `{{ var() }}` returns: prints as its SQL literal (or YAML text), but in Jinja logic behaves as the
    typed value, so `{% if var('flag') %}` is false for a false bool and `var('n') > 5` compares numbers."""

    value: Any

    def __new__(cls, text: str, value: Any) -> TypedValue:
        obj = super().__new__(cls, text)
        obj.value = value
        return obj

    def __bool__(self) -> bool:
        return bool(self.value)

    def _other(self, other: Any) -> Any:
        return other.value if isinstance(other, TypedValue) else other

    def __eq__(self, other: object) -> bool:
        return bool(self.value == self._other(other))

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __lt__(self, other: Any) -> bool:
        return bool(self.value < self._other(other))

    def __le__(self, other: Any) -> bool:
        return bool(self.value <= self._other(other))

    def __gt__(self, other: Any) -> bool:
        return bool(self.value > self._other(other))

    def __ge__(self, other: Any) -> bool:
        return bool(self.value >= self._other(other))

    __hash__ = str.__hash__


@dataclass
class ResolvedValues:
    """The project's variables and environment as they hold for this invocation."""

    vars: dict[str, tuple[VarSpec, Any]] = field(default_factory=dict)
    env: dict[str, tuple[EnvSpec, str | None]] = field(default_factory=dict)

    @property
    def secrets(self) -> tuple[str, ...]:
        """The values to mask: a secret too short to mask is refused (PZ0122), so nothing runs with it and
        nothing is rewritten for it."""
        return tuple(v for spec, v in self.env.values() if spec.secret and v and len(v) >= MIN_SECRET)


def resolve_values(
    project: Project, overrides: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> tuple[ResolvedValues, list[Diagnostic]]:
    environ = os.environ if environ is None else environ
    diags: list[Diagnostic] = []
    resolved = ResolvedValues()
    for name in overrides:
        if name not in project.vars:
            known = ", ".join(sorted(project.vars)) or "none declared"
            diags.append(
                error(
                    "PZ0209",
                    f"--var {name}=… names an undeclared variable (declared: {known})",
                    file="project.yml",
                )
            )
    for name, spec in project.vars.items():
        source = f"--var {name}" if name in overrides else "default"
        raw = overrides.get(name, spec.default)
        if raw is None:
            resolved.vars[name] = (spec, None)
            continue
        try:
            resolved.vars[name] = (spec, parse_typed(spec.type, raw))
        except ValueError as exc:
            resolved.vars[name] = (spec, None)  # declared; its bad value is reported once, here
            p = spec.place
            diags.append(
                error(
                    "PZ0210",
                    f"variable '{name}' ({source}) is not a valid {spec.type}: {exc}",
                    file=p.file,
                    line=p.line,
                    col=p.col,
                )
            )
    for name, env_spec in project.env.items():
        value = environ.get(name, env_spec.default)
        if value is None and env_spec.required:
            p = env_spec.place
            diags.append(
                error(
                    "PZ0212",
                    f"required environment variable {name} is not set",
                    file=p.file,
                    line=p.line,
                    col=p.col,
                    next_step=f"export {name}=… before running pz, or give it a default",
                )
            )
        if env_spec.secret and value and len(str(value)) < MIN_SECRET:
            p = env_spec.place
            diags.append(
                error(
                    "PZ0122",
                    f"secret environment variable {name} is {len(str(value))} character(s) long: masking it "
                    f"would rewrite those letters in every message; pz refuses a secret shorter than "
                    f"{MIN_SECRET} characters",
                    file=p.file,
                    line=p.line,
                    col=p.col,
                )
            )
        elif env_spec.secret and value and len(str(value)) < SHORT_SECRET:
            p = env_spec.place
            diags.append(
                warning(
                    "PZ0115",
                    f"secret environment variable {name} is shorter than {SHORT_SECRET} characters: it is "
                    "masked in messages, where it may also mask ordinary words or numbers",
                    file=p.file,
                    line=p.line,
                    col=p.col,
                )
            )
        resolved.env[name] = (env_spec, value)
    return resolved, diags


SHORT_SECRET = 4  # shorter: warned about (PZ0115), masked all the same
MIN_SECRET = 3  # shorter: refused (PZ0122)
