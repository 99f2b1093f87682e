"""Where an earlier run's staged source tables live, and how a retry copies one across: the one seam through
which `pz retry` reuses staging.

A `StagedLoad` says where a failed run's staged table (or its landed partitions) lives and how many rows that
run recorded for it. A `StagingStore` answers two questions about it: can it be used at all (`unusable`,
cheap, asked while the retry is planned), and copy it into this run's staging (`copy`, in the node's attempt),
returning the rows copied so the caller can compare them with the recorded count. Anything that goes wrong
is a `ReuseUnavailable` with the reason in words; the caller falls back to extraction with a note.

`LocalStagingStore` is today's store: `.pz/runs/<run_id>/staging.duckdb`. A retry starts its own staging as a
file copy of the failed run's (`seed`: far cheaper than re-encoding every reused table) and drops what it does
not reuse (`prune`); when that cannot be done, each reused table is copied across from the earlier staging,
attached read-only. Either way the earlier run's files are never written, and every reused table's row count
is compared with the recorded one. A store on shared storage (Parquet per node with a `_manifest.json` holding
row counts) implements the same protocol (its `seed` returns False).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import shutil
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pipelinez.core import duck_catalog, duck_connect
from pipelinez.core.sqlnames import quote_ident, quote_literal
from pipelinez.engine.state.run_results import WatermarkRecord
from pipelinez.engine.state.runs import SEED_PREFIX, STAGING_FILE

if TYPE_CHECKING:
    import duckdb


class ReuseUnavailable(Exception):
    """The staged table cannot be reused; the message says why, in words. `transient`: the staging could not
    be reached this time (a network error of an object store), another attempt may read it."""

    def __init__(self, message: str = "", transient: bool = False):
        super().__init__(message)
        self.transient = transient

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.transient))


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
        """Why `staged` cannot be reused (the staging is gone, the table can't be read, its row count is not
        the recorded one), or None when it may be. Asked while the retry is planned, so that what is carried
        forward and what `--dry-run` prints rest on the same check the copy repeats."""

    def seed(self, run_id: str, staging: Path) -> bool:
        """Start this run's staging database (`staging`, not created yet) as a copy of run `run_id`'s, when
        the store can do that cheaply (a file copy); False when it cannot, and then nothing was created."""

    def copy(self, cur: duckdb.DuckDBPyConnection, run_id: str, table: str, target: str) -> int:
        """Make `target` in this run's staging hold `table` of run `run_id`'s staging (both unquoted): copy it
        across, or find it there already when the staging was seeded. Returns the rows it holds, for the
        caller to compare with the recorded count. Raises ReuseUnavailable when it cannot be read."""


@dataclass(frozen=True)
class Reuse:
    """A retry's instruction to one source load: take `staged` from `store` instead of extracting. `whole`:
    the load succeeded before, copy its table; otherwise it failed part-way: copy its landed partitions
    and extract the rest."""

    store: StagingStore
    staged: StagedLoad
    whole: bool = True
    watermark: WatermarkRecord | None = None  # the failed run's record for the load; a copy carries it over


T = TypeVar("T")


class _Background(Generic[T]):
    """A call running on its own thread from now on; `result()` waits for it, then returns what it returned
    or raises what it raised."""

    def __init__(self, call: Callable[[], T]):
        self._call = call
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="pz-retry-prepare", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._call()
        except BaseException as exc:  # handed to whoever asks for the result
            self._error = exc

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


_aliases = itertools.count()
_alias_lock = threading.Lock()


def _alias() -> str:
    with _alias_lock:
        return f"pz_reuse_{next(_aliases)}"


@dataclass(frozen=True)
class LocalStagingStore:
    """Staging databases of earlier runs under `.pz/runs/<run_id>/staging.duckdb` on this machine."""

    runs_dir: Path
    # run id -> its staging attached for the planning's checks (or why it cannot be opened), maybe opening
    _readers: dict[str, _Background[duckdb.DuckDBPyConnection | str] | duckdb.DuckDBPyConnection | str] = (
        field(default_factory=dict, compare=False, repr=False)
    )
    # run id -> the copy of its staging files being made for `seed`, under a scratch name in the runs folder
    _copies: dict[str, _Background[Path]] = field(default_factory=dict, compare=False, repr=False)

    def __reduce__(self) -> tuple[type[LocalStagingStore], tuple[Path]]:
        """Pickled (a `Reuse` rides on a work item to a remote worker) as its folder only: the open checks
        and the copy being made belong to the process that planned the retry."""
        return (LocalStagingStore, (self.runs_dir,))

    def path(self, run_id: str) -> Path:
        return self.runs_dir / run_id / STAGING_FILE

    def prepare(self, run_id: str, copy: bool = True) -> None:
        """Start, on threads, the two slow reads a retry of `run_id` will need, so that they run while the
        project is validated: opening its staging for the planning's checks (the open replays its WAL) and,
        with `copy`, copying its files for `seed`. Nothing is decided here: `unusable` and `seed` wait for
        them and answer as they would have; `close` discards a copy that `seed` did not take."""
        path = self.path(run_id)
        if not path.is_file():
            return
        if run_id not in self._readers:
            self._readers[run_id] = _Background(lambda: _attach(path))
        if copy and run_id not in self._copies:
            discard_seeds(self.runs_dir)  # a killed retry's leftovers (the project lock is held)
            scratch = self.runs_dir / f"{SEED_PREFIX}{run_id}.duckdb"
            self._copies[run_id] = _Background(lambda: _copy_staging(path, scratch))

    def unusable(self, staged: StagedLoad) -> str | None:
        import duckdb

        path = self.path(staged.run_id)
        if not path.is_file():
            return f"its staging database {path.name} is gone (deleted by pz clean or the retention sweep)"
        con = self._reader(staged.run_id, path)
        if isinstance(con, str):
            return f"its staging database cannot be opened ({con})"
        try:
            row = con.execute(f"SELECT count(*) FROM old.main.{quote_ident(staged.table)}").fetchone()
        except duckdb.Error as exc:
            return f"its staged table {staged.table} cannot be read ({first_line(exc)})"
        rows = int(row[0]) if row else 0
        if rows != staged.rows:
            return f"its staged table has {rows} rows, the run recorded {staged.rows}"
        return None

    def _reader(self, run_id: str, path: Path) -> duckdb.DuckDBPyConnection | str:
        """The earlier run's staging attached read-only, opened once for every check of the retry's planning
        (opening it replays its WAL, the dearest part of a check), or why it cannot be opened."""
        found = self._readers.get(run_id)
        if isinstance(found, _Background):
            found = found.result()
        elif found is None:
            found = _attach(path)
        self._readers[run_id] = found
        return found

    def close(self) -> None:
        """Detach what the planning's checks opened and delete a copy made for `seed` that the run did not
        take."""
        self.close_readers()
        copies = list(self._copies.values())
        self._copies.clear()
        for pending in copies:
            with contextlib.suppress(Exception):  # a copy that failed left nothing behind
                unseed(pending.result())

    def close_readers(self) -> None:
        """Detach what the planning's checks opened (the staging files are only read, never written)."""
        readers = list(self._readers.values())
        self._readers.clear()
        for reader in readers:
            with contextlib.suppress(Exception):  # an open that failed holds nothing to close
                con = reader.result() if isinstance(reader, _Background) else reader
                if not isinstance(con, str):
                    con.close()

    def seed(self, run_id: str, staging: Path) -> bool:
        """Copy the earlier run's staging files (database and WAL) as this run's: a file copy is much
        cheaper than re-encoding every reused table (and a clone where the filesystem has reflinks, see
        `copy_file`), and the earlier run's files are never opened for writing."""
        source = self.path(run_id)
        wal = source.with_name(source.name + ".wal")
        if not source.is_file() or staging.exists():
            return False
        pending = self._copies.pop(run_id, None)
        if pending is not None:  # made while the retry was planned: moved into place
            try:
                scratch = pending.result()
                scratch_wal = scratch.with_name(scratch.name + ".wal")
                if scratch_wal.exists():
                    os.replace(scratch_wal, staging.with_name(staging.name + ".wal"))
                os.replace(scratch, staging)
                return True
            except OSError:
                unseed(staging)
                with contextlib.suppress(OSError):
                    unseed(self.runs_dir / f"{SEED_PREFIX}{run_id}.duckdb")
        try:
            copy_file(source, staging)
            if wal.is_file():
                copy_file(wal, staging.with_name(staging.name + ".wal"))
        except OSError:
            unseed(staging)
            return False
        return True

    def copy(self, cur: duckdb.DuckDBPyConnection, run_id: str, table: str, target: str) -> int:
        import duckdb

        if _exists(cur, target):  # seeded: the file copy brought it along
            try:
                return _count(cur, target)
            except duckdb.Error as exc:
                why = f"its staged table {table} cannot be read ({first_line(exc)})"
                raise ReuseUnavailable(why) from exc
        path = self.path(run_id)
        if not path.is_file():
            raise ReuseUnavailable(f"its staging database {path.name} is gone")
        alias = _alias()
        try:
            cur.execute(f"ATTACH {quote_literal(str(path))} AS {quote_ident(alias)} (READ_ONLY)")
        except duckdb.Error as exc:
            raise ReuseUnavailable(f"its staging database cannot be opened ({first_line(exc)})") from exc
        try:
            cur.execute(f"DROP TABLE IF EXISTS {quote_ident(target)}")
            cur.execute(
                f"CREATE TABLE {quote_ident(target)} AS "
                f"SELECT * FROM {quote_ident(alias)}.main.{quote_ident(table)}"
            )
            return _count(cur, target)
        except duckdb.Error as exc:
            with contextlib.suppress(duckdb.Error):  # else the next attempt drops it
                cur.execute(f"DROP TABLE IF EXISTS {quote_ident(target)}")
            raise ReuseUnavailable(f"its staged table {table} cannot be read ({first_line(exc)})") from exc
        finally:
            with contextlib.suppress(duckdb.Error):  # else detached with the connection at the latest
                cur.execute(f"DETACH {quote_ident(alias)}")


def _attach(path: Path) -> duckdb.DuckDBPyConnection | str:
    """A connection with `path` attached read-only as `old`, or why it cannot be opened."""
    import duckdb

    con = duck_connect.connect()
    try:
        con.execute(f"ATTACH {quote_literal(str(path))} AS old (READ_ONLY)")
    except duckdb.Error as exc:
        con.close()
        return first_line(exc)
    return con


def _copy_staging(source: Path, target: Path) -> Path:
    """Copy a staging database and its WAL (when there is one) to `target`; nothing is left on failure."""
    wal = source.with_name(source.name + ".wal")
    try:
        copy_file(source, target)
        if wal.is_file():
            copy_file(wal, target.with_name(target.name + ".wal"))
    except OSError:
        unseed(target)
        raise
    return target


def discard_seeds(runs_dir: Path) -> None:
    """Delete copies made for a retry's seed that no run took (a retry killed while it was planned)."""
    with contextlib.suppress(OSError):
        for stray in runs_dir.glob(f"{SEED_PREFIX}*"):
            with contextlib.suppress(OSError):
                stray.unlink()


def copy_file(source: Path, target: Path) -> None:
    """Copy `source` to a new file `target` inside the kernel: `copy_file_range`, which filesystems with
    reflinks (btrfs, XFS, bcachefs…) turn into a copy-on-write clone that copies no data at all; where the
    call is refused (another filesystem underneath, an old kernel, not Linux) `shutil.copyfile`."""
    if hasattr(os, "copy_file_range"):
        try:
            with source.open("rb") as src, target.open("wb") as dst:
                left = os.fstat(src.fileno()).st_size
                while left > 0:
                    done = os.copy_file_range(src.fileno(), dst.fileno(), left)
                    if done == 0:  # the source shrank meanwhile: copy what is there
                        break
                    left -= done
            return
        except OSError as exc:
            with contextlib.suppress(OSError):
                target.unlink()
            if exc.errno not in _NO_RANGE_COPY:
                raise
    shutil.copyfile(source, target)


# copy_file_range refused for this pair of files (not the disk failing): fall back to a plain copy
_NO_RANGE_COPY = frozenset(
    {errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM, errno.EBADF}
)


def seed_source(reuse: Mapping[str, Reuse]) -> tuple[StagingStore, str] | None:
    """The store and earlier run a retry's reused loads all come from (a retry reuses one run only)."""
    sources = {(id(r.store), r.staged.run_id): (r.store, r.staged.run_id) for r in reuse.values()}
    return next(iter(sources.values())) if len(sources) == 1 else None


def kept_tables(reuse: Mapping[str, Reuse]) -> set[str]:
    """The tables of a seeded staging a retry uses: reused loads' tables and landed partitions' tables."""
    kept: set[str] = set()
    for r in reuse.values():
        if r.whole:
            kept.add(r.staged.table)
        else:
            kept |= {p.table for p in r.staged.parts}
    return kept


def prune(con: duckdb.DuckDBPyConnection, keep: set[str]) -> None:
    """Drop every table of a seeded staging that the retry does not reuse (pipelines, failed loads…)."""
    rows = con.execute(
        "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = current_database()"
    ).fetchall()
    for schema, table in rows:
        if schema != "main" or table not in keep:
            con.execute(f"DROP TABLE IF EXISTS {quote_ident(str(schema))}.{quote_ident(str(table))}")
    for (view,) in con.execute(
        "SELECT view_name FROM duckdb_views() WHERE database_name = current_database() AND NOT internal"
    ).fetchall():
        con.execute(f"DROP VIEW IF EXISTS {quote_ident(str(view))}")


def unseed(staging: Path) -> None:
    """Remove a seeded staging (its copy failed, or it cannot be opened): the run starts fresh."""
    for path in (staging, staging.with_name(staging.name + ".wal")):
        with contextlib.suppress(OSError):
            path.unlink()


def _exists(cur: duckdb.DuckDBPyConnection, table: str) -> bool:
    return duck_catalog.table_exists(cur, quote_ident(table))


def _count(cur: duckdb.DuckDBPyConnection, table: str) -> int:
    row = cur.execute(f"SELECT count(*) FROM {quote_ident(table)}").fetchone()
    return int(row[0]) if row else 0


def first_line(exc: BaseException) -> str:
    """An error's first line (DuckDB's and drivers' messages run over several), or its class name."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def staged_remover(settings: Mapping[str, Any] | None) -> Callable[[str, str], None]:
    """`shared_staging.remove_staged(settings)`, imported only when the retention sweep meets a run staged
    in a shared staging root: a local run imports neither the shared staging nor the object-store kit."""

    def remove(location: str, run_id: str) -> None:
        from pipelinez.engine.staging.shared_staging import remove_staged

        remove_staged(settings)(location, run_id)

    return remove
