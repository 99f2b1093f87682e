"""DuckDB type names parsed by DuckDB itself, on a private connection.

`duckdb.sqltype()` uses the process-wide default connection: if anything left that connection inside an
aborted transaction, every later type parse fails. A private connection per thread is never shared.
"""

from __future__ import annotations

import threading
from typing import Any

from pipelinez.core import duck_connect

_local = threading.local()


def _connection() -> Any:

    con = getattr(_local, "con", None)
    if con is None:
        con = duck_connect.connect()
        _local.con = con
    return con


def parse_type(text: str) -> str:
    """DuckDB's own spelling of a type (`decimal(18,2)` -> `DECIMAL(18,2)`), safe to place in SQL.
    ValueError (with DuckDB's first message line) when DuckDB does not know the type."""
    import duckdb

    try:
        return str(_connection().sqltype(str(text)))
    except duckdb.Error as exc:
        raise ValueError(str(exc).splitlines()[0]) from exc
