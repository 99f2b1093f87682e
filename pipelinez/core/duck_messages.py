"""DuckDB error text condensed for a user: the first meaningful line, plus DuckDB's own suggestion.

DuckDB's messages run over several lines: the error, then `Did you mean "x"?`, `Candidate bindings: : "a"`, a
tab-indented list of candidate functions, and a LINE/caret context. A diagnostic carries one line; what else
is worth reading is folded into it as "did you mean …" or "candidates: …".
"""

from __future__ import annotations

import re

_KIND = re.compile(r"^[A-Z][A-Za-z ]* Error: ")
_MEAN = re.compile(r"^Did you mean (.+?)\??$")
_BINDINGS = re.compile(r"^Candidate bindings:[\s:]*(.*)$")
_MAX_CANDIDATES = 3


def _candidates(text: str) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()]


def condense(message: str) -> str:
    """One line: the error without its `X Error:` prefix or LINE context, plus any suggestion DuckDB gave."""
    head = re.split(r"\n\s*LINE \d+:", message, maxsplit=1)[0]
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
