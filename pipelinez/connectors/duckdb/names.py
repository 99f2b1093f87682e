"""Table names as users write them in `table:` keys: `orders`, `analytics.orders`, `"we""ird name"`.

A name has one or two parts separated by dots (schema defaults to `main`). A part is either bare (no dots,
no double quotes) or double-quoted with embedded quotes doubled, as in SQL. Every part is quoted again when
it is placed in SQL, so a name never changes the statement it sits in.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelinez.core.sqlnames import parse_parts, quote_ident

__all__ = ["TableName", "parse_parts"]


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
