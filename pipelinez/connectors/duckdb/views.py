"""`strategy: view` into a DuckDB file: the output becomes a view of the pipeline's SQL over the file's
tables.

The view is created by a connection to the file itself (its default catalog), so the names in its SQL are
the file's own (`"main"."orders"`) and the view reads the same tables whoever opens the file. A table of
the output's name is not dropped: the write fails and says so (it holds data pz did not write as a view).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelinez.connectors.duckdb.files import connected
from pipelinez.connectors.duckdb.names import TableName
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident


def view_relation(output: str, options: dict[str, Any]) -> str | None:
    """The output's table as a view in the same file names it, or None when its name is invalid."""
    try:
        return TableName.parse(str(options.get("table") or output)).sql()
    except ValueError:
        return None  # tier 3 reports the name


def write_view(path: Path, target: TableName, sql: str) -> None:
    """CREATE OR REPLACE VIEW in one transaction (the schema created when missing), then a checkpoint."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with connected(path, read_only=False) as con:
        kind = con.execute(
            "SELECT table_type FROM information_schema.tables WHERE table_schema = ? AND table_name = ?",
            [target.schema, target.table],
        ).fetchone()
        if kind is not None and kind[0] != "VIEW":
            raise PzConnectorError(
                f"{target} is a table in {path.name}; a view output does not replace a table (drop it, or "
                "write the output with a table strategy)",
                code="PZ0501",
            )
        con.execute("BEGIN")
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(target.schema)}")
        con.execute(f"CREATE OR REPLACE VIEW {target.sql()} AS\n{sql}")
        con.execute("COMMIT")
        con.execute("CHECKPOINT")
