"""Where a call is written in a raw template: the (line, col) of the `{{` around `f('literal', ...)`, so each
recorded call and each error of a call is reported at its own place in the file. Plain text scans, cached
per template text; no Jinja.
"""

from __future__ import annotations

import functools
import re

LITERAL_CALL = re.compile(
    r"""\b([A-Za-z_]\w*)\s*\(\s*((?:'[^']*'|"[^"]*")(?:\s*,\s*(?:'[^']*'|"[^"]*"))*)\s*\)"""
)
LITERAL_ARG = re.compile(r"'([^']*)'|\"([^\"]*)\"")


_OPEN_LITERAL = re.compile(r"""\(\s*['"]""")  # where a call with a literal first argument can open


@functools.lru_cache(maxsize=64)
def literal_calls(raw: str) -> dict[tuple[str, tuple[str, ...]], int]:
    """Offset of the first `f('literal', ...)` call of each (f, args) in a template: one scan, not one
    regex per call (a pattern per call name and arguments would be compiled again for every call). The
    matches are `LITERAL_CALL.finditer`'s, found from the few `('` of the text instead of trying the
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
        match = LITERAL_CALL.match(raw, start)
        if match is None:
            continue
        args = tuple(a or b for a, b in LITERAL_ARG.findall(match.group(2)))
        found.setdefault((match.group(1), args), match.start())
        end = match.end()
    return found


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def locate(raw: str, function: str, args: tuple[str, ...]) -> tuple[int, int] | None:
    """(line, col) of the `{{` around the first call `function(args...)` in the raw template (a call with
    more arguments, like var('x', 7), counts when its first ones match)."""
    start = literal_calls(raw).get((function, args))
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


def locate_nth(raw: str, function: str, args: tuple[str, ...], nth: int) -> tuple[int, int] | None:
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
