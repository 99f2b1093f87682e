"""Table names as users write them in `table:` keys: `orders`, `analytics.orders`, `"we""ird name"`.

A name has one or two parts separated by dots (schema defaults to `main`). A part is either bare (no dots,
no double quotes) or double-quoted with embedded quotes doubled, as in SQL. Every part is quoted again when
it is placed in SQL, so a name never changes the statement it sits in.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelinez.core.sqlnames import quote_ident


def parse_parts(text: str) -> list[str]:
    """Split `text` into its parts; ValueError when malformed (unbalanced or stray quotes, empty part)."""
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


@dataclass(frozen=True)
class TableName:
    schema: str
    table: str

    @staticmethod
    def parse(text: str) -> TableName:
        parts = parse_parts(text)
        if len(parts) == 1:
            return TableName("main", parts[0])
        if len(parts) == 2:
            return TableName(parts[0], parts[1])
        raise ValueError(
            f"{text!r} has {len(parts)} parts; write table or schema.table (the database is the "
            "connection's file)"
        )

    def sql(self, catalog: str | None = None) -> str:
        prefix = f"{quote_ident(catalog)}." if catalog else ""
        return f"{prefix}{quote_ident(self.schema)}.{quote_ident(self.table)}"

    def __str__(self) -> str:
        return f"{self.schema}.{self.table}"
