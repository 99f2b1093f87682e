"""Resolving ref() tokens, with a line map back to the files the text came from.

A materialized pipeline's ref becomes its staging table; an ephemeral one's becomes its query inlined as a
subquery on lines of its own. The line map says, for every line of the result, which file and line it came
from, so an error inside (or after) an inlined query is reported where the user wrote it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipelinez.compile.templating import REF_TOKEN_RE
from pipelinez.core.sqlnames import quote_ident

if TYPE_CHECKING:
    from pipelinez.compile.semantic import PipelineInfo


@dataclass(frozen=True)
class Origin:
    """Where one line of a resolved query was written: file, line, and how far its columns shifted."""

    file: str
    line: int
    pipeline: str
    col_shift: int = 0  # add to a column on this line to get the column in the file


def strip_trailing_semicolons(query: str) -> str:
    return re.sub(r";\s*$", "", query.rstrip())


def inline(
    query: str, infos: dict[str, PipelineInfo], name: str, display: bool = False
) -> tuple[str, list[Origin]]:
    """(query with every ref resolved, the origin of each of its lines). `name` is the pipeline of `query`."""
    file = infos[name].source.file
    parts: list[str] = []
    origins = [Origin(file, 1, name)]
    line = 1
    pos = 0

    def take(text: str) -> None:
        nonlocal line
        parts.append(text)
        for _ in range(text.count("\n")):
            line += 1
            origins.append(Origin(file, line, name))

    for match in REF_TOKEN_RE.finditer(query):
        take(query[pos : match.start()])
        pos = match.end()
        ref = match.group(1)
        info = infos[ref]
        if not info.ephemeral:
            parts.append(quote_ident(ref))
            continue
        inner, inner_origins = inline(info.display_query if display else info.query, infos, ref, display)
        inner = strip_trailing_semicolons(inner)
        inner_origins = inner_origins[: inner.count("\n") + 1]
        parts.append("(\n" + inner + "\n)")
        origins += inner_origins
        line_start = query.rfind("\n", 0, match.end()) + 1
        origins.append(Origin(file, line, name, col_shift=match.end() - line_start - 1))  # the ")" line
    take(query[pos:])
    return "".join(parts), origins


def inline_text(query: str, infos: dict[str, PipelineInfo], name: str, display: bool = False) -> str:
    """What `inline` gives as text, without the line map. A query that reads no ephemeral pipeline is one
    substitution of its ref tokens (no lines counted): most pipelines of a project."""
    if any(infos[ref].ephemeral for ref in REF_TOKEN_RE.findall(query)):
        return inline(query, infos, name, display)[0]
    return REF_TOKEN_RE.sub(lambda match: quote_ident(match.group(1)), query)
