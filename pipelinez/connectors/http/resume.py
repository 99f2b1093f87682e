"""Resuming a paginated read on the engine's next attempt, within one run: the pages an attempt fetched are
not fetched again.

While a dataset is read, every page's Arrow batches are appended to a spool on local disk (Arrow IPC,
lz4-compressed, one segment file per attempt), and after each complete page the walk's state is recorded:
the next page's URL, pages and records so far, the cursors seen, the last page's digest and the schema the
reader settled on. When the read fails (a 429/503 the engine retries, a dropped connection), the spool stays;
the engine's next attempt of the same read (same run, source instance, dataset and options) first replays the
spooled batches into staging, in order, then continues at the page that failed. A read that ends normally
deletes its spool. Spools are kept per process: an attempt in another process (a remote worker) starts at
page 1. A spool from another run is deleted when a new run's read starts; all are deleted at exit.

Memory stays bounded by one page: replayed batches stream from the file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelinez.core.stop_signals import exit_cleanup

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class WalkState:
    """Where a read stands after its last complete page."""

    next_url: str | None
    pages: int
    records: int
    seen_cursors: frozenset[str]
    last_digest: str
    schema: tuple[tuple[str, str], ...] | None
    unread: frozenset[str]


class Spool:
    """The fetched pages of one read, for the next attempt of the same read."""

    def __init__(self, key: tuple[str, ...]):
        self.key = key
        self.folder = Path(tempfile.mkdtemp(prefix="pz-http-resume-"))
        self.state: WalkState | None = None
        self.segments: list[Path] = []
        self.counts: list[int] = []  # batches of complete pages in each segment
        self._writer: Any = None
        self._written = 0  # batches written to the current segment (complete pages or not)

    # -- the attempt that writes ---------------------------------------------------------------
    def begin(self) -> None:
        """A new attempt: its batches go to a new segment."""
        self._close_writer()
        self._written = 0

    def write(self, batch: pa.RecordBatch) -> None:
        import pyarrow as pa

        if self._writer is None:
            path = self.folder / f"segment-{len(self.segments):04d}.arrow"
            options = pa.ipc.IpcWriteOptions(compression="lz4")
            self._writer = pa.ipc.new_stream(str(path), batch.schema, options=options)
            self.segments.append(path)
            self.counts.append(0)
        self._writer.write_batch(batch)
        self._written += 1

    def commit(self, state: WalkState) -> None:
        """Every batch of the pages `state` counts is written: a later attempt may start after them."""
        if self._writer is not None:
            self.counts[-1] = self._written
        self.state = state

    def _close_writer(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
            self._writer = None

    # -- the attempt that resumes --------------------------------------------------------------
    def replay(self) -> Iterator[pa.RecordBatch]:
        """The batches of the complete pages, in the order they were fetched."""
        import pyarrow as pa

        self._close_writer()
        for segment, count in zip(list(self.segments), list(self.counts), strict=True):
            if count == 0:
                continue
            with pa.ipc.open_stream(str(segment)) as reader:
                for i, batch in enumerate(reader):
                    if i >= count:
                        break
                    yield batch

    def delete(self) -> None:
        self._close_writer()
        shutil.rmtree(self.folder, ignore_errors=True)


_lock = threading.Lock()
_spools: dict[tuple[str, ...], Spool] = {}


def read_key(
    run_id: str, instance: str, dataset: str, options: dict[str, Any], columns: Any
) -> tuple[str, ...]:
    """What makes two attempts the same read: the run, the source instance, the dataset and what it asks."""
    asked = json.dumps([options, columns], sort_keys=True, default=str)
    return (run_id, instance, dataset, hashlib.sha256(asked.encode()).hexdigest())


def spool_for(key: tuple[str, ...]) -> Spool:
    """The read's spool: an earlier attempt's (to resume) or a new one. Spools of other runs are deleted."""
    with _lock:
        for other in [k for k in _spools if k[0] != key[0]]:
            _spools.pop(other).delete()
        spool = _spools.get(key)
        if spool is None:
            spool = _spools[key] = Spool(key)
        return spool


def finished(spool: Spool) -> None:
    """The read ended normally: nothing left to resume."""
    with _lock:
        if _spools.get(spool.key) is spool:
            del _spools[spool.key]
    spool.delete()


def release(spool: Spool) -> None:
    """The attempt ended (failed): the spool stays for the next one, its file closed."""
    spool._close_writer()


@exit_cleanup  # also when an interrupted `pz` ends at once (os._exit runs no atexit)
def _delete_all() -> None:
    with _lock:
        for spool in _spools.values():
            spool.delete()
        _spools.clear()
