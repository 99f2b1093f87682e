"""Sandboxed Jinja rendering of YAML string values and pipeline SQL.

Pipeline SQL renders in one pass that records every source()/ref()/sink()/watermark()/var()/env() call. ref(),
sink() and watermark() render as placeholder tokens that later stages resolve (ref → a staging table or an
inlined ephemeral query; sink → a leading INSERT INTO clause; watermark → the cursor's typed literal, once the
inference has found the cursor). Every call is located in the file (line, col of its `{{`).
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelinez.compile.helpers import HELPERS, HelperError
from pipelinez.compile.template_budget import Budget, MacroTooDeep, SandboxLimit, render_within
from pipelinez.compile.template_cache import LiteralCallTemplate, Renderable, TemplateCache
from pipelinez.compile.values import ResolvedValues, TypedValue, parse_typed, sql_literal, yaml_text
from pipelinez.config.positions import JsonPath
from pipelinez.core.diagnostics import Diagnostic, Place, error
from pipelinez.core.sqlnames import quote_ident, quote_literal

if TYPE_CHECKING:
    from pipelinez.compile.macros import MacroLibrary
    from pipelinez.compile.sandbox import BoundedSandbox

REF_TOKEN = "__pz_ref_{}__"
SINK_TOKEN = "__pz_sink_{}__"
WATERMARK_TOKEN = "__pz_wm_{}__"  # the i-th watermark() call; replaced by its typed literal after inference
REF_TOKEN_RE = re.compile(r"__pz_ref_([A-Za-z_][A-Za-z0-9_]*)__")
SINK_TOKEN_RE = re.compile(r"__pz_sink_(\d+)__")
WATERMARK_TOKEN_RE = re.compile(r"__pz_wm_(\d+)__")


PlaceOf = Callable[[JsonPath], Place]  # the place of the value at a path (keys, indices) inside a YAML value


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
    # undeclared var()/env() and the like: reported, rendered as NULL so the rest of the file still renders
    failures: list[Diagnostic] = field(default_factory=list)

    def of(self, function: str) -> list[Call]:
        return [c for c in self.calls if c.function == function]


class TemplateFailure(Exception):
    """A template that cannot be rendered (all of its reportable problems), with the calls seen before."""

    def __init__(self, diagnostics: Diagnostic | list[Diagnostic], calls: list[Call] | None = None):
        found = [diagnostics] if isinstance(diagnostics, Diagnostic) else list(diagnostics)
        super().__init__("; ".join(d.message for d in found))
        self.diagnostics = tuple(found)
        self.diagnostic = found[0]
        self.calls = calls or []


_UNSET = object()


_LITERAL_CALL = re.compile(
    r"""\b([A-Za-z_]\w*)\s*\(\s*((?:'[^']*'|"[^"]*")(?:\s*,\s*(?:'[^']*'|"[^"]*"))*)\s*\)"""
)
_LITERAL_ARG = re.compile(r"'([^']*)'|\"([^\"]*)\"")


_OPEN_LITERAL = re.compile(r"""\(\s*['"]""")  # where a call with a literal first argument can open


@functools.lru_cache(maxsize=64)
def _literal_calls(raw: str) -> dict[tuple[str, tuple[str, ...]], int]:
    """Offset of the first `f('literal', ...)` call of each (f, args) in a template: one scan, not one
    regex per call (a pattern per call name and arguments would be compiled again for every call). The
    matches are `_LITERAL_CALL.finditer`'s, found from the few `('` of the text instead of trying the
    pattern at every word: a call's name is the whole word before its parenthesis."""
    found: dict[tuple[str, tuple[str, ...]], int] = {}
    end = 0  # where the last match ended: matches do not overlap
    for opening in _OPEN_LITERAL.finditer(raw):
        start = opening.start()
        while start > end and raw[start - 1].isspace():
            start -= 1
        word_end = start
        while start > end and (raw[start - 1].isalnum() or raw[start - 1] == "_"):
            start -= 1
        if start == word_end or (start == end and start > 0 and _is_word(raw[start - 1])):
            continue  # no name, or a word that began inside the last match
        match = _LITERAL_CALL.match(raw, start)
        if match is None:
            continue
        args = tuple(a or b for a, b in _LITERAL_ARG.findall(match.group(2)))
        found.setdefault((match.group(1), args), match.start())
        end = match.end()
    return found


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _locate(raw: str, function: str, args: tuple[str, ...]) -> tuple[int, int] | None:
    """(line, col) of the `{{` around the first call `function(args...)` in the raw template (a call with
    more arguments, like var('x', 7), counts when its first ones match)."""
    start = _literal_calls(raw).get((function, args))
    if start is None:
        first = rf"\s*['\"]{re.escape(args[0])}['\"]\s*[,)]" if args else ""
        match = re.search(rf"\b{function}\s*\({first}", raw) or re.search(rf"\b{function}\s*\(", raw)
        if not match:
            return None
        start = match.start()
    brace = raw.rfind("{{", 0, start)
    line_start = raw.rfind("\n", 0, start) + 1
    pos = brace if brace >= line_start else start
    line = raw.count("\n", 0, pos) + 1
    return line, pos - (raw.rfind("\n", 0, pos) + 1) + 1


@functools.lru_cache(maxsize=256)
def _call_starts(raw: str, function: str, args: tuple[str, ...]) -> tuple[int, ...]:
    """Offsets of every literal call `function(args...)` written in the template (one scan per call)."""
    quoted = r"\s*,\s*".join(rf"['\"]{re.escape(a)}['\"]" for a in args)
    return tuple(m.start() for m in re.finditer(rf"\b{re.escape(function)}\s*\(\s*{quoted}\s*\)", raw))


def _locate_nth(raw: str, function: str, args: tuple[str, ...], nth: int) -> tuple[int, int] | None:
    """(line, col) of the `{{` around the nth (0-based) literal call `function(args...)`; None when the
    template has fewer such calls written out (a loop or a macro made the others)."""
    starts = _call_starts(raw, function, args)
    if nth >= len(starts):
        return None
    start = starts[nth]
    brace = raw.rfind("{{", 0, start)
    line_start = raw.rfind("\n", 0, start) + 1
    pos = brace if brace >= line_start else start
    return raw.count("\n", 0, pos) + 1, pos - line_start + 1


class Templater:
    """Renders templates for one project invocation (one set of vars and env, one set of macros)."""

    def __init__(self, values: ResolvedValues, macros: Mapping[str, str] | None = None):
        self.values = values
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
        calls: list[Call] = []

        def functions(recording: bool) -> dict[str, Callable[..., Any]]:
            sink_count = [0]
            watermark_count = [0]
            seen: dict[tuple[str, ...], int] = {}  # watermark() calls so far, by arguments

            def record(function: str, *args: str) -> None:
                if recording:
                    loc = _locate(raw, function, args)
                    if function == "watermark":  # each call its own place: several may name one dataset
                        nth = seen.get(args, 0)
                        seen[args] = nth + 1
                        loc = _locate_nth(raw, function, args, nth) or loc
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

        try:
            text, display, failures = self._render_twice(raw, file, functions, sql=True)
        except TemplateFailure as exc:
            exc.calls = calls
            raise
        return Rendered(text, calls, display, failures)

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
        functions: Callable[[bool], dict[str, Callable[..., Any]]],
        *,
        sql: bool,
        place: Place | None = None,
    ) -> tuple[str, str, list[Diagnostic]]:
        """(value, display value, soft failures). Soft failures (an undeclared var or env, ...) render as NULL
        so every one in the file is found in one pass; anything else raises TemplateFailure."""
        base = place or Place(file)
        soft: list[Diagnostic] = []

        def at(
            code: str,
            message: str,
            function: str = "",
            args: tuple[str, ...] = (),
            hint: str = "",
            exc: BaseException | None = None,
        ) -> Diagnostic:
            # a call's own place in SQL; a YAML value's errors are at the value (its text's own line 1 is
            # not the file's)
            loc = _locate(raw, function, args) if function and sql else None
            line, col = loc if loc else (base.line, base.col)
            if not loc and sql and exc is not None:
                line = _template_line(exc) or line
            return error(code, message, file=file, line=line, col=col, next_step=hint)

        def make(masked: bool) -> dict[str, Callable[..., Any]]:
            own = functions(not masked)
            record = own.pop("__record__", None)
            values = _ValueFunctions(self.values, sql, masked, record)

            def soften(name: str, fn: Callable[..., str]) -> Callable[..., str]:
                def call(*args: Any, **kwargs: Any) -> str:
                    if not _accepts(fn, args, kwargs):
                        signature = _signature(fn)
                        raise _Arity(
                            f"{name}() takes ({', '.join(signature.parameters)}), not {_shown(args, kwargs)}",
                            (name, tuple(str(a) for a in args)),
                        )
                    try:
                        return fn(*args, **kwargs)
                    except HelperError as exc:  # located at its call, like a call with wrong arguments
                        raise _Arity(str(exc), (name, tuple(str(a) for a in args))) from None
                    except _Soft as exc:
                        if not masked:
                            soft.append(at(exc.code, exc.message, *exc.where, hint=exc.hint))
                        return "NULL" if sql else ""

                return call

            wrapped = {name: soften(name, fn) for name, fn in {**own, **HELPERS}.items()}
            made: dict[str, Any] = {
                **wrapped,
                "var": soften("var", values.var),
                "env": soften("env", values.env),
                "env_var": soften("env_var", values.env_var),
            }
            if self._library is not None:  # the macros see this render's functions (and each other)
                made.update(self._library.functions(lambda: {**made, **self._env().loop_guard()}))
            return made

        results: list[str] = []
        for masked in (False, True) if self._masks else (False,):
            try:
                results.append(self._render(self._templates.get(raw), make(masked)))
            except TemplateFailure:
                raise
            except Exception as exc:  # a user template can raise anything (ZeroDivision, TypeError, ...)
                syntax = _jinja_error(exc, "TemplateSyntaxError")
                if syntax is not None:
                    raise TemplateFailure(
                        error(
                            "PZ0213",
                            f"template syntax error: {syntax.message}",
                            file=file,
                            line=(syntax.lineno if sql else base.line),
                            col=base.col if not sql else None,
                        )
                    ) from exc
                message, hint = _render_error(exc)
                in_macro = self._in_macro(exc, file, message, hint)
                if in_macro is not None:
                    raise TemplateFailure(in_macro) from exc
                where = exc.where if isinstance(exc, _Arity) else ("", ())  # located by its call
                raise TemplateFailure(at("PZ0213", message, *where, hint=hint, exc=exc)) from exc
        return results[0], results[-1], list(dict.fromkeys(soft))

    def _in_macro(self, exc: Exception, caller: str, message: str, hint: str) -> Diagnostic | None:
        """PZ0239 (PZ0240: nested too deep) at the macro file's line when `exc` was raised in a macro."""
        if self._library is None:
            return None
        from pipelinez.compile.macros import macro_place

        place = macro_place(exc, self._macro_files)
        if place is None:
            return None
        file, line = place
        name = self._library.macro_at(file, line)
        deep = isinstance(exc, MacroTooDeep)
        return error(
            "PZ0240" if deep else "PZ0239",
            f"in macro '{name}' (called from {caller}): {message}",
            file=file,
            line=line,
            next_step="" if deep else hint,
        )


_FUNCTIONS = f"source, ref, sink, watermark, var, env, env_var, {', '.join(HELPERS)} and the project's macros"


def _plain(exc: Exception) -> str:
    """An exception from user template code in words a user reads: no module paths, no `<locals>`."""
    text = re.sub(r"\b(?:\w+\.|<locals>\.)+(\w+\(\))", r"\1", str(exc))  # a.b.<locals>.source() -> source()
    if isinstance(exc, KeyError | LookupError):
        return f"no item {text}" if isinstance(exc, KeyError) else text
    return (
        text if isinstance(exc, ArithmeticError | TypeError | ValueError) else f"{type(exc).__name__}: {text}"
    )


def _jinja_error(exc: Exception, name: str) -> Any:
    """`exc` when it is Jinja's exception `name` (`TemplateSyntaxError`, ...), else None. Jinja raised it
    only if Jinja was imported."""
    errors = sys.modules.get("jinja2.exceptions")
    return exc if errors is not None and isinstance(exc, getattr(errors, name)) else None


def _render_error(exc: Exception) -> tuple[str, str]:
    """(message, next step) of an error raised while a template renders."""
    undefined = _jinja_error(exc, "UndefinedError")
    if undefined is not None:
        return f"template error: {undefined.message}; available functions: {_FUNCTIONS}", ""
    if _jinja_error(exc, "SecurityError") is not None:
        return f"the template sandbox refused an operation: {exc}", ""
    if isinstance(exc, SandboxLimit):
        return str(exc), "make the template smaller: fewer loop iterations, less output"
    if isinstance(exc, _Arity):
        return f"template error: {exc}", ""
    if isinstance(exc, OverflowError) and "range" in str(exc).lower():  # Jinja caps range() at 100,000
        return "a range() of more than 100,000 items is more than the sandbox allows", "use smaller ranges"
    return f"template error: {_plain(exc)}", ""


def _template_line(exc: BaseException) -> int | None:
    """The template line a render error happened on (Jinja's frames carry the template's line numbers)."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _accepts(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether `fn` takes these arguments. A call with positional arguments only is checked by counting
    them against the function's bounds (known once per function body); any other call is bound, which
    cost most of a template function call."""
    known = _known(fn)
    if not kwargs:
        low, high = known.bounds
        if low <= len(args) <= high:
            return True
    try:
        known.signature.bind(*args, **kwargs)
    except TypeError:
        return False
    return True


def _signature(fn: Callable[..., Any]) -> inspect.Signature:
    return _known(fn).signature


@dataclass(frozen=True)
class _Known:
    signature: inspect.Signature
    bounds: tuple[float, float]  # (fewest, most) positional arguments taken without keywords


def _known(fn: Callable[..., Any]) -> _Known:
    """`fn`'s signature and bounds, computed once per function body: the template functions are closures
    made afresh for each render, and inspect.signature cost a fifth of `pz validate` at 2,000 pipelines.
    Closures of one body share their code, defaults and so their signature."""
    target = getattr(fn, "__func__", fn)
    try:
        key = (
            getattr(target, "__code__", None),
            getattr(target, "__defaults__", None),
            tuple(sorted((getattr(target, "__kwdefaults__", None) or {}).items())),
            hasattr(fn, "__self__"),
        )
        hash(key)
    except TypeError:  # an unhashable default: not cached
        return _study(fn)
    if key[0] is None:
        return _study(fn)
    found = _KNOWN.get(key)
    if found is None:
        found = _KNOWN[key] = _study(fn)
    return found


def _study(fn: Callable[..., Any]) -> _Known:
    signature = inspect.signature(fn)
    params = list(signature.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.KEYWORD_ONLY and p.default is p.empty for p in params):
        return _Known(signature, (1.0, 0.0))  # no positional call fits: always bound
    low = sum(1 for p in positional if p.default is p.empty)
    varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    return _Known(signature, (float(low), float("inf") if varargs else float(len(positional))))


_KNOWN: dict[tuple[Any, ...], _Known] = {}


def _shown(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    given = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"({', '.join(given)})"


class _Arity(Exception):
    """A pz template function called with the wrong arguments."""

    def __init__(self, message: str, where: tuple[str, tuple[str, ...]]):
        super().__init__(message)
        self.where = where


class _Soft(Exception):
    """A problem with one call that does not stop the rest of the file from rendering."""

    def __init__(self, code: str, message: str, where: tuple[str, tuple[str, ...]], hint: str = ""):
        super().__init__(message)
        self.code, self.message, self.where, self.hint = code, message, where, hint


class _ValueFunctions:
    """`var()` and `env()` of one render (real or masked; SQL literals or YAML text)."""

    def __init__(
        self, values: ResolvedValues, sql: bool, masked: bool, record: Callable[..., None] | None
    ) -> None:
        self.values, self.sql, self.masked, self.record = values, sql, masked, record

    def var(self, name: object, default: object = _UNSET) -> str:
        name = str(name)
        if self.record:
            self.record("var", name)
        if name not in self.values.vars:
            declared = ", ".join(sorted(self.values.vars)) or "none"
            raise _Soft(
                "PZ0209",
                f"var('{name}') is not declared in project.yml vars: (declared: {declared})",
                ("var", (name,)),
            )
        spec, value = self.values.vars[name]
        if value is None and default is not _UNSET and default is not None:
            try:  # var('x', default): the call's default when the var has no value, as the var's type
                value = parse_typed(spec.type, default)
            except ValueError as exc:
                raise _Soft(
                    "PZ0210",
                    f"the default of var('{name}', {default!r}) is not a valid {spec.type}: {exc}",
                    ("var", (name,)),
                    f"give a default of type {spec.type}, or declare the default in project.yml",
                ) from None
        if value is None:
            return TypedValue("NULL" if self.sql else "", None)
        text = sql_literal(spec.type, value) if self.sql else yaml_text(spec.type, value)
        return TypedValue(text, value)

    def env_var(self, name: object, default: object = _UNSET) -> str:
        """`env_var('X', 'default')`: dbt's spelling of env(), the same rules."""
        return self._env("env_var", name, default)

    def env(self, name: object, default: object = _UNSET) -> str:
        return self._env("env", name, default)

    def _env(self, function: str, name: object, default: object) -> str:
        name = str(name)
        if self.record:
            self.record(function, name)
        if name not in self.values.env:
            raise _Soft(
                "PZ0211",
                f"{function}('{name}') is not declared in project.yml env:",
                (function, (name,)),
                f"declare it in project.yml, e.g. env: {{ {name}: {{ default: … }} }} (every environment "
                "variable a project reads is declared there; a default in the call applies once declared)",
            )
        spec, value = self.values.env[name]
        if value is None and default is not _UNSET and default is not None:
            value = str(default)  # env('X', 'default'): the call's default when X is unset
        if value is None and spec.required:
            value = ""  # reported once, as PZ0212 on its declaration in project.yml
        if value is None:
            raise _Soft(
                "PZ0212",
                f"environment variable {name} is not set and has no default",
                (function, (name,)),
                f"export {name}=… before running pz, or give it a default in project.yml or in the call",
            )
        if self.masked and spec.secret:
            value = "***"
        return quote_literal(value) if self.sql else value
