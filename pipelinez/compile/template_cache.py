"""Compiled templates, once per distinct text.

Compiling a Jinja template (lex, parse, generate Python, compile it) costs far more than rendering it, and
most pipeline templates are plain SQL with `{{ f('literal', ...) }}` calls only. Those render here without
Jinja, calling the same functions in the same order with the same arguments, so the output and every
failure are what Jinja would give; any other template (and any call of a name the render does not provide)
goes through Jinja, compiled once and kept.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # Jinja is imported when a template needs it: most never do
    import jinja2

EnvironmentOf = Callable[[], "jinja2.Environment"]  # the sandbox, made on first use

_LITERAL = r"""'[^'\\\n]*'|"[^"\\\n]*\""""
_CALL = re.compile(
    rf"\{{\{{\s*([A-Za-z_]\w*)\s*\(\s*((?:{_LITERAL})(?:\s*,\s*(?:{_LITERAL}))*)?\s*\)\s*\}}\}}"
)
_ARG = re.compile(_LITERAL)
_JINJA_START = ("{{", "{%", "{#")

Piece = str | tuple[str, tuple[str, ...]]


class Renderable(Protocol):
    def render(self, *args: Any, **kwargs: Any) -> str: ...

    def generate(self, *args: Any, **kwargs: Any) -> Iterator[str]: ...


class LiteralCallTemplate:
    """A template whose only Jinja is `{{ name('literal', ...) }}` calls."""

    def __init__(self, env: EnvironmentOf, raw: str, pieces: list[Piece]):
        self._env = env
        self._raw = raw
        self._pieces = pieces
        self._jinja: jinja2.Template | None = None

    def render(self, context: Mapping[str, Any]) -> str:
        return "".join(self.generate(context))

    def knows(self, context: Mapping[str, Any]) -> bool:
        """Whether `context` provides every name the template calls (else Jinja renders it)."""
        return all(isinstance(p, str) or p[0] in context for p in self._pieces)

    def generate(self, context: Mapping[str, Any]) -> Iterator[str]:
        """The output in chunks, as jinja2.Template.generate gives it."""
        if not self.knows(context):
            # an unknown name: Jinja says so in its own words
            if self._jinja is None:
                self._jinja = self._env().from_string(self._raw)
            yield from self._jinja.generate(context)
            return
        for piece in self._pieces:
            yield piece if isinstance(piece, str) else str(context[piece[0]](*piece[1]))


def literal_calls(raw: str) -> list[Piece] | None:
    """The text split into data and literal calls, or None when it holds any other Jinja."""
    if "\r" in raw:
        return None  # Jinja normalizes newlines; leave that to it
    pieces: list[Piece] = []
    pos = 0
    for match in _CALL.finditer(raw):
        data = raw[pos : match.start()]
        if any(s in data for s in _JINJA_START) or data.endswith("{"):
            return None
        if data:
            pieces.append(data)
        args = tuple(a[1:-1] for a in _ARG.findall(match.group(2) or ""))
        pieces.append((match.group(1), args))
        pos = match.end()
    rest = raw[pos:]
    if any(s in rest for s in _JINJA_START):
        return None
    if rest:
        pieces.append(rest)
    return pieces


class TemplateCache:
    """Each distinct template text compiled once per invocation."""

    def __init__(self, env: EnvironmentOf, jinja_names: frozenset[str] = frozenset()):
        self._env = env
        self._jinja_names = jinja_names  # names whose calls Jinja renders (the project's macros)
        self._compiled: dict[str, Renderable] = {}

    def get(self, raw: str) -> Renderable:
        """The compiled template; raises jinja2.TemplateSyntaxError as `from_string` does."""
        compiled = self._compiled.get(raw)
        if compiled is None:
            pieces = literal_calls(raw)
            if pieces is not None and self._calls_jinja_name(pieces):
                pieces = None
            compiled = (
                LiteralCallTemplate(self._env, raw, pieces)
                if pieces is not None
                else self._env().from_string(raw)
            )
            self._compiled[raw] = compiled
        return compiled

    def _calls_jinja_name(self, pieces: list[Piece]) -> bool:
        return any(not isinstance(p, str) and p[0] in self._jinja_names for p in pieces)
