"""DuckDB type names parsed by DuckDB itself, on a private connection.

`duckdb.sqltype()` uses the process-wide default connection: if anything left that connection inside an
aborted transaction, every later type parse fails. A private connection per thread is never shared: each
thread parses on its own cursor (a connection of its own) of one in-memory instance pz opens for this, so a
run's threads open one DuckDB instance between them, not one each. The run state file is read and written,
and a DuckDB sink file's catalog looked up, through a cursor of the same instance (`helper`), ATTACHed for
the moment (`file_attached`), not in an instance of its own.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipelinez.core import duck_connect

_local = threading.local()
_instance: Any = None
_instance_guard = threading.Lock()


def helper() -> Any:
    """The process's shared in-memory helper instance (opened on first use): type parsing, and the state
    file (`core.run_state`) or a DuckDB sink file being looked up (`connectors.duckdb.files.looked_up`)
    ATTACHed for a moment instead of an instance of its own. Take a `cursor()`."""
    global _instance
    with _instance_guard:
        if _instance is None:
            _instance = duck_connect.connect()
        return _instance


@contextlib.contextmanager
def file_attached(con: Any, path: Path, alias: str, *, read_only: bool) -> Iterator[Any]:
    """A new cursor of `con`'s instance with the DuckDB file at `path` ATTACHed as `alias` for the block,
    then detached and closed. The caller holds the file's lock (one instance attaches a file once at a
    time)."""
    from pipelinez.core.sqlnames import quote_ident, quote_literal

    cur = con.cursor()
    try:
        mode = " (READ_ONLY)" if read_only else ""
        cur.execute(f"ATTACH {quote_literal(str(path))} AS {quote_ident(alias)}{mode}")
        try:
            yield cur
        finally:
            with contextlib.suppress(Exception):
                cur.execute(f"DETACH {quote_ident(alias)}")
    finally:
        cur.close()


def attached_to_helper(path: Path, alias: str, *, read_only: bool) -> contextlib.AbstractContextManager[Any]:
    """`file_attached` on the process's helper instance (no DuckDB instance of the file's own)."""
    return file_attached(helper(), path, alias, read_only=read_only)


def _connection() -> Any:
    """This thread's cursor of the shared instance (opened on the first parse of the process)."""
    con = getattr(_local, "con", None)
    if con is None:
        con = helper().cursor()
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
