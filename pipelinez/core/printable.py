"""One rule for user-supplied text inside a message: control characters are shown escaped.

A name a user wrote (a YAML key, an `env('…')` argument, a file name, a value) may hold a newline, a tab, an
escape sequence or a Unicode line separator. Echoed raw, it splits one diagnostic over two lines (a reader
or a log parser sees a second, codeless message) or drives the terminal. Every diagnostic, node error and
note passes its free text through `printable`, so whatever the call site formatted, a message is one line.
"""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, and the characters str.splitlines and terminals treat as line breaks
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _escaped(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def printable(text: str) -> str:
    """`text` with every control character escaped the way Python writes it (`\\n`, `\\t`, `\\x1b`,
    `\\u2028`); idempotent, and the identity on text without control characters."""
    if text.isprintable():  # C code, and never true of text holding a control character: most text
        return text
    return _CONTROL.sub(_escaped, text) if _CONTROL.search(text) else text


def excerpt(text: str, limit: int = 40) -> str:
    """A short, escaped excerpt of text pz read from a file: never more of it than `limit` characters."""
    shown = printable(text)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def quoted(name: str) -> str:
    """A user-supplied name as messages show it: in single quotes, control characters escaped."""
    return f"'{printable(name)}'"
