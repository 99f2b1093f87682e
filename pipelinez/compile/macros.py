"""The project's shared macros: macros/**/*.sql, each file a set of `{% macro name(args) %}` definitions.

Every file is parsed once per invocation (PZ0126 syntax, PZ0127 anything outside a macro, PZ0128 a name
defined twice, PZ0129 a name of pz's own). A render that calls a macro gets one `MacroCall` per macro name;
the first call of a render builds the macro files' modules with that render's own functions (source, ref,
var, ... and the other macros), so a macro's ref() is recorded for the calling pipeline and its loops count
against the caller's budget. Each file is compiled with its project path as the file name, so an error in a
macro has its file and line in the traceback (`macro_place`).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelinez.compile.helpers import HELPERS
from pipelinez.core.diagnostics import Diagnostic, error

if TYPE_CHECKING:
    import jinja2

    from pipelinez.compile.sandbox import BoundedSandbox

PZ_FUNCTIONS = frozenset({"source", "ref", "sink", "watermark", "var", "env", "env_var", "doc", *HELPERS})


@dataclass(frozen=True)
class MacroDef:
    name: str
    file: str
    line: int


class MacroLibrary:
    """Every valid macro of the project by name, and the problems of its files."""

    def __init__(self, files: Mapping[str, str], env: BoundedSandbox):
        self.env = env
        self.defs: dict[str, MacroDef] = {}
        self.problems: list[Diagnostic] = []
        self._templates: dict[str, jinja2.Template] = {}
        self._lines: dict[str, list[tuple[int, str]]] = {}  # file -> (line, macro name), sorted
        for file, text in sorted(files.items()):
            self._read(file, text)

    def _read(self, file: str, text: str) -> None:
        from jinja2 import TemplateSyntaxError, nodes

        try:
            tree = self.env.parse(text, file, file)
            code = self.env.compile(text, file, file)
        except TemplateSyntaxError as exc:
            self.problems.append(
                error("PZ0126", f"macro file syntax error: {exc.message}", file=file, line=exc.lineno)
            )
            return
        for node in tree.body:
            if isinstance(node, nodes.Macro):
                self._define(MacroDef(node.name, file, node.lineno))
            elif not _blank(node):
                self.problems.append(
                    error(
                        "PZ0127",
                        f"{file} holds {_what(node)} outside a macro; a macro file holds only "
                        "{% macro %} definitions",
                        file=file,
                        line=node.lineno,
                    )
                )
        self._templates[file] = self.env.template_class.from_code(self.env, code, self.env.globals, None)
        self._lines[file] = sorted((d.line, d.name) for d in self.defs.values() if d.file == file)

    def _define(self, found: MacroDef) -> None:
        if found.name in PZ_FUNCTIONS:
            self.problems.append(
                error(
                    "PZ0129",
                    f"macro '{found.name}' has the name of pz's own function {found.name}()",
                    file=found.file,
                    line=found.line,
                )
            )
            return
        first = self.defs.get(found.name)
        if first is not None:
            self.problems.append(
                error(
                    "PZ0128",
                    f"macro '{found.name}' is defined twice: {first.file}:{first.line} and "
                    f"{found.file}:{found.line}",
                    file=found.file,
                    line=found.line,
                )
            )
            return
        self.defs[found.name] = found

    def functions(self, context: Callable[[], dict[str, Any]]) -> dict[str, MacroCall]:
        """One callable per macro for one render; `context` gives that render's functions."""
        state = _RenderState(self, context)
        return {name: MacroCall(name, state) for name in self.defs}

    def module(self, file: str, context: dict[str, Any]) -> Any:
        return self._templates[file].make_module(context)

    def macro_at(self, file: str, line: int) -> str | None:
        """The name of the macro of `file` whose definition holds `line` (the last one opened before it)."""
        lines = self._lines.get(file, [])
        index = bisect.bisect_right(lines, (line, "\uffff")) - 1
        return lines[index][1] if index >= 0 else None


class _RenderState:
    """The macro modules of one render, built on the first macro call."""

    def __init__(self, library: MacroLibrary, context: Callable[[], dict[str, Any]]):
        self.library = library
        self.context = context
        self.modules: dict[str, Any] = {}

    def macro(self, name: str) -> Any:
        file = self.library.defs[name].file
        if file not in self.modules:
            self.modules[file] = self.library.module(file, self.context())
        return getattr(self.modules[file], name)


class MacroCall:
    """A project macro as a template function (the sandbox bounds how deep these calls nest)."""

    pz_macro = True

    def __init__(self, name: str, state: _RenderState):
        self.name = name
        self._state = state

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        return str(self._state.macro(self.name)(*args, **kwargs))


def macro_place(exc: BaseException, files: Mapping[str, str]) -> tuple[str, int] | None:
    """(file, line) of the innermost macro-file frame of the exception's traceback (Jinja rewrote its
    frames to the templates' own lines), None when the error did not happen in a macro."""
    place = None
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name in files:
            place = (name, tb.tb_lineno)
        tb = tb.tb_next
    return place


def _blank(node: Any) -> bool:
    from jinja2 import nodes

    return isinstance(node, nodes.Output) and all(
        isinstance(part, nodes.TemplateData) and not part.data.strip() for part in node.nodes
    )


def _what(node: Any) -> str:
    from jinja2 import nodes

    if isinstance(node, nodes.Output):
        texts = [p for p in node.nodes if not (isinstance(p, nodes.TemplateData) and not p.data.strip())]
        if texts and isinstance(texts[0], nodes.TemplateData):
            return f"text ('{texts[0].data.strip()[:40]}')"
        return "a {{ }} expression"
    return f"a {{% {type(node).__name__.lower()} %}} tag"
