"""Tier 4's DuckDB errors as diagnostics: a parser or binder message parsed into its kind, summary and the
line and caret it points at (`parse_duck_error`), then mapped to its PZ04xx code at the place in the file the
SQL was written (`map_sql_error`), an ephemeral pipeline's lines traced back to where they were inlined from.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pipelinez.compile.inlining import Origin
from pipelinez.core.diagnostics import Diagnostic, error
from pipelinez.core.duck_messages import condense

_LINE = re.compile(r"^LINE (\d+): (.*)$")
_UNKNOWN_COLUMN = re.compile(r'column "[^"]*" not found|Referenced column|does not have a column named')
_UNKNOWN_FUNCTION = re.compile(r"Function with name \S+ does not exist")


@dataclass(frozen=True)
class DuckError:
    """A DuckDB error message taken apart: kind, summary, line and caret."""

    kind: str  # Parser, Binder, Catalog, Conversion, ...
    summary: str  # message before any LINE context, without the "X Error: " prefix
    line: int | None  # 1-based line in the executed text
    caret: int | None  # 0-based offset of the caret within the executed line


def parse_duck_error(message: str, executed: str) -> DuckError:
    lines = message.split("\n")
    head = lines[0]
    kind = head.split(" Error:", 1)[0] if " Error:" in head else "Unknown"
    body: list[str] = []
    line_no: int | None = None
    caret: int | None = None
    for i, text in enumerate(lines):
        match = _LINE.match(text)
        if match:
            line_no = int(match.group(1))
            snippet = match.group(2)
            prefix = len(text) - len(snippet)
            if i + 1 < len(lines) and "^" in lines[i + 1]:
                offset = lines[i + 1].index("^") - prefix
                if snippet.startswith("..."):
                    snippet, offset = snippet[3:], offset - 3
                snippet = snippet.removesuffix("...")
                exec_lines = executed.split("\n")
                if 0 < line_no <= len(exec_lines):
                    base = exec_lines[line_no - 1].find(snippet[: max(1, len(snippet))])
                    caret = max(0, base) + max(0, offset)
            break
        body.append(text)
    summary = "\n".join(body).strip()
    summary = summary.split(" Error: ", 1)[1] if " Error: " in summary.split("\n")[0] else summary
    return DuckError(kind, summary.strip(), line_no, caret)


def map_sql_error(
    err: DuckError, place_file: str, prefix_len: int, node: str, origins: Sequence[Origin] = ()
) -> Diagnostic:
    line, col = err.line, None
    if err.caret is not None and line is not None:
        col = err.caret - (prefix_len if line == 1 else 0) + 1
        col = max(1, col)
    place_file, line, col, where = in_file(place_file, line, col, node, origins)
    summary = err.summary
    if err.kind == "Permission":  # a file or URL read, refused by the locked tier-4 database
        return error(
            "PZ0413",
            f"pipeline '{node}' reads outside its inputs: {condense(summary)}{where}; a pipeline reads only "
            "source() and ref()",
            file=place_file,
            line=line,
            col=col,
        )
    extension = _NEEDED_EXTENSION.search(summary)
    if extension:  # an autoloaded type or function: tier 4's locked database loads no extension
        return error(
            "PZ0414",
            f"pipeline '{node}' needs DuckDB's '{extension.group(1)}' extension{where}, which tier 4 cannot "
            "load: binding runs with external access off",
            file=place_file,
            line=line,
            col=col,
        )
    if err.kind == "Parser":
        code = "PZ0401"
    elif err.kind == "Catalog":
        code = "PZ0402"
    elif err.kind == "Binder" and _UNKNOWN_COLUMN.search(summary):
        code = "PZ0412"
    else:
        code = "PZ0403"
    text = condense(summary)
    return error(code, f"pipeline '{node}': {text}{where}", file=place_file, line=line, col=col)


_NEEDED_EXTENSION = re.compile(r"(?:install|load) the required extension '([\w-]+)'", re.IGNORECASE)


def in_file(
    place_file: str, line: int | None, col: int | None, node: str, origins: Sequence[Origin]
) -> tuple[str, int | None, int | None, str]:
    """A line:col of the executed SQL back in the file it was written in, and where it was inlined from."""
    if line is None or not 0 < line <= len(origins):
        return place_file, line, col, ""
    origin = origins[line - 1]
    col = None if col is None else max(1, col + origin.col_shift)
    where = f" (in ephemeral '{origin.pipeline}', which '{node}' inlines)" if origin.pipeline != node else ""
    return origin.file, origin.line, col, where


def unknown_name(err: DuckError) -> str | None:
    """ "column" or "function" for a binder error about a name the query misspelt, else None."""
    if err.kind == "Binder" and _UNKNOWN_COLUMN.search(err.summary):
        return "column"
    if err.kind == "Catalog" and _UNKNOWN_FUNCTION.search(err.summary):
        return "function"
    return None
