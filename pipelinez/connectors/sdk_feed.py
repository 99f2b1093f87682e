"""An Arrow stream written into a DuckDB table in bounded statements.

DuckDB holds on to what its scan of a registered Arrow stream has read until the statement that scans it
ends, so one `INSERT … SELECT * FROM <stream>` grows with the rows (text columns above all). Writing a staged
10M-row table's stream into a DuckDB file (`benchmarks/arrow_stream_memory.py`, peak RSS): one statement
1,571 MiB in 7.6 s; one INSERT per 8 batches inside the caller's transaction 964 MiB in 10.6 s (16 batches:
1,213 MiB, 8.7 s); the stream read by a Python loop alone 463 MiB. The sink's 256MB buffer pool is in those
figures (pz now feeds 4 batches a statement: see BATCHES_PER_STATEMENT). The result is the same table: the
caller's transaction makes the statements one write.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

from pipelinez.core.sqlnames import quote_ident

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

# 4 x 122,880 rows: about half a million rows in flight per statement. With 8, a universal-tier 10M-row
# PostgreSQL → DuckDB file `pz run` peaked at 836 MiB (staging load 710); with 4 at 702 (staging load 481);
# the time cost was lost in the machine's load that hour (docs/benchmarks.md, Memory: one budget)
BATCHES_PER_STATEMENT = 4


class ArrowFeed:
    """A one-shot Arrow stream, inserted group by group under a registered name."""

    def __init__(self, reader: pa.RecordBatchReader, name: str, batches: int = BATCHES_PER_STATEMENT):
        self._reader = reader
        self._name = name
        self._batches = batches
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
        """INSERT the whole stream into `table` (quoted, qualified as the cursor needs), each group through
        `SELECT <select> FROM <name>`; the rows inserted. `before_each` runs before every statement (and may
        raise to stop: an interrupt of the cursor between two statements is not remembered by DuckDB)."""
        import pyarrow as pa

        if self._used:
            raise ValueError("an Arrow stream can be inserted once")
        self._used = True
        batches = iter(self._reader)
        order = "BY NAME " if by_name else ""
        statement = f"INSERT INTO {table} {order}SELECT {select} FROM {quote_ident(self._name)}"
        total = 0
        while group := list(itertools.islice(batches, self._batches)):
            if before_each is not None:
                before_each()
            cur.register(self._name, pa.RecordBatchReader.from_batches(self.schema, group))
            try:
                row = cur.execute(statement).fetchone()
            finally:
                cur.unregister(self._name)
            total += int(row[0]) if row else 0
        return total
