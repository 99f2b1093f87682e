"""Sandboxed Jinja rendering of YAML string values and pipeline SQL.

Pipeline SQL renders in one pass that records every source()/ref()/sink()/var()/env() call. ref() and sink()
render as placeholder tokens that later stages resolve (ref → a staging table or an inlined ephemeral query;
sink → a leading INSERT INTO clause). Every call is located in the file (line, col of its `{{`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from pipelinez.compile.template_cache import TemplateCache
from pipelinez.compile.values import ResolvedValues, TypedValue, sql_literal, yaml_text
from pipelinez.core.diagnostics import Diagnostic, Place, error
from pipelinez.core.sqlnames import quote_ident, quote_literal

REF_TOKEN = "__pz_ref_{}__"
SINK_TOKEN = "__pz_sink_{}__"
REF_TOKEN_RE = re.compile(r"__pz_ref_([A-Za-z_][A-Za-z0-9_]*)__")
SINK_TOKEN_RE = re.compile(r"__pz_sink_(\d+)__")


def staging_table(source: str, dataset: str) -> str:
    return f"src_{source}__{dataset}"


@dataclass(frozen=True)
class Call:
    function: str
    args: tuple[str, ...]
    place: Place


@dataclass
class Rendered:
    text: str
    calls: list[Call] = field(default_factory=list)
    display_text: str = ""  # the same rendering with secret values masked

    def of(self, function: str) -> list[Call]:
        return [c for c in self.calls if c.function == function]


class TemplateFailure(Exception):
    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


_LITERAL_CALL = re.compile(
    r"""\b([A-Za-z_]\w*)\s*\(\s*((?:'[^']*'|"[^"]*")(?:\s*,\s*(?:'[^']*'|"[^"]*"))*)\s*\)"""
)
_LITERAL_ARG = re.compile(r"'([^']*)'|\"([^\"]*)\"")


@functools.lru_cache(maxsize=64)
def _literal_calls(raw: str) -> dict[tuple[str, tuple[str, ...]], int]:
    """Offset of the first `f('literal', ...)` call of each (f, args) in a template: one scan, not one
    regex per call (a pattern per call name and arguments would be compiled again for every call)."""
    found: dict[tuple[str, tuple[str, ...]], int] = {}
    for match in _LITERAL_CALL.finditer(raw):
        args = tuple(a or b for a, b in _LITERAL_ARG.findall(match.group(2)))
        found.setdefault((match.group(1), args), match.start())
    return found


def _locate(raw: str, function: str, args: tuple[str, ...]) -> tuple[int, int] | None:
    """(line, col) of the `{{` around the first call `function(args...)` in the raw template."""
    start = _literal_calls(raw).get((function, args))
    if start is None:
        match = re.search(rf"\b{function}\s*\(", raw)
        if not match:
            return None
        start = match.start()
    brace = raw.rfind("{{", 0, start)
    line_start = raw.rfind("\n", 0, start) + 1
    pos = brace if brace >= line_start else start
    line = raw.count("\n", 0, pos) + 1
    return line, pos - (raw.rfind("\n", 0, pos) + 1) + 1


class Templater:
    """Renders templates for one project invocation (one set of vars and env)."""

    def __init__(self, values: ResolvedValues):
        self.values = values
        self._env = SandboxedEnvironment(
            undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True
        )
        self._templates = TemplateCache(self._env)
        # without a secret env the masked rendering is the same text: render once
        self._masks = any(spec.secret for spec, _ in values.env.values())

    # ---------------------------------------------------------------------------------------
    def render_sql(self, raw: str, file: str) -> Rendered:
        calls: list[Call] = []

        def functions(recording: bool) -> dict[str, Callable[..., Any]]:
            sink_count = [0]

            def record(function: str, *args: str) -> None:
                if recording:
                    loc = _locate(raw, function, args)
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
                record("watermark", str(src), str(dataset))
                loc = _locate(raw, "watermark", (str(src), str(dataset)))
                raise TemplateFailure(
                    error(
                        "PZ0213",
                        f"watermark('{src}', '{dataset}') is not available in this version of pz",
                        file=file,
                        line=loc[0] if loc else None,
                        col=loc[1] if loc else None,
                        next_step="remove the watermark() filter; incremental reads ship in a later version",
                    )
                )

            return {"source": source, "ref": ref, "sink": sink, "watermark": watermark, "__record__": record}

        text, display = self._render_twice(raw, file, functions, sql=True)
        return Rendered(text, calls, display)

    def render_value(self, raw: str, file: str, place: Place | None = None) -> tuple[str, str]:
        """(value, display value) of a YAML string; only var() and env() are available."""
        if "{{" not in raw and "{%" not in raw:
            return raw, raw
        return self._render_twice(raw, file, lambda _recording: {}, sql=False, place=place)

    def render_tree(self, value: Any, file: str, place: Place | None = None) -> tuple[Any, Any]:
        """Render every string inside nested dicts/lists; returns (value, display value)."""
        if isinstance(value, str):
            return self.render_value(value, file, place)
        if isinstance(value, dict):
            pairs = {k: self.render_tree(v, file, place) for k, v in value.items()}
            return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
        if isinstance(value, list):
            items = [self.render_tree(v, file, place) for v in value]
            return [i[0] for i in items], [i[1] for i in items]
        return value, value

    # ---------------------------------------------------------------------------------------
    def _render_twice(
        self,
        raw: str,
        file: str,
        functions: Callable[[bool], dict[str, Callable[..., Any]]],
        *,
        sql: bool,
        place: Place | None = None,
    ) -> tuple[str, str]:
        base = place or Place(file)

        def fail(code: str, message: str, function: str = "", args: tuple[str, ...] = ()) -> TemplateFailure:
            loc = _locate(raw, function, args) if function else None
            line, col = loc if loc else (base.line, base.col)
            return TemplateFailure(error(code, message, file=file, line=line, col=col))

        def make(masked: bool) -> dict[str, Callable[..., Any]]:
            own = functions(not masked)
            record = own.pop("__record__", None)

            def var(name: str, _default: object = None) -> str:
                # a dbt-style default is accepted and ignored: every var is declared with its own default
                name = str(name)
                if record:
                    record("var", name)
                if name not in self.values.vars:
                    declared = ", ".join(sorted(self.values.vars)) or "none"
                    raise fail(
                        "PZ0209",
                        f"var('{name}') is not declared in project.yml vars: (declared: {declared})",
                        "var",
                        (name,),
                    )
                spec, value = self.values.vars[name]
                if value is None:
                    return TypedValue("NULL" if sql else "", None)
                text = sql_literal(spec.type, value) if sql else yaml_text(spec.type, value)
                return TypedValue(text, value)

            def env(name: str) -> str:
                name = str(name)
                if record:
                    record("env", name)
                if name not in self.values.env:
                    raise fail("PZ0211", f"env('{name}') is not declared in project.yml env:", "env", (name,))
                spec, value = self.values.env[name]
                if value is None and spec.required:
                    value = ""  # reported once, as PZ0212 on its declaration in project.yml
                if value is None:
                    raise fail(
                        "PZ0212", f"environment variable {name} is not set and has no default", "env", (name,)
                    )
                if masked and spec.secret:
                    value = "***"
                return quote_literal(value) if sql else value

            return {**own, "var": var, "env": env}

        results: list[str] = []
        for masked in (False, True) if self._masks else (False,):
            try:
                template = self._templates.get(raw)
                results.append(template.render(make(masked)))
            except TemplateFailure:
                raise
            except jinja2.TemplateSyntaxError as exc:
                raise TemplateFailure(
                    error(
                        "PZ0213",
                        f"template syntax error: {exc.message}",
                        file=file,
                        line=(exc.lineno if sql else base.line),
                        col=base.col if not sql else None,
                    )
                ) from exc
            except jinja2.UndefinedError as exc:
                raise fail(
                    "PZ0213",
                    f"template error: {exc.message}; available functions: source, ref, sink, var, env",
                ) from exc
            except jinja2.exceptions.SecurityError as exc:
                raise fail("PZ0213", f"the template sandbox refused an operation: {exc}") from exc
            except Exception as exc:  # a user template can raise anything (ZeroDivision, TypeError, ...)
                text = re.sub(r"\b[\w.]+\.<locals>\.(\w+)\(\)", r"\1()", str(exc))  # no internal names
                raise fail("PZ0213", f"template error: {type(exc).__name__}: {text}") from exc
        return results[0], results[-1]
