"""One rendering of one template: its function table (the pz functions, the portable helpers and the
project's macros, real or with secrets masked), the soft failures it collects (rendered as NULL so the rest
of the file still renders), and its errors as PZ diagnostics located at the call, the template line or the
macro's line (PZ0213; PZ0239/PZ0240 inside a macro).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelinez.compile.helpers import HELPERS, HelperError
from pipelinez.compile.template_budget import MacroTooDeep, SandboxLimit
from pipelinez.compile.template_calls import TemplateFailure
from pipelinez.compile.template_functions import Arity, Functions, Soft, ValueFunctions
from pipelinez.compile.template_locate import locate
from pipelinez.compile.template_signatures import accepts, shown, signature
from pipelinez.compile.values import ResolvedValues
from pipelinez.core.diagnostics import Diagnostic, Place, error

if TYPE_CHECKING:
    from pipelinez.compile.macros import MacroLibrary
    from pipelinez.compile.sandbox import BoundedSandbox

FUNCTIONS = f"source, ref, sink, watermark, var, env, env_var, {', '.join(HELPERS)} and the project's macros"


@dataclass(frozen=True)
class RenderScope:
    """What every render of one project invocation shares: its vars and env, its macros, its sandbox."""

    values: ResolvedValues
    library: MacroLibrary | None
    macro_files: Mapping[str, str]
    env: Callable[[], BoundedSandbox]  # the sandbox, made (and Jinja imported) on first use


class TemplateRender:
    """The functions and the failures of one template's rendering (once, or twice when secrets are masked)."""

    def __init__(
        self,
        scope: RenderScope,
        raw: str,
        file: str,
        functions: Callable[[bool], Functions],
        *,
        sql: bool,
        place: Place | None = None,
    ) -> None:
        self.scope, self.raw, self.file, self.own, self.sql = scope, raw, file, functions, sql
        self.base = place or Place(file)
        self.soft: list[Diagnostic] = []

    def at(
        self,
        code: str,
        message: str,
        function: str = "",
        args: tuple[str, ...] = (),
        hint: str = "",
        exc: BaseException | None = None,
    ) -> Diagnostic:
        # a call's own place in SQL; a YAML value's errors are at the value (its text's own line 1 is
        # not the file's)
        loc = locate(self.raw, function, args) if function and self.sql else None
        line, col = loc if loc else (self.base.line, self.base.col)
        if not loc and self.sql and exc is not None:
            line = _template_line(exc) or line
        return error(code, message, file=self.file, line=line, col=col, next_step=hint)

    def functions(self, masked: bool) -> Functions:
        """The names a template sees in this rendering (the masked one records no call)."""
        own = self.own(not masked)
        record = own.pop("__record__", None)
        values = ValueFunctions(self.scope.values, self.sql, masked, record)
        wrapped = {name: self._soften(name, fn, masked) for name, fn in {**own, **HELPERS}.items()}
        made: dict[str, Any] = {
            **wrapped,
            "var": self._soften("var", values.var, masked),
            "env": self._soften("env", values.env, masked),
            "env_var": self._soften("env_var", values.env_var, masked),
        }
        library = self.scope.library
        if library is not None:  # the macros see this render's functions (and each other)
            made.update(library.functions(lambda: {**made, **self.scope.env().loop_guard()}))
        return made

    def _soften(self, name: str, fn: Callable[..., str], masked: bool) -> Callable[..., str]:
        """`fn` checked for its arguments, its soft failures collected (once: in the unmasked rendering)."""

        def call(*args: Any, **kwargs: Any) -> str:
            if not accepts(fn, args, kwargs):
                raise Arity(
                    f"{name}() takes ({', '.join(signature(fn).parameters)}), not {shown(args, kwargs)}",
                    (name, tuple(str(a) for a in args)),
                )
            try:
                return fn(*args, **kwargs)
            except HelperError as exc:  # located at its call, like a call with wrong arguments
                raise Arity(str(exc), (name, tuple(str(a) for a in args))) from None
            except Soft as exc:
                if not masked:
                    self.soft.append(self.at(exc.code, exc.message, *exc.where, hint=exc.hint))
                return "NULL" if self.sql else ""

        return call

    def failure(self, exc: Exception) -> TemplateFailure:
        """The failure of a rendering that raised `exc` (a user template can raise anything)."""
        syntax = _jinja_error(exc, "TemplateSyntaxError")
        if syntax is not None:
            return TemplateFailure(
                error(
                    "PZ0213",
                    f"template syntax error: {syntax.message}",
                    file=self.file,
                    line=(syntax.lineno if self.sql else self.base.line),
                    col=self.base.col if not self.sql else None,
                )
            )
        message, hint = _render_error(exc)
        in_macro = self._in_macro(exc, message, hint)
        if in_macro is not None:
            return TemplateFailure(in_macro)
        where = exc.where if isinstance(exc, Arity) else ("", ())  # located by its call
        return TemplateFailure(self.at("PZ0213", message, *where, hint=hint, exc=exc))

    def _in_macro(self, exc: Exception, message: str, hint: str) -> Diagnostic | None:
        """PZ0239 (PZ0240: nested too deep) at the macro file's line when `exc` was raised in a macro."""
        library = self.scope.library
        if library is None:
            return None
        from pipelinez.compile.macros import macro_place

        place = macro_place(exc, self.scope.macro_files)
        if place is None:
            return None
        file, line = place
        name = library.macro_at(file, line)
        deep = isinstance(exc, MacroTooDeep)
        return error(
            "PZ0240" if deep else "PZ0239",
            f"in macro '{name}' (called from {self.file}): {message}",
            file=file,
            line=line,
            next_step="" if deep else hint,
        )


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
        return f"template error: {undefined.message}; available functions: {FUNCTIONS}", ""
    if _jinja_error(exc, "SecurityError") is not None:
        return f"the template sandbox refused an operation: {exc}", ""
    if isinstance(exc, SandboxLimit):
        return str(exc), "make the template smaller: fewer loop iterations, less output"
    if isinstance(exc, Arity):
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
