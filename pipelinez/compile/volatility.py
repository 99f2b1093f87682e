"""Which functions in a pipeline's SQL give another result on every run (`random()`, `now()`, `uuid()`,
`current_timestamp`), read from DuckDB's own parse tree and DuckDB's own stability flags.

`pz retry` re-runs pipelines and carries forward the sink writes the failed run committed. That is safe only
when the pipeline computes the same rows again: a query that calls a volatile function does not, and a
carried-forward write would keep the first run's values while its sibling sinks get new ones. DuckDB marks
each function's stability (`duckdb_functions().stability`: CONSISTENT, CONSISTENT_WITHIN_QUERY, VOLATILE);
everything not CONSISTENT changes between two runs, except the few that name the session (the database,
the schema) and `error()`. The SQL-standard forms without parentheses (`current_timestamp`, `current_date`,
`current_time`, `localtimestamp`, `localtime`) parse as bare column names and are matched as such (a real
column of that name is taken for the function: the write then runs again, which is only slower).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipelinez.compile.watermark_sql import parse_queries
from pipelinez.core import duck_connect

# not CONSISTENT for DuckDB, yet the same on every run of a project: they name the session, or raise
SAME_EVERY_RUN = frozenset(
    {"current_database", "current_schema", "current_schemas", "in_search_path", "error", "current_catalog"}
)
BARE_KEYWORDS = frozenset(
    {"current_timestamp", "current_date", "current_time", "localtimestamp", "localtime"}
)
UNKNOWN = "(its SQL could not be analysed)"


def volatile_calls(queries: Sequence[str]) -> list[tuple[str, ...]]:
    """For each query, the volatile functions it calls, in order of first use (`UNKNOWN` alone when DuckDB
    cannot parse it: taken as volatile, so nothing is vouched for that cannot be shown)."""
    if not queries:
        return []

    con = duck_connect.connect()
    try:
        rows = con.execute(
            "SELECT DISTINCT lower(function_name) FROM duckdb_functions() WHERE stability <> 'CONSISTENT'"
        ).fetchall()
        trees = parse_queries(queries, con)
    finally:
        con.close()
    volatile = {name for (name,) in rows} - SAME_EVERY_RUN
    out: list[tuple[str, ...]] = []
    for tree in trees:
        if tree is None:
            out.append((UNKNOWN,))
            continue
        found: dict[str, None] = {}
        try:
            _walk(tree, volatile, found)
        except RecursionError:
            found = {UNKNOWN: None}
        out.append(tuple(found))
    return out


def _walk(node: Any, volatile: set[str], found: dict[str, None]) -> None:
    if isinstance(node, dict):
        kind = node.get("class")
        if kind == "FUNCTION":
            name = str(node.get("function_name", "")).lower()
            if name in volatile:
                found[f"{name}()"] = None
        elif kind == "COLUMN_REF":
            names = node.get("column_names")
            if isinstance(names, list) and len(names) == 1 and str(names[0]).lower() in BARE_KEYWORDS:
                found[str(names[0]).lower()] = None
        for value in node.values():
            _walk(value, volatile, found)
    elif isinstance(node, list):
        for value in node:
            _walk(value, volatile, found)
