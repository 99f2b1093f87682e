"""Counting the DuckDB statements a command executes, from a profile hook (`sys.setprofile`): in this
process (`test_validate_statements`) or in a `python -c` probe (`test_startup_budget` embeds
`PROBE_SOURCE`)."""

from __future__ import annotations

import inspect

STATEMENTS = ("execute", "executemany", "sql", "query")


def is_duckdb_statement(event: str, arg: object) -> bool:
    """Whether a profile event is a call of a DuckDB connection's statement method (not the module's)."""
    return (
        event == "c_call"
        and getattr(arg, "__module__", None) == "_duckdb"
        and getattr(arg, "__name__", None) in STATEMENTS
        and "DuckDBPyConnection" in (getattr(arg, "__doc__", None) or "").split(")", 1)[0]
    )


# the two above as text, for a probe run where `tests` cannot be imported
PROBE_SOURCE = f"STATEMENTS = {STATEMENTS!r}\n\n\n{inspect.getsource(is_duckdb_statement)}"
