"""DuckDB error text condensed for a user: the first meaningful line, plus DuckDB's own suggestion.

DuckDB's messages run over several lines: the error, then `Did you mean "x"?`, `Candidate bindings: : "a"`, a
tab-indented list of candidate functions, and a LINE/caret context. A diagnostic carries one line; what else
is worth reading is folded into it as "did you mean …" or "candidates: …".

A value DuckDB quotes may itself hold a newline (a CSV field, a string it could not cast): inside a quoted
segment a newline is escaped (`\\n`), never a place to cut the message. A CSV reader's error names the file,
the line and the cause (`csv_error`), not only "CSV Error on Line: 3": DuckDB puts the cause after the row it
echoes and the file in its list of reader options.
"""

from __future__ import annotations

import re

_KIND = re.compile(r"^[A-Z][A-Za-z ]* Error: ")
_MEAN = re.compile(r"^Did you mean (.+?)\??$")
_BINDINGS = re.compile(r"^Candidate bindings:[\s:]*(.*)$")
_MAX_CANDIDATES = 3
# a quoted segment (the quote not right after a letter or digit) that may span lines, never a blank line
_QUOTED_MULTILINE = re.compile(
    r"""(?<![A-Za-z0-9])(?:'(?:[^'\n]|\n(?![ \t]*\n))*'|"(?:[^"\n]|\n(?![ \t]*\n))*")"""
)
_CSV_LINE = re.compile(r"CSV Error on Line: (\d+)")
_CSV_FILE = re.compile(r"^[ \t]*file = (.+?)[ \t]*$", re.MULTILINE)
_CSV_NOT_CAUSE = re.compile(r"^(?:Original Line:|Possible fixes|\*)")


def escape_quoted_newlines(message: str) -> str:
    """`message` with every newline inside a quoted value written `\\n`, so the value stays on its line."""
    if "\n" not in message:
        return message
    return _QUOTED_MULTILINE.sub(lambda m: m.group().replace("\n", "\\n"), message)


def csv_error(message: str) -> str | None:
    """A DuckDB CSV reader error as one line: `CSV error in <file> line <n>: <cause>` (the file when DuckDB
    names it); None for any other message."""
    found = _CSV_LINE.search(message)
    if found is None:
        return None
    text = escape_quoted_newlines(message)
    lines = [line.strip() for line in text[text.find(found.group()) :].splitlines()]
    cause = next((line for line in lines[1:] if line and not _CSV_NOT_CAUSE.match(line)), "")
    cause = cause.rstrip(".")
    named = _CSV_FILE.search(message)
    where = f"{named.group(1)} line {found.group(1)}" if named else f"line {found.group(1)}"
    return f"CSV error in {where}: {cause}" if cause else f"CSV error in {where}"


def _candidates(text: str) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()]


def condense(message: str) -> str:
    """One line: the error without its `X Error:` prefix or LINE context, plus any suggestion DuckDB gave."""
    csv = csv_error(message)
    if csv is not None:
        return csv
    head = escape_quoted_newlines(re.split(r"\n\s*LINE \d+:", message, maxsplit=1)[0])
    lines = [line.strip() for line in head.splitlines() if line.strip()]
    if not lines:
        return message.strip()
    first = _KIND.sub("", lines[0]).rstrip()
    suggestion = ""
    functions: list[str] = []
    for line in lines[1:]:
        mean, bindings = _MEAN.match(line), _BINDINGS.match(line)
        if mean:
            suggestion = f"did you mean {mean.group(1)}?"
        elif bindings and bindings.group(1):
            found = _candidates(bindings.group(1))
            suggestion = (
                f"did you mean {found[0]}?"
                if len(found) == 1
                else "candidates: " + ", ".join(found[:_MAX_CANDIDATES])
            )
        elif "->" in line and "(" in line:  # a candidate function signature
            functions.append(line.split("->")[0].strip())
    if functions and not suggestion:
        more = len(functions) - _MAX_CANDIDATES
        suggestion = (
            "candidates: " + ", ".join(functions[:_MAX_CANDIDATES]) + (f" (+{more} more)" if more > 0 else "")
        )
    first = first.rstrip("!.").rstrip()
    return f"{first}; {suggestion}" if suggestion else first
