"""Checking the arguments of a Python API call before anything runs (PZ0513, `PzUsageError`).

Python does not enforce annotations, and a wrong value is not always loud: `fail_fast="no"` is truthy and
would turn fail-fast on, `threads="2"` would fail deep in the scheduler, `select="orders"` would select the
letters o, r, d, … . So each public call checks what it was given, gathers every problem of the call, and
raises them together. Values are never converted: what a call accepts is exactly what its signature says.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pipelinez.core.diagnostics import Diagnostic, PzUsageError, error


class Arguments:
    """The problems found with the arguments of one call, e.g. `Arguments("Project.run")`."""

    def __init__(self, call: str):
        self.call = call
        self.problems: list[Diagnostic] = []

    def _bad(self, name: str, value: Any, wanted: str, example: str) -> None:
        self.problems.append(
            error(
                "PZ0513",
                f"{name}={value!r} ({type(value).__name__}) is not {wanted}",
                file=f"{self.call}()",
                next_step=f"pass {example}",
            )
        )

    def flag(self, name: str, value: Any, optional: bool = False) -> None:
        """True or False (or None, when `optional`): never a string or a number standing for one."""
        if isinstance(value, bool) or (optional and value is None):
            return
        self._bad(name, value, "True or False" + (" (or None)" if optional else ""), f"{name}=True or False")

    def count(self, name: str, value: Any, optional: bool = True) -> None:
        """A whole number of at least 1 (or None)."""
        if (optional and value is None) or (
            isinstance(value, int) and not isinstance(value, bool) and value >= 1
        ):
            return
        self._bad(
            name, value, "a whole number of at least 1" + (" (or None)" if optional else ""), f"{name}=4"
        )

    def port(self, name: str, value: Any) -> None:
        """A TCP port: a whole number from 0 (any free port) to 65535."""
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 65535:
            return
        self._bad(name, value, "a port number from 0 to 65535", f"{name}=8080")

    def path(self, name: str, value: Any, optional: bool = True) -> None:
        """A path: a string or an os.PathLike (or None, when `optional`)."""
        if (optional and value is None) or isinstance(value, str | os.PathLike):
            return
        self._bad(name, value, "a path (a string or pathlib.Path)", f'{name}="out/docs"')

    def names(self, name: str, value: Any) -> None:
        """A list or tuple of strings (one selector per item; a bare string would be split into letters)."""
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            return
        example = f"{name}=[{value!r}]" if isinstance(value, str) else f'{name}=["orders_enriched"]'
        self._bad(name, value, "a list of strings", example)

    def text(self, name: str, value: Any, choices: tuple[str, ...] = (), optional: bool = True) -> None:
        """A string (one of `choices`, when given), or None (when `optional`)."""
        if (optional and value is None) or (isinstance(value, str) and (not choices or value in choices)):
            return
        wanted = "one of " + ", ".join(repr(c) for c in choices) if choices else "a string"
        or_none = " (or None)" if optional else ""
        self._bad(name, value, wanted + or_none, f"{name}={(choices or ('...',))[0]!r}")

    def variables(self, name: str, value: Any) -> None:
        """A mapping of variable names to their values as strings, exactly what `--var name=value` gives."""
        if value is None:
            return
        if not isinstance(value, Mapping):
            self._bad(name, value, "a mapping of names to strings", f'{name}={{"min_date": "2025-01-01"}}')
            return
        for key, item in value.items():
            if not isinstance(key, str) or not isinstance(item, str):
                self._bad(
                    f"{name}[{key!r}]",
                    item,
                    "a string (vars are given as --var gives them)",
                    f"{name}={{{str(key)!r}: {str(item)!r}}}",
                )

    def callback(self, name: str, value: Any) -> None:
        if value is None or callable(value):
            return
        self._bad(name, value, "a callable taking one event dict (or None)", f"{name}=events.append")

    def check(self) -> None:
        """Raise every problem found, together."""
        if self.problems:
            raise PzUsageError(self.problems)
