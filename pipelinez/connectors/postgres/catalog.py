"""The catalog questions of `source.describe`, asked through the database the native tier ATTACHes anyway.

A native read of a table dataset describes it with the same statements as through psycopg, sent with the
extension's `postgres_query` on the read's own attachment: describing needs no psycopg connection (its
import, connect and a second server session were the largest fixed cost of a small incremental read; a full
read of a table with a `numeric` column still asks psycopg for its NaN check after the load). A
`query:` dataset is still described through psycopg: its columns' typmods come from libpq's result metadata.

`ExtensionCursor` is the part of psycopg's cursor that `describe` uses (`execute` with `%s` parameters,
`fetchone`, `fetchall`). Parameters are pz's own values (a table name as written, type OIDs, typmods), placed
as PostgreSQL literals: text as an `E''` literal (its meaning never depends on standard_conforming_strings),
whole numbers as digits, lists of whole numbers as an array literal.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pipelinez.core.sqlnames import quote_literal

if TYPE_CHECKING:
    import duckdb

_PLACEHOLDER = re.compile(r"%[s%]")


class CatalogCursor(Protocol):
    """What `source.describe` asks of a cursor: a psycopg cursor, or an `ExtensionCursor`."""

    def execute(self, query: Any, params: Any = ...) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class CatalogConnection(Protocol):
    """What `source.describe` asks of a connection: a psycopg connection, or an `ExtensionCatalog`."""

    def cursor(self) -> Any: ...


def pg_literal(value: object) -> str:
    """`value` as a PostgreSQL literal: text, a whole number, or a list of whole numbers."""
    if isinstance(value, bool):
        raise TypeError("a catalog parameter is text, a whole number or a list of whole numbers")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError("a catalog parameter holds a NUL character")
        return "E'" + value.replace("\\", "\\\\").replace("'", "''") + "'"
    if isinstance(value, list | tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return "'{" + ",".join(str(v) for v in value) + "}'"
    raise TypeError("a catalog parameter is text, a whole number or a list of whole numbers")


def bind(sql: str, params: Sequence[object] = ()) -> str:
    """`sql` with each `%s` replaced by its parameter's literal (`%%` is a percent sign), as psycopg would."""
    values = iter(params)
    used = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal used
        if match.group(0) == "%%":
            return "%"
        used += 1
        try:
            return pg_literal(next(values))
        except StopIteration:
            raise ValueError("fewer parameters than %s placeholders") from None

    text = _PLACEHOLDER.sub(replace, sql)
    if used != len(params):
        raise ValueError("more parameters than %s placeholders")
    return text


class ExtensionCatalog:
    """The attached database `alias` of `con`'s DuckDB instance, as `describe` asks for cursors."""

    def __init__(self, con: duckdb.DuckDBPyConnection, alias: str):
        self._con = con
        self._alias = alias

    def cursor(self) -> ExtensionCursor:
        return ExtensionCursor(self._con, self._alias)


class ExtensionCursor:
    """Catalog statements run on the PostgreSQL server through `postgres_query` on `alias` (an attached
    database of `con`'s DuckDB instance). Errors are DuckDB's, as the read's own statements."""

    def __init__(self, con: duckdb.DuckDBPyConnection, alias: str):
        self._con = con
        self._alias = alias
        self._rows: list[tuple[Any, ...]] = []

    def execute(self, sql: str, params: Sequence[object] = ()) -> ExtensionCursor:
        statement = (
            f"SELECT * FROM postgres_query({quote_literal(self._alias)}, {quote_literal(bind(sql, params))})"
        )
        self._rows = [tuple(row) for row in self._con.execute(statement).fetchall()]
        return self

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows.pop(0) if self._rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows, self._rows = self._rows, []
        return rows
