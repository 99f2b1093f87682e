"""Every DuckDB connection pz opens, opened one way: without DuckDB's progress bar.

DuckDB's Python client draws a progress bar on stdout for any query that runs longer than two seconds, into
the middle of pz's own output lines (and of `--log-format json`). The setting is per connection (DuckDB
refuses it as a global or startup option); a connection's cursors inherit it.

DuckDB's Python client also tries `import pandas` whenever it binds Python parameters or converts a
result, to recognise pandas objects. pz never uses pandas; where it is not installed every attempt is a
failed search of `sys.path` (thousands of them in a large `pz validate`, a third of its profile). The first
connection records that pandas is absent (`sys.modules["pandas"] = None`), so later attempts fail at once
with the same ModuleNotFoundError. Where pandas is installed nothing changes, and pz still never imports it.

Memory: every instance opened here is under the process's one budget (`core/memory_budget.py`). A database
instance opened with `share=True` (the run's staging, a DuckDB file in its own instance) takes a share of it
until `release` (or its close, noticed at the next change); any other instance is capped at the budget.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import TYPE_CHECKING

from pipelinez.core.memory_budget import BUDGET

if TYPE_CHECKING:
    import duckdb


def connect(
    database: str = ":memory:",
    *,
    read_only: bool = False,
    config: dict[str, str | bool | int | float | list[str]] | None = None,
    share: bool = False,
) -> duckdb.DuckDBPyConnection:
    import duckdb

    _settle_absent_pandas()
    con = duckdb.connect(database, read_only=read_only, config=config or {})
    con.execute("SET enable_progress_bar = false")
    if share:
        BUDGET.join(con)
    else:
        con.execute(f"SET memory_limit = '{BUDGET.helper_limit()}'")
    return con


def release(con: duckdb.DuckDBPyConnection) -> None:
    """`con`'s instance gives its share of the budget back to the others still open (before closing it)."""
    BUDGET.leave(con)


def _settle_absent_pandas() -> None:
    if "pandas" not in sys.modules and importlib.util.find_spec("pandas") is None:
        sys.modules["pandas"] = None  # type: ignore[assignment]
