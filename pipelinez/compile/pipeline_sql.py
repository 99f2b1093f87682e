"""Splitting a rendered pipeline into its leading sink clauses and its query.

The query keeps its original line layout (consumed clauses become blanks), so DuckDB's LINE numbers in
compile errors are the file's own line numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipelinez.compile.templating import SINK_TOKEN_RE

_SKIP = re.compile(r"(\s+|--[^\n]*(\n|$)|/\*.*?\*/)", re.S)
_CLAUSE = re.compile(r"INSERT\s+INTO\s+__pz_sink_(\d+)__", re.I)


@dataclass(frozen=True)
class SplitPipeline:
    """A rendered pipeline split into its leading sink() clauses and its query."""

    sink_indexes: tuple[int, ...]  # indexes of sink() calls used as leading clauses, in order
    query: str  # the rendered query, blank-padded to keep line numbers
    misplaced: tuple[int, ...]  # sink() calls found anywhere else


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def split_pipeline(rendered: str) -> SplitPipeline:
    pos = 0
    out: list[str] = []
    indexes: list[int] = []
    while True:
        skip = _SKIP.match(rendered, pos)
        if skip:
            out.append(skip.group(0))
            pos = skip.end()
            continue
        clause = _CLAUSE.match(rendered, pos)
        if not clause:
            break
        indexes.append(int(clause.group(1)))
        out.append(_blank(clause.group(0)))
        pos = clause.end()
    rest = rendered[pos:]
    misplaced = tuple(int(m.group(1)) for m in SINK_TOKEN_RE.finditer(rest))
    return SplitPipeline(tuple(indexes), "".join(out) + rest, misplaced)


def has_query(query: str) -> bool:
    return bool(_strip_comments(query).strip().strip(";").strip())


def _strip_comments(text: str) -> str:
    return re.sub(r"--[^\n]*|/\*.*?\*/", " ", text, flags=re.S)


_FINAL_SEMICOLON = re.compile(r";(?:\s|--[^\n]*|/\*.*?\*/)*\Z", re.S)


def without_final_semicolon(sql: str) -> str:
    """The query without its closing `;`, even when comments follow it (blanked, so positions hold)."""
    match = _FINAL_SEMICOLON.search(sql)
    return sql if match is None else sql[: match.start()] + " " + sql[match.start() + 1 :]


# a string or quoted name (closed), or what may start one that the scan does not follow (an unclosed quote,
# a comment, dollar quoting, a backslash escape), or a parenthesis
_LEXEMES = re.compile(r"""'[^'\\]*'|"[^"\\]*"|['"$\\]|--|/\*|[()]""")


def nested_alone(query: str) -> bool:
    """Whether the query (no `;`, starting as a query) is certainly read whole as the subquery of its
    wrapping: every parenthesis outside strings and quoted names closes one it opened, and nothing in it
    (a comment, dollar quoting, an escape, an unclosed quote) could hide one from this scan. A query that
    fails this is parsed (`dry_compile._one_query`); one that passes but is not a query fails its bind, and
    goes to CREATE TABLE AS for the error as before."""
    depth = 0
    for lexeme in _LEXEMES.findall(query):
        if lexeme == "(":
            depth += 1
        elif lexeme == ")":
            depth -= 1
            if depth < 0:
                return False
        elif len(lexeme) < 2 or lexeme in ("--", "/*"):
            return False
    return depth == 0
