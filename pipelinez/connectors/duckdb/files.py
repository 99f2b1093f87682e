"""Opening a DuckDB database file from pz: per-file locks, ATTACH under a unique alias, separate connections.

DuckDB lets one database instance attach a file read-write only once, and a read-write attach excludes any
other attach of that file. pz may run several nodes at once on the same staging instance, so every use of a
file goes through a readers-writer lock kept per file path in this process: reads share it, a write holds
it alone. ATTACH and DETACH run on a sibling cursor of the caller's connection: the attachment belongs to
the database instance, and a DETACH on the caller's own connection would fail (and abort the caller's
transaction) when that transaction has read from the file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pipelinez.core import duck_connect
from pipelinez.core.duck_types import attached_to_helper, file_attached

if TYPE_CHECKING:
    import duckdb


class ReadWriteLock:
    """Many readers or one writer."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._writer)
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._writer and self._readers == 0)
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


_LOCKS: dict[str, ReadWriteLock] = {}
_GUARD = threading.Lock()


def file_lock(path: Path) -> ReadWriteLock:
    key = os.path.normcase(os.path.abspath(path))
    with _GUARD:
        return _LOCKS.setdefault(key, ReadWriteLock())


def resolve_path(project_dir: Path, path: object) -> Path:
    return Path(os.path.abspath(project_dir / str(path)))


def unique_alias(kind: str) -> str:
    return f"__pz_{kind}_{secrets.token_hex(6)}"


@contextlib.contextmanager
def attached(con: duckdb.DuckDBPyConnection, path: Path, *, read_only: bool) -> Iterator[str]:
    """Attach `path` to `con`'s database instance under a fresh alias for the duration of the block."""
    alias = unique_alias("src" if read_only else "sink")
    lock = file_lock(path)
    with (
        lock.reading() if read_only else lock.writing(),
        file_attached(con, path, alias, read_only=read_only),
    ):
        yield alias


@contextlib.contextmanager
def looked_up(path: Path) -> Iterator[tuple[duckdb.DuckDBPyConnection, str]]:
    """A cursor of the process's helper instance (`core.duck_types.helper`) with `path` attached READ_ONLY
    under a fresh alias (unquoted) for the block: a catalog lookup (a target's columns, its work tables) that
    moves no rows, without a DuckDB instance of its own (15-20 ms to open and close, more under load). The
    file's lock is held alone: a read-write attach of the file anywhere in the process (the staging
    instance's, a write's) conflicts with any other attach of it, so a lookup never overlaps a write, and
    two threads looking up the same file take turns."""
    alias = unique_alias("look")
    with file_lock(path).writing(), attached_to_helper(path, alias, read_only=True) as con:
        yield con, alias


@contextlib.contextmanager
def connected(path: Path, *, read_only: bool, rows: bool = True) -> Iterator[duckdb.DuckDBPyConnection]:
    """A separate connection to the file (its own database instance), under the file's lock. `rows`
    False: a lookup in the file's catalog (a table's columns, its work tables, a probe) that moves no rows;
    its instance is a helper capped at the budget, and the run's staging keeps its share meanwhile (no
    `SET memory_limit` on every instance as it opens and again as it closes)."""

    lock = file_lock(path)
    with lock.reading() if read_only else lock.writing():
        # its own buffer pool beside the run's staging database: both share the process's one memory budget
        con = duck_connect.connect(str(path), read_only=read_only, share=rows)
        try:
            yield con
        finally:
            if rows:
                duck_connect.release(con)
            con.close()
