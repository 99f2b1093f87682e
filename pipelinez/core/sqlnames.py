"""Quoting of identifiers and literals for SQL built from configuration. Nothing from config is pasted raw."""

from __future__ import annotations

import re

NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
_NAME = re.compile(NAME_PATTERN)


def is_name(text: str) -> bool:
    return bool(_NAME.match(text))


def quote_ident(name: str) -> str:
    """A double-quoted SQL identifier; embedded quotes doubled, NUL refused."""
    if "\x00" in name:
        raise ValueError("identifier contains a NUL byte")
    return '"' + name.replace('"', '""') + '"'


def quote_qualified(dotted: str) -> str:
    """Quote each part of `schema.table` (parts split on dots outside quotes)."""
    return ".".join(quote_ident(part) for part in split_qualified(dotted))


def split_qualified(dotted: str) -> list[str]:
    parts: list[str] = []
    current = ""
    in_quotes = False
    i = 0
    while i < len(dotted):
        ch = dotted[i]
        if ch == '"':
            if in_quotes and i + 1 < len(dotted) and dotted[i + 1] == '"':
                current += '"'
                i += 2
                continue
            in_quotes = not in_quotes
        elif ch == "." and not in_quotes:
            parts.append(current)
            current = ""
        else:
            current += ch
        i += 1
    parts.append(current)
    return parts


def quote_literal(value: str) -> str:
    if "\x00" in value:
        raise ValueError("string literal contains a NUL byte")
    return "'" + value.replace("'", "''") + "'"
