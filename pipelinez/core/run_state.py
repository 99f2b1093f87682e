"""Project run state that outlives a run: `.pz/state.duckdb`. Today it holds each dataset's committed
watermark, which `watermark()` rendering (compile) reads and a successful run writes, so it sits below every
layer that needs it.

Reading never creates the file (`pz validate` writes nothing); writing commits every change of a run in one
transaction, then checkpoints. The file is ATTACHed per call to the process's helper instance
(`core.duck_types.helper`) and DETACHed at once, so no process holds the file between runs.

A state file pz cannot read is a `StateFileError` naming the file, never an internal error: PZ0527 when it is
broken (not a DuckDB file, a folder, its WAL a folder, no watermarks table), PZ0528 when another process (a
DuckDB shell) holds its lock.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipelinez.core.diagnostics import Diagnostic, PzError, error
from pipelinez.core.duck_messages import condense
from pipelinez.core.sqlnames import quote_ident

if TYPE_CHECKING:
    import duckdb

STATE_FILE = "state.duckdb"
SCHEMA_VERSION = 1
SCHEMA_TEXT = str(SCHEMA_VERSION)

_SCHEMA = (  # {db}: the attached state file
    "CREATE TABLE IF NOT EXISTS {db}.meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {db}.watermarks (source VARCHAR NOT NULL, dataset VARCHAR NOT NULL, "
    "column_name VARCHAR NOT NULL, value VARCHAR NOT NULL, run_id VARCHAR NOT NULL, "
    "updated_at TIMESTAMPTZ NOT NULL DEFAULT now(), PRIMARY KEY (source, dataset))",
)


@dataclass(frozen=True)
class Watermark:
    """The highest value of `column` a run committed for one dataset, as the text of its SQL literal."""

    source: str
    dataset: str
    column: str
    value: str
    run_id: str


class StateFileError(PzError):
    """`.pz/state.duckdb` cannot be read: broken (PZ0527) or locked by another process (PZ0528)."""


_HOLDER = re.compile(r"Conflicting lock is held in (.*?) \(PID (\d+)\)")


class RunState:
    """Access to `.pz/state.duckdb` for one project."""

    def __init__(self, state_dir: Path):
        self.path = state_dir / STATE_FILE
        # as messages name it: project-relative for the project's own .pz folder
        self.shown = f".pz/{STATE_FILE}" if state_dir.name == ".pz" else str(self.path)

    def watermarks(self) -> dict[tuple[str, str], Watermark]:
        """Every committed watermark by (source, dataset); empty when there is no state yet."""
        import duckdb

        if not self.path.exists():
            return {}
        try:
            with self._attached(read_only=True) as (con, db):
                rows = con.execute(
                    f"SELECT source, dataset, column_name, value, run_id FROM {db}.watermarks "
                    "ORDER BY source, dataset"
                ).fetchall()
        except (duckdb.Error, OSError) as exc:
            raise StateFileError([self.problem(exc)]) from None
        return {(r[0], r[1]): Watermark(*(str(v) for v in r)) for r in rows}

    def watermark(self, source: str, dataset: str) -> Watermark | None:
        return self.watermarks().get((source, dataset))

    def commit_watermarks(self, marks: Iterable[Watermark]) -> None:
        """Record `marks` (replacing each dataset's previous one) in one transaction: all or none."""
        marks = list(marks)
        if not marks:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        import duckdb

        with contextlib.ExitStack() as stack:
            try:
                con, db = stack.enter_context(self._attached(read_only=False))
                for statement in _SCHEMA:
                    con.execute(statement.format(db=db))
                con.execute(f"INSERT OR IGNORE INTO {db}.meta VALUES ('schema_version', ?)", [SCHEMA_TEXT])
            except duckdb.Error as exc:
                raise StateFileError([self.problem(exc)]) from None
            try:
                con.execute("BEGIN TRANSACTION")
                for m in marks:
                    con.execute(
                        f"INSERT OR REPLACE INTO {db}.watermarks "
                        "(source, dataset, column_name, value, run_id) VALUES (?, ?, ?, ?, ?)",
                        [m.source, m.dataset, m.column, m.value, m.run_id],
                    )
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
            with contextlib.suppress(duckdb.Error):  # committed: the .wal holds it until the next open
                con.execute(f"CHECKPOINT {db}")  # the file stands alone: no .wal left beside it

    @contextlib.contextmanager
    def _attached(self, read_only: bool) -> Iterator[tuple[duckdb.DuckDBPyConnection, str]]:
        """A fresh cursor of the process's helper instance with the state file ATTACHed under a unique
        alias (quoted) for the block: no DuckDB instance of its own (25-70 ms each, per run twice)."""
        from pipelinez.core.duck_types import attached_to_helper

        name = f"__pz_state_{secrets.token_hex(6)}"
        with (
            _path_lock(self.path),  # one instance attaches a file once at a time: threads take turns
            attached_to_helper(self.path, name, read_only=read_only) as con,
        ):
            yield con, quote_ident(name)

    def problem(self, exc: BaseException) -> Diagnostic:
        """Why the state file cannot be opened or read, as PZ0527 (broken) or PZ0528 (locked)."""
        text = str(exc)
        wal = self.path.with_name(self.path.name + ".wal")
        if "Could not set lock on file" in text:
            found = _HOLDER.search(text)
            holder = f" (PID {found.group(2)}, {Path(found.group(1)).name})" if found else ""
            return error(
                "PZ0528",
                f"the state file {self.shown} is held open by another process{holder}; pz reads and records "
                "the committed watermarks there",
                file=self.shown,
                next_step="close the program that has the file open (a DuckDB shell, a notebook), or open it "
                "there read-only (duckdb -readonly), then run pz again",
            )
        if self.path.is_dir():
            cause, step = "is a folder, not pz's state file", f"remove the folder {self.shown}"
        elif wal.is_dir():
            cause, step = (
                f"cannot be opened: its write-ahead log {self.shown}.wal is a folder",
                f"remove the folder {self.shown}.wal",
            )
        elif isinstance(exc, OSError):
            cause, step = f"cannot be read: {exc.strerror or exc}", "fix the file's permissions"
        else:
            cause = f"cannot be opened ({condense(text)})"
            if "Catalog Error" in text or "Binder Error" in text:
                cause = f"is a DuckDB file without pz's watermarks table ({condense(text)})"
            step = (
                f"move {self.shown} aside (or restore it from a backup) and run `pz run --full-refresh`: "
                "incremental datasets are then read from their start"
            )
        return error(
            "PZ0527",
            f"the state file {self.shown} {cause}; pz keeps the committed watermarks there",
            file=self.shown,
            next_step=step,
        )


_PATH_LOCKS: dict[str, threading.RLock] = {}
_PATH_LOCKS_GUARD = threading.Lock()


def _path_lock(path: Path) -> threading.RLock:
    """The process's lock of one state file: the helper instance refuses a second ATTACH of a file already
    attached ("Unique file handle conflict"), which two threads reading or committing at once would meet."""
    key = os.path.abspath(path)
    with _PATH_LOCKS_GUARD:
        return _PATH_LOCKS.setdefault(key, threading.RLock())
