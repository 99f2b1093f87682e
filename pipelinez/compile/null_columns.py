"""Tier 4's way to every unknown column and function of a pipeline in one validate: the reference (or the
whole call) DuckDB's caret points at is replaced by NULL, so the query can be bound again and DuckDB names the
next one. The replacement changes the line's length, so later carets on that line are moved back to where
the text was written."""

from __future__ import annotations

import re

MAX_BIND_ERRORS = 10  # a pipeline's column errors reported in one validate: each costs one more bind
# a column reference where DuckDB's caret points: `name`, `"Name"`, `o.name`, `"o"."name"`
_COLUMN_REF = re.compile(r'(?:"(?:[^"]|"")*"|[^\W\d][\w$]*)(?:\s*\.\s*(?:"(?:[^"]|"")*"|[^\W\d][\w$]*))*')

Shift = tuple[int, int, int]  # (1-based line, caret just after the NULL, change of the line's length)


def null_at(executed: str, line: int | None, caret: int | None) -> tuple[str, list[Shift]] | None:
    """The text with the column reference at (line, 0-based caret) replaced by NULL, and the shift; None
    when no reference starts there."""
    if line is None or caret is None:
        return None
    lines = executed.split("\n")
    if not 0 < line <= len(lines):
        return None
    text = lines[line - 1]
    match = _COLUMN_REF.match(text, caret)
    if match is None:
        return None
    lines[line - 1] = text[: match.start()] + "NULL" + text[match.end() :]
    return "\n".join(lines), [(line, match.start() + 4, 4 - (match.end() - match.start()))]


def unshifted(line: int | None, caret: int | None, shifts: list[Shift]) -> int | None:
    """A caret in the replaced text back to where it is in the text as written."""
    if caret is None:
        return None
    for at_line, after, delta in reversed(shifts):
        if at_line == line and caret >= after:
            caret -= delta
    return caret


_CALL_START = re.compile(
    r'(?:"(?:[^"]|"")*"|[^\W\d][\w$]*)(?:\s*\.\s*(?:"(?:[^"]|"")*"|[^\W\d][\w$]*))*\s*\('
)
_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"")


def null_call_at(executed: str, line: int | None, caret: int | None) -> tuple[str, list[Shift]] | None:
    """The text with the function call at (line, 0-based caret), arguments and all, replaced by NULL; its
    line breaks are kept, so later lines keep their numbers. None when no whole call starts there."""
    if line is None or caret is None:
        return None
    lines = executed.split("\n")
    if not 0 < line <= len(lines):
        return None
    start = sum(len(text) + 1 for text in lines[: line - 1]) + caret
    match = _CALL_START.match(executed, start)
    if match is None:
        return None
    end = _closing_paren(executed, match.end())
    if end is None:
        return None
    span = executed[start:end]
    breaks = span.count("\n")
    replaced = executed[:start] + "NULL" + "\n" * breaks + executed[end:]
    if not breaks:
        return replaced, [(line, caret + 4, 4 - len(span))]
    end_col = len(span) - span.rfind("\n") - 1  # the column after the `)` on its own line
    return replaced, [(line + breaks, 0, -end_col)]


def _closing_paren(text: str, at: int) -> int | None:
    """The offset just after the `)` that closes the `(` before `at`, stepping over quoted text."""
    depth = 1
    i = at
    while i < len(text):
        char = text[i]
        if char in "'\"":
            quoted = _QUOTED.match(text, i)
            if quoted is None:
                return None
            i = quoted.end()
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None
