"""Compiled templates, once per distinct text.

Compiling a Jinja template (lex, parse, generate Python, compile it) costs far more than rendering it, and
most pipeline templates are plain SQL with `{{ f('literal', ...) }}` calls only. Those render here without
Jinja, calling the same functions in the same order with the same arguments, so the output and every
failure are what Jinja would give; any other template (and any call of a name the render does not provide)
goes through Jinja, compiled once and kept.

Templates that need Jinja are compiled once per shape: the arguments of their literal calls are taken out
(`{{ ref('orders') }}` becomes `{{ ref(__pz_literal_0) }}`) and given back as values at render time, so
pipelines that differ only in the names they ref() (a loop over columns in each, say) share one compile. The
calls, their arguments and their order are the same, so the output and every failure are too. Jinja's own
lexer confirms first that every literal call the pattern found is a call Jinja sees (none inside a string,
a comment or a raw block); a text that does not lex is compiled as written, for Jinja's own error.
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
_HOLE = "__pz_literal_"  # a literal call argument taken out of a shared template
_PLAIN = re.compile(r"[^{}%#]*")  # an argument that cannot begin or end a Jinja token

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


class SharedTemplate:
    """A Jinja template compiled from a text with its literal call arguments taken out, with this text's
    arguments: renders exactly as the text itself would."""

    def __init__(self, jinja: jinja2.Template, literals: dict[str, str]):
        self._jinja = jinja
        self._literals = literals

    def render(self, context: Mapping[str, Any]) -> str:
        return "".join(self.generate(context))

    def generate(self, context: Mapping[str, Any]) -> Iterator[str]:
        return self._jinja.generate({**context, **self._literals})


Shape = tuple[str, dict[str, str]]  # the text with its literal call arguments taken out; the arguments
Lexed = Callable[[str], list[tuple[str, str]]]  # a text's Jinja tokens (type, value)


def shape_of(raw: str) -> tuple[Shape, list[tuple[str, tuple[str, ...]]]] | None:
    """(the text with its literal call arguments replaced by names and the arguments by name, the calls the
    pattern found with their quoted arguments), or None when it has none."""
    if _HOLE in raw or "\r" in raw:
        return None
    found: list[tuple[str, tuple[str, ...]]] = []
    literals: dict[str, str] = {}

    def hole(match: re.Match[str]) -> str:
        args = tuple(_ARG.findall(match.group(2) or ""))
        found.append((match.group(1), args))
        names = [f"{_HOLE}{len(literals) + k}" for k in range(len(args))]
        literals.update(zip(names, (a[1:-1] for a in args), strict=True))
        if not args:
            return match.group(0)
        # only the literals replaced: the call's own spacing and line breaks kept, so each line of the
        # shape is the text's line (a runtime error is reported at its line in the template)
        holes = iter(names)
        inside = _ARG.sub(lambda _literal: next(holes), match.group(2))
        return raw[match.start() : match.start(2)] + inside + raw[match.end(2) : match.end()]

    text = _CALL.sub(hole, raw)
    return ((text, literals), found) if literals else None


def calls_are_calls(raw: str, found: list[tuple[str, tuple[str, ...]]], lexed: Lexed) -> bool:
    """Whether Jinja's lexer sees exactly the literal calls the pattern found (none in a string, a comment or
    a raw block, none missed); False for a text Jinja does not lex."""
    try:
        tokens = [t for t in lexed(raw) if t[0] != "whitespace"]
    except Exception:  # Jinja's syntax error: raised by compiling the text as written
        return False
    return _lexed_calls(tokens) == found


def _lexed_calls(tokens: list[tuple[str, str]]) -> list[tuple[str, tuple[str, ...]]]:
    """Every `{{ name('literal', ...) }}` in the token stream, as (name, quoted arguments)."""
    calls = []
    for at, (kind, value) in enumerate(tokens):
        if (kind, value) != ("variable_begin", "{{") or at + 2 >= len(tokens):
            continue
        if tokens[at + 1][0] != "name" or tokens[at + 2] != ("operator", "("):
            continue
        args: list[str] = []
        pos = at + 3
        while pos < len(tokens) and tokens[pos][0] == "string":
            args.append(tokens[pos][1])
            pos += 1
            if tokens[pos : pos + 1] != [("operator", ",")]:
                break
            pos += 1
        if tokens[pos : pos + 2] == [("operator", ")"), ("variable_end", "}}")] and (
            not args or tokens[pos - 1][0] == "string"
        ):
            calls.append((tokens[at + 1][1], tuple(args)))
    return calls


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
        self._shapes: dict[str, jinja2.Template] = {}  # compiled by shape (literal arguments taken out)
        self._lexed: dict[tuple[str, str], bool] = {}  # calls_are_calls by shape and quotes, plain arguments

    def get(self, raw: str) -> Renderable:
        """The compiled template; raises jinja2.TemplateSyntaxError as `from_string` does."""
        compiled = self._compiled.get(raw)
        if compiled is None:
            pieces = literal_calls(raw)
            if pieces is not None and self._calls_jinja_name(pieces):
                pieces = None
            compiled = LiteralCallTemplate(self._env, raw, pieces) if pieces is not None else self._jinja(raw)
            self._compiled[raw] = compiled
        return compiled

    def _jinja(self, raw: str) -> Renderable:
        """Compiled by Jinja, once per shape when the text has literal calls."""
        env = self._env()
        shaped = shape_of(raw)
        if shaped is None or not self._calls_are_calls(raw, shaped, env):
            return env.from_string(raw)
        (text, literals), _ = shaped
        template = self._shapes.get(text)
        if template is None:
            try:
                template = env.from_string(text)
            except Exception:  # reported as the text itself gives it
                return env.from_string(raw)
            self._shapes[text] = template
        return SharedTemplate(template, literals)

    def _calls_are_calls(
        self, raw: str, shaped: tuple[Shape, list[tuple[str, tuple[str, ...]]]], env: jinja2.Environment
    ) -> bool:
        """calls_are_calls, lexed once per shape when no argument holds `{`, `}`, `%` or `#`: texts of one
        shape then differ only inside those quoted arguments, which cannot change where Jinja's tokens (a
        block, a comment, a raw block, a string around them) begin or end, so they lex alike."""
        (text, literals), found = shaped
        quotes = "".join(arg[0] for _, args in found for arg in args)
        key = (text, quotes) if all(_PLAIN.fullmatch(v) for v in literals.values()) else None
        if key is not None and key in self._lexed:
            return self._lexed[key]
        verdict = calls_are_calls(raw, found, lambda t: [(kind, value) for _, kind, value in env.lex(t)])
        if key is not None:
            self._lexed[key] = verdict
        return verdict

    def _calls_jinja_name(self, pieces: list[Piece]) -> bool:
        return any(not isinstance(p, str) and p[0] in self._jinja_names for p in pieces)
