"""Sandboxed Jinja rendering of YAML string values and pipeline SQL: the `Templater` of one invocation.

Pipeline SQL renders in one pass that records every source()/ref()/sink()/watermark()/var()/env() call. ref(),
sink() and watermark() render as placeholder tokens that later stages resolve (ref → a staging table or an
inlined ephemeral query; sink → a leading INSERT INTO clause; watermark → the cursor's typed literal, once the
inference has found the cursor). Every call is located in the file (line, col of its `{{`).

This module owns the Templater (its sandbox, its macro library, its template cache, rendering SQL, values
and trees of values). The rest lives beside it: template_calls.py (tokens, `Call`, `Rendered`,
`TemplateFailure`, re-exported here), template_locate.py (where a call is written), template_functions.py
(the pz functions), template_render.py (one rendering's function table and errors), template_signatures.py
(argument checks).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pipelinez.compile.render_cache import RENDERED
from pipelinez.compile.template_budget import Budget, render_within
from pipelinez.compile.template_cache import LiteralCallTemplate, Renderable, TemplateCache
from pipelinez.compile.template_calls import (
    REF_TOKEN,
    REF_TOKEN_RE,
    SINK_TOKEN,
    SINK_TOKEN_RE,
    WATERMARK_TOKEN,
    WATERMARK_TOKEN_RE,
    Call,
    PlaceOf,
    Rendered,
    TemplateFailure,
    staging_table,
)
from pipelinez.compile.template_functions import Functions, sql_functions
from pipelinez.compile.template_render import RenderScope, TemplateRender
from pipelinez.compile.values import ResolvedValues
from pipelinez.config.positions import JsonPath
from pipelinez.core.diagnostics import Diagnostic, Place

if TYPE_CHECKING:
    from pipelinez.compile.macros import MacroLibrary
    from pipelinez.compile.render_cache import RenderCache
    from pipelinez.compile.sandbox import BoundedSandbox

__all__ = [
    "REF_TOKEN",
    "REF_TOKEN_RE",
    "SINK_TOKEN",
    "SINK_TOKEN_RE",
    "WATERMARK_TOKEN",
    "WATERMARK_TOKEN_RE",
    "Call",
    "PlaceOf",
    "Rendered",
    "TemplateFailure",
    "Templater",
    "staging_table",
]


class Templater:
    """Renders templates for one project invocation (one set of vars and env, one set of macros)."""

    def __init__(
        self,
        values: ResolvedValues,
        macros: Mapping[str, str] | None = None,
        renders: RenderCache | None = None,
    ):
        self.values = values
        self.renders = renders  # pipeline SQL rendered before, by content (`render_cache`)
        self._sandbox: BoundedSandbox | None = None  # made (and Jinja imported) for the first template
        self._macro_files = dict(macros or {})
        self._library: MacroLibrary | None = None
        if self._macro_files:  # parsed once per invocation (Jinja imported here)
            from pipelinez.compile.macros import MacroLibrary

            self._library = MacroLibrary(self._macro_files, self._env())
        # that is more than literal calls; a call of a macro always goes through Jinja (its sandbox
        # bounds the macro's loops and nesting)
        self._templates = TemplateCache(self._env, frozenset(self._library.defs if self._library else ()))
        # without a secret env the masked rendering is the same text: render once
        self._masks = any(spec.secret for spec, _ in values.env.values())
        self._scope = RenderScope(values, self._library, self._macro_files, self._env)

    def _env(self) -> BoundedSandbox:
        """The sandbox that renders every template other than literal calls (Jinja imported here)."""
        if self._sandbox is None:
            import jinja2

            from pipelinez.compile.sandbox import BoundedSandbox

            self._sandbox = BoundedSandbox(
                undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True
            )
        return self._sandbox

    @property
    def macro_problems(self) -> list[Diagnostic]:
        """PZ0126-PZ0129 of the project's macro files."""
        return list(self._library.problems) if self._library else []

    def _render(self, template: Renderable, context: dict[str, Any]) -> str:
        """A template's output within the sandbox's bounds: literal calls without Jinja."""
        if isinstance(template, LiteralCallTemplate) and template.knows(context):
            return render_within(template, context, Budget())
        return self._env().render_bounded(template, context)

    # ---------------------------------------------------------------------------------------
    def render_sql(self, raw: str, file: str) -> Rendered:
        cached = self.renders.get(raw, file) if self.renders is not None else None
        if cached is not None:
            return cached
        calls: list[Call] = []
        try:
            text, display, failures = self._render_twice(
                raw, file, lambda recording: sql_functions(raw, file, calls, recording), sql=True
            )
        except TemplateFailure as exc:
            exc.calls = calls
            raise
        rendered = Rendered(text, calls, display, failures)
        RENDERED[file] += 1
        if self.renders is not None:
            self.renders.put(raw, file, rendered)
        return rendered

    def render_value(self, raw: str, file: str, place: Place | None = None) -> tuple[str, str]:
        """(value, display value) of a YAML string; only var() and env() are available."""
        if "{{" not in raw and "{%" not in raw:
            return raw, raw
        text, display, failures = self._render_twice(raw, file, lambda _recording: {}, sql=False, place=place)
        if failures:
            raise TemplateFailure(failures)
        return text, display

    def render_tree(
        self, value: Any, file: str, place: Place | None = None, place_of: PlaceOf | None = None
    ) -> tuple[Any, Any]:
        """Render every string inside nested dicts/lists; returns (value, display value). `place_of` gives
        the place of the value at a path inside `value` (keys and indices), so each failing string is
        reported at its own line and column; without it every error is at `place`."""
        return self._render_node(value, file, place_of or (lambda _path: place or Place(file)), ())

    def _render_node(self, value: Any, file: str, place_of: PlaceOf, path: JsonPath) -> tuple[Any, Any]:
        if isinstance(value, str):
            if "{{" not in value and "{%" not in value:  # as render_value: no template, and no place asked
                return value, value
            return self.render_value(value, file, place_of(path))
        if isinstance(value, dict | list):
            keys = list(value) if isinstance(value, dict) else list(range(len(value)))
            pairs: dict[Any, tuple[Any, Any]] = {}
            failures: list[Diagnostic] = []
            for key in keys:  # every string of the tree, even after one failed: all errors at once
                try:
                    pairs[key] = self._render_node(value[key], file, place_of, (*path, key))
                except TemplateFailure as exc:
                    failures += exc.diagnostics
            if failures:
                raise TemplateFailure(list(dict.fromkeys(failures)))
            if isinstance(value, dict):
                return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
            return [pairs[k][0] for k in keys], [pairs[k][1] for k in keys]
        return value, value

    # ---------------------------------------------------------------------------------------
    def _render_twice(
        self,
        raw: str,
        file: str,
        functions: Callable[[bool], Functions],
        *,
        sql: bool,
        place: Place | None = None,
    ) -> tuple[str, str, list[Diagnostic]]:
        """(value, display value, soft failures). Soft failures (an undeclared var or env, ...) render as NULL
        so every one in the file is found in one pass; anything else raises TemplateFailure."""
        render = TemplateRender(self._scope, raw, file, functions, sql=sql, place=place)
        results: list[str] = []
        for masked in (False, True) if self._masks else (False,):
            try:
                results.append(self._render(self._templates.get(raw), render.functions(masked)))
            except TemplateFailure:
                raise
            except Exception as exc:  # a user template can raise anything (ZeroDivision, TypeError, ...)
                raise render.failure(exc) from exc
        return results[0], results[-1], list(dict.fromkeys(render.soft))
