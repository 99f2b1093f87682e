"""`strategy: view` into PostgreSQL: the output becomes a view of the pipeline's SQL over the sink's tables.

One transaction: the schema is created when missing, then `CREATE OR REPLACE VIEW`; when the view's columns
changed in a way PostgreSQL cannot replace in place (SQLSTATE 42P16), the old view is dropped and created
again in the same transaction (a view that depends on it makes the drop fail, and nothing changes). A
table of the output's name is never dropped: the write fails and says so. The SQL runs in PostgreSQL as
written: a view's pipeline must be SQL both DuckDB (staging, validation) and PostgreSQL accept.
"""

from __future__ import annotations

from typing import Any

from pipelinez.connectors.postgres.settings import TableRef
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident

_NOT_REPLACEABLE = "42P16"  # invalid_table_definition: CREATE OR REPLACE VIEW cannot change the columns


def view_relation(output: str, options: dict[str, Any]) -> str | None:
    """The output's table as SQL in the same database names it, or None when its name is invalid."""
    try:
        return TableRef.parse(str(options.get("table") or output)).sql()
    except ValueError:
        return None  # tier 3 reports the name


def write_view(conn: Any, target: TableRef, sql: str) -> None:
    """Create or replace the view `target` of `sql` on the psycopg connection `conn` (autocommit)."""
    import psycopg

    with conn.transaction():
        kind = conn.execute(
            "SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [target.sql()]
        ).fetchone()
        if kind is not None and kind[0] != "v":
            raise PzConnectorError(
                f"{target} is a table, not a view; a view output does not replace a table (drop it, or write "
                "the output with a table strategy)",
                code="PZ0501",
            )
        if target.schema is not None:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(target.schema)}")
        try:
            with conn.transaction():  # a savepoint: a view whose columns changed is created again
                conn.execute(f"CREATE OR REPLACE VIEW {target.sql()} AS\n{sql}")
        except psycopg.Error as exc:
            if getattr(exc, "sqlstate", None) != _NOT_REPLACEABLE:
                raise
            conn.execute(f"DROP VIEW {target.sql()}")
            conn.execute(f"CREATE VIEW {target.sql()} AS\n{sql}")
