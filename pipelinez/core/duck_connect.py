"""Every DuckDB connection pz opens, opened one way: without DuckDB's progress bar.

DuckDB's Python client draws a progress bar on stdout for any query that runs longer than two seconds, into
the middle of pz's own output lines (and of `--log-format json`). The setting is per connection (DuckDB
refuses it as a global or startup option); a connection's cursors inherit it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb


def connect(
    database: str = ":memory:",
    *,
    read_only: bool = False,
    config: dict[str, str | bool | int | float | list[str]] | None = None,
) -> duckdb.DuckDBPyConnection:
    import duckdb

    con = duckdb.connect(database, read_only=read_only, config=config or {})
    con.execute("SET enable_progress_bar = false")
    return con
