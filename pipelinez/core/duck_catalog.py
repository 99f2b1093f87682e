"""Looking up one table of a DuckDB database without enumerating the catalog.

The run's staging database instance also holds the databases nodes ATTACH while they run (a postgres
source's or sink's database, a DuckDB file). `duckdb_tables()`, `duckdb_columns()`, `duckdb_views()` and
`information_schema` scan every attached database: each call loads, over the network, the catalog of every
postgres attachment alive at that moment, and fails with that attachment's error ("Unable to connect to
Postgres", "server closed the connection unexpectedly") when its connection was just lost, or hangs while
its server stalls. A fault in one node's connection would fail another node that never asked for it.

These helpers resolve exactly one name through DuckDB's binder instead, which touches only the database the
name lives in. A name that does not resolve raises a catalog error whose "did you mean" suggestions scan the
other databases' schemas too, unless `catalog_error_max_schemas` is 0: `isolate()` sets that on an instance.

Autocommit only: a miss is a DuckDB error, which would abort the caller's explicit transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipelinez.core.sqlnames import quote_ident

if TYPE_CHECKING:
    import duckdb


def isolate(con: duckdb.DuckDBPyConnection) -> None:
    """Make a missing name's error look at no other attached database (instance-wide)."""
    con.execute("SET GLOBAL catalog_error_max_schemas = 0")


def qualified(table: str, schema: str | None = None, database: str | None = None) -> str:
    """`"database"."schema"."table"` from unquoted parts (the ones given)."""
    parts = [p for p in (database, schema) if p is not None] + [table]
    return ".".join(quote_ident(p) for p in parts)


def columns_of(cur: duckdb.DuckDBPyConnection, quoted: str) -> list[tuple[str, str]] | None:
    """(name, DuckDB type) of each column of the table or view `quoted` (quoted identifiers, maybe
    qualified; an unqualified name resolves like any query's: temp, then the current schema), or None
    when there is none."""
    import duckdb

    try:
        rows = cur.execute(f"SELECT column_name, column_type FROM (DESCRIBE {quoted})").fetchall()
    except (duckdb.CatalogException, duckdb.BinderException):  # no such table, schema or database
        return None
    return [(str(name), str(typ)) for name, typ in rows]


def table_exists(cur: duckdb.DuckDBPyConnection, quoted: str) -> bool:
    """Whether `quoted` (quoted identifiers, maybe qualified) names a table (not a view: only a table has
    a `rowid`; binding it reads no row)."""
    import duckdb

    try:
        cur.execute(f"SELECT rowid FROM {quoted} LIMIT 0").fetchall()
    except (duckdb.CatalogException, duckdb.BinderException):  # no such table; a view
        return False
    return True
