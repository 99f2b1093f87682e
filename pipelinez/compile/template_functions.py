"""The pz functions a template calls: source()/ref()/sink()/watermark() of pipeline SQL (each call recorded
at its place in the file) and var()/env()/env_var() of every template (typed values, secrets masked in the
display rendering). A problem with one call that should not stop the file is `Soft`; a call with the wrong
arguments is `Arity`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipelinez.compile.template_calls import REF_TOKEN, SINK_TOKEN, WATERMARK_TOKEN, Call, staging_table
from pipelinez.compile.template_locate import locate, locate_nth
from pipelinez.compile.values import ResolvedValues, TypedValue, parse_typed, sql_literal, yaml_text
from pipelinez.core.diagnostics import Place
from pipelinez.core.sqlnames import quote_ident, quote_literal

UNSET = object()

Functions = dict[str, Callable[..., Any]]


class Arity(Exception):
    """A pz template function called with the wrong arguments."""

    def __init__(self, message: str, where: tuple[str, tuple[str, ...]]):
        super().__init__(message)
        self.where = where


class Soft(Exception):
    """A problem with one call that does not stop the rest of the file from rendering."""

    def __init__(self, code: str, message: str, where: tuple[str, tuple[str, ...]], hint: str = ""):
        super().__init__(message)
        self.code, self.message, self.where, self.hint = code, message, where, hint


def sql_functions(raw: str, file: str, calls: list[Call], recording: bool) -> Functions:
    """source/ref/sink/watermark of one rendering of pipeline SQL, and `__record__` (which var()/env() use to
    record their calls too); only a `recording` rendering appends to `calls`."""
    sink_count = [0]
    watermark_count = [0]
    seen: dict[tuple[str, ...], int] = {}  # watermark() calls so far, by arguments

    def record(function: str, *args: str) -> None:
        if recording:
            loc = locate(raw, function, args)
            if function == "watermark":  # each call its own place: several may name one dataset
                nth = seen.get(args, 0)
                seen[args] = nth + 1
                loc = locate_nth(raw, function, args, nth) or loc
            calls.append(Call(function, args, Place(file, *(loc or (None, None)))))

    def source(src: str, dataset: str) -> str:
        record("source", str(src), str(dataset))
        return quote_ident(staging_table(str(src), str(dataset)))

    def ref(name: str) -> str:
        record("ref", str(name))
        return REF_TOKEN.format(name)

    def sink(sink_name: str, output: str) -> str:
        record("sink", str(sink_name), str(output))
        sink_count[0] += 1
        return SINK_TOKEN.format(sink_count[0] - 1)

    def watermark(src: str, dataset: str) -> str:
        # a placeholder the inference finds in DuckDB's parse tree (a column reference); the
        # compiler replaces it by the cursor's typed literal once the cursor is known
        record("watermark", str(src), str(dataset))
        watermark_count[0] += 1
        return WATERMARK_TOKEN.format(watermark_count[0] - 1)

    return {"source": source, "ref": ref, "sink": sink, "watermark": watermark, "__record__": record}


class ValueFunctions:
    """`var()` and `env()` of one render (real or masked; SQL literals or YAML text)."""

    def __init__(
        self, values: ResolvedValues, sql: bool, masked: bool, record: Callable[..., None] | None
    ) -> None:
        self.values, self.sql, self.masked, self.record = values, sql, masked, record

    def var(self, name: object, default: object = UNSET) -> str:
        name = str(name)
        if self.record:
            self.record("var", name)
        if name not in self.values.vars:
            declared = ", ".join(sorted(self.values.vars)) or "none"
            raise Soft(
                "PZ0209",
                f"var('{name}') is not declared in project.yml vars: (declared: {declared})",
                ("var", (name,)),
            )
        spec, value = self.values.vars[name]
        if value is None and default is not UNSET and default is not None:
            try:  # var('x', default): the call's default when the var has no value, as the var's type
                value = parse_typed(spec.type, default)
            except ValueError as exc:
                raise Soft(
                    "PZ0210",
                    f"the default of var('{name}', {default!r}) is not a valid {spec.type}: {exc}",
                    ("var", (name,)),
                    f"give a default of type {spec.type}, or declare the default in project.yml",
                ) from None
        if value is None:
            return TypedValue("NULL" if self.sql else "", None)
        text = sql_literal(spec.type, value) if self.sql else yaml_text(spec.type, value)
        return TypedValue(text, value)

    def env_var(self, name: object, default: object = UNSET) -> str:
        """`env_var('X', 'default')`: dbt's spelling of env(), the same rules."""
        return self._env("env_var", name, default)

    def env(self, name: object, default: object = UNSET) -> str:
        return self._env("env", name, default)

    def _env(self, function: str, name: object, default: object) -> str:
        name = str(name)
        if self.record:
            self.record(function, name)
        if name not in self.values.env:
            raise Soft(
                "PZ0211",
                f"{function}('{name}') is not declared in project.yml env:",
                (function, (name,)),
                f"declare it in project.yml, e.g. env: {{ {name}: {{ default: … }} }} (every environment "
                "variable a project reads is declared there; a default in the call applies once declared)",
            )
        spec, value = self.values.env[name]
        if value is None and default is not UNSET and default is not None:
            value = str(default)  # env('X', 'default'): the call's default when X is unset
        if value is None and spec.required:
            value = ""  # reported once, as PZ0212 on its declaration in project.yml
        if value is None:
            raise Soft(
                "PZ0212",
                f"environment variable {name} is not set and has no default",
                (function, (name,)),
                f"export {name}=… before running pz, or give it a default in project.yml or in the call",
            )
        if self.masked and spec.secret:
            value = "***"
        return quote_literal(value) if self.sql else value
