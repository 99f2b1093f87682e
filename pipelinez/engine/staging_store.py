"""Where an earlier run's staged source tables live, and how a retry copies one across: the one seam through
which `pz retry` reuses staging.

A `StagedLoad` says where a failed run's staged table (or its landed partitions) lives and how many rows that
run recorded for it. A `StagingStore` answers two questions about it: can it be used at all (`unusable`,
cheap, asked while the retry is planned), and copy it into this run's staging (`copy`, in the node's attempt),
returning the rows copied so the caller can compare them with the recorded count. Anything that goes wrong
is a `ReuseUnavailable` with the reason in words; the caller falls back to extraction with a note.

`LocalStagingStore` is today's store: `.pz/runs/<run_id>/staging.duckdb`, attached read-only. A store on
shared storage (Parquet per node with a `_manifest.json` holding row counts) implements the same protocol.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pipelinez.core.sqlnames import quote_ident, quote_literal
from pipelinez.engine.runs import STAGING_FILE

if TYPE_CHECKING:
    import duckdb


class ReuseUnavailable(Exception):
    """The staged table cannot be reused; the message says why, in words."""


@dataclass(frozen=True)
class StagedPart:
    """One partition that fully landed in the earlier run: its index, rows and the fingerprint of the
    partition's definition (so a retry only reuses it for the same slice of the dataset)."""

    index: int
    rows: int
    fingerprint: str
    table: str  # the partition's table in the earlier run's staging


@dataclass(frozen=True)
class StagedLoad:
    """Where an earlier run's staged source table lives and how many rows that run recorded for it."""

    run_id: str
    table: str  # the staging table (unquoted)
    rows: int  # the rows the earlier run recorded for the node
    parts: tuple[StagedPart, ...] = ()  # landed partitions of a load that failed part-way


class StagingStore(Protocol):
    def unusable(self, staged: StagedLoad) -> str | None:
        """Why `staged` cannot be reused at all (e.g. the staging is gone), or None when it may be."""

    def copy(self, cur: duckdb.DuckDBPyConnection, run_id: str, table: str, target: str) -> int:
        """Copy `table` of run `run_id`'s staging into this run's staging as `target` (both unquoted);
        returns the rows copied. Raises ReuseUnavailable when it cannot be read."""


@dataclass(frozen=True)
class Reuse:
    """A retry's instruction to one source load: take `staged` from `store` instead of extracting. `whole`:
    the load succeeded before, copy its table; otherwise it failed part-way: copy its landed partitions
    and extract the rest."""

    store: StagingStore
    staged: StagedLoad
    whole: bool = True


_aliases = itertools.count()
_alias_lock = threading.Lock()


def _alias() -> str:
    with _alias_lock:
        return f"pz_reuse_{next(_aliases)}"


@dataclass(frozen=True)
class LocalStagingStore:
    """Staging databases of earlier runs under `.pz/runs/<run_id>/staging.duckdb` on this machine."""

    runs_dir: Path

    def path(self, run_id: str) -> Path:
        return self.runs_dir / run_id / STAGING_FILE

    def unusable(self, staged: StagedLoad) -> str | None:
        path = self.path(staged.run_id)
        if not path.is_file():
            return f"its staging database {path.name} is gone (deleted by pz clean or the retention sweep)"
        return None

    def copy(self, cur: duckdb.DuckDBPyConnection, run_id: str, table: str, target: str) -> int:
        import duckdb

        path = self.path(run_id)
        if not path.is_file():
            raise ReuseUnavailable(f"its staging database {path.name} is gone")
        alias = _alias()
        try:
            cur.execute(f"ATTACH {quote_literal(str(path))} AS {quote_ident(alias)} (READ_ONLY)")
        except duckdb.Error as exc:
            raise ReuseUnavailable(f"its staging database cannot be opened ({_first_line(exc)})") from exc
        try:
            cur.execute(f"DROP TABLE IF EXISTS {quote_ident(target)}")
            cur.execute(
                f"CREATE TABLE {quote_ident(target)} AS "
                f"SELECT * FROM {quote_ident(alias)}.main.{quote_ident(table)}"
            )
            row = cur.execute(f"SELECT count(*) FROM {quote_ident(target)}").fetchone()
            return int(row[0]) if row else 0
        except duckdb.Error as exc:
            with contextlib.suppress(duckdb.Error):  # else the next attempt drops it
                cur.execute(f"DROP TABLE IF EXISTS {quote_ident(target)}")
            raise ReuseUnavailable(f"its staged table {table} cannot be read ({_first_line(exc)})") from exc
        finally:
            with contextlib.suppress(duckdb.Error):  # else detached with the connection at the latest
                cur.execute(f"DETACH {quote_ident(alias)}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
