"""An Arrow stream written into a DuckDB table in bounded statements.

DuckDB holds on to what its scan of a registered Arrow stream has read until the statement that scans it
ends, so one `INSERT … SELECT * FROM <stream>` grows with the rows (text columns above all). Writing a staged
10M-row table's stream into a DuckDB file (`benchmarks/arrow_stream_memory.py`, peak RSS): one statement
1,571 MiB in 7.6 s; one INSERT per 8 batches inside the caller's transaction 964 MiB in 10.6 s (16 batches:
1,213 MiB, 8.7 s); the stream read by a Python loop alone 463 MiB. The sink's 256MB buffer pool is in those
figures (pz now feeds 2 batches a statement: see BATCHES_PER_STATEMENT). The result is the same table: the
caller's transaction makes the statements one write.

Each statement inserts whole row groups of DuckDB (ROW_GROUP_ROWS). The next group is read while the
current one is inserted (`_ReadAhead`): reading the source (ADBC decoding PostgreSQL's COPY, ConnectorX's
batches converted with pyarrow, a staging table exported) runs in Python on one core, DuckDB's insert on the
others, where before they took turns.
"""

from __future__ import annotations

import contextvars
import itertools
import queue
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from pipelinez.core.sqlnames import quote_ident

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

# 2 x 122,880 rows a statement, and the next 2 read meanwhile (`_ReadAhead`): about half a million rows in
# flight, as 4 a statement without the read-ahead were. Statements of 8 batches: a universal-tier 10M-row
# PostgreSQL → DuckDB file `pz run` peaked at 836 MiB, of 4: 702 (docs/benchmarks.md, Memory: one budget);
# 4 a statement with 4 read ahead: 675-731 (docs/benchmarks.md, Bulk data path)
BATCHES_PER_STATEMENT = 2
# DuckDB's row group. The stream is re-cut into batches of exactly this many rows: with the read-ahead,
# DuckDB's insert left a partial row group where an Arrow batch ended inside one (ConnectorX's batches are
# 65,536 rows); a table copied from such a table (a sink write from staging) holds them too, and the sink's
# CHECKPOINT then merged them by compressing them again: 2.4-2.8 s of a 2M-row MariaDB → DuckDB file run
# (docs/benchmarks.md, Bulk data path)
ROW_GROUP_ROWS = 122_880


class ArrowFeed:
    """A one-shot Arrow stream, inserted group by group under a registered name."""

    def __init__(
        self,
        reader: pa.RecordBatchReader,
        name: str,
        batches: int = BATCHES_PER_STATEMENT,
        batch_rows: int = ROW_GROUP_ROWS,
    ):
        self._reader = reader
        self._name = name
        self._batches = batches
        self._batch_rows = batch_rows
        self._used = False

    @property
    def schema(self) -> pa.Schema:
        return self._reader.schema

    def insert_into(
        self,
        cur: duckdb.DuckDBPyConnection,
        table: str,
        *,
        by_name: bool = False,
        select: str = "*",
        before_each: Callable[[], None] | None = None,
    ) -> int:
        """INSERT the whole stream into `table` (quoted, qualified as the cursor needs), re-cut into batches
        of `batch_rows` rows, `batches` of them a statement through `SELECT <select> FROM <name>`; the rows
        inserted.
        `before_each` runs before every statement (and may raise to stop: an interrupt of the cursor between
        two statements is not remembered by DuckDB)."""
        import pyarrow as pa

        if self._used:
            raise ValueError("an Arrow stream can be inserted once")
        self._used = True
        order = "BY NAME " if by_name else ""
        statement = f"INSERT INTO {table} {order}SELECT {select} FROM {quote_ident(self._name)}"
        total = 0
        groups = _ReadAhead(_recut(iter(self._reader), self._batch_rows), self._batches)
        try:
            for group in groups:
                if before_each is not None:
                    before_each()
                cur.register(self._name, pa.RecordBatchReader.from_batches(self.schema, group))
                try:
                    row = cur.execute(statement).fetchone()
                finally:
                    cur.unregister(self._name)
                total += int(row[0]) if row else 0
        finally:
            groups.close()
        return total


_END = object()


class _ReadAhead:
    """The stream's groups of batches, the next group read by a thread of its own while the caller inserts
    the current one, so the source's read (a driver decoding rows from the network, another DuckDB exporting
    a table) overlaps DuckDB's insert instead of waiting for it. One group is read ahead, never more: at most
    two groups are in flight (the one inserted, the next). An error of the read is raised to the caller
    where it takes the group; `close` stops the reading thread and waits for it (the batch it is reading
    finishes first)."""

    def __init__(self, batches: Iterator[pa.RecordBatch], size: int):
        self._batches = batches
        self._size = size
        self._ready: queue.Queue[object] = queue.Queue()
        self._slot = threading.Semaphore(1)
        self._stop = threading.Event()
        # the caller's context variables (a failpoint's scope) hold in the reading thread too
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run, args=(self._read,), name="pz-feed-read-ahead", daemon=True
        )
        self._thread.start()

    def _read(self) -> None:
        try:
            while True:
                self._slot.acquire()
                if self._stop.is_set():
                    return
                group = list(itertools.islice(self._batches, self._size))
                self._ready.put(group if group else _END)
                if not group:
                    return
        except BaseException as exc:  # handed to the caller, raised where it inserts
            self._ready.put(exc)

    def __iter__(self) -> Iterator[list[pa.RecordBatch]]:
        while True:
            item = self._ready.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            self._slot.release()
            yield item  # type: ignore[misc]

    def close(self) -> None:
        self._stop.set()
        self._slot.release()
        self._thread.join()


def _recut(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """The stream as batches of exactly `rows` rows (the last one fewer): a batch that holds them is passed on
    as is or sliced (zero-copy), the pieces of one that spans two batches are concatenated (a copy of that
    one). Batches without rows are left out."""

    pieces: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        while batch.num_rows:
            take = min(batch.num_rows, rows - held)
            pieces.append(batch if take == batch.num_rows else batch.slice(0, take))
            held += take
            batch = batch.slice(take)
            if held == rows:
                yield from _joined(pieces)
                pieces, held = [], 0
    yield from _joined(pieces)


def _joined(pieces: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
    import pyarrow as pa

    if len(pieces) < 2:
        return pieces
    try:
        return [pa.concat_batches(pieces)]
    except (pa.ArrowException, ValueError):  # pieces Arrow cannot join: inserted as they came
        return pieces
