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


def parse_parts(text: str) -> list[str]:
    """Strictly split a dotted name (`schema.table`, `"we""ird".t`) into its parts; ValueError when
    malformed (unbalanced or stray quotes, empty part, NUL)."""
    parts: list[str] = []
    i, n = 0, len(text)
    while True:
        if i < n and text[i] == '"':
            i += 1
            part = ""
            while True:
                if i >= n:
                    raise ValueError(f"unbalanced double quote in {text!r}")
                if text[i] == '"':
                    if i + 1 < n and text[i + 1] == '"':
                        part += '"'
                        i += 2
                        continue
                    i += 1
                    break
                part += text[i]
                i += 1
        else:
            start = i
            while i < n and text[i] != ".":
                if text[i] == '"':
                    raise ValueError(
                        f"a double quote inside a bare name part in {text!r}; quote the whole part "
                        'and double the quote: "we""ird"'
                    )
                i += 1
            part = text[start:i].strip()
        if not part:
            raise ValueError(f"empty name part in {text!r}")
        if "\x00" in part:
            raise ValueError("a name holds a NUL byte")
        parts.append(part)
        if i >= n:
            return parts
        if text[i] != ".":
            raise ValueError(f"unexpected {text[i]!r} after a quoted part in {text!r}")
        i += 1


def quote_literal(value: str) -> str:
    if "\x00" in value:
        raise ValueError("string literal contains a NUL byte")
    return "'" + value.replace("'", "''") + "'"
