"""A sink write's COMMIT that writes the rows into the database file once, not twice.

A plain COMMIT of a write into a DuckDB file logs every row to the file's write-ahead log (fsynced), and the
checkpoint that follows (`DuckDBConnector._checkpoint`: the file stands alone) writes the same rows again
into the file's blocks: a +100,000-row append into a 10M-row file wrote 7.7 MB of WAL for nothing, 0.03 s
on a quiet machine and 0.1-0.15 s under load. With `checkpoint_threshold` at 0 for the COMMIT, DuckDB
checkpoints the database as part of the commit and, for a write larger than
`auto_checkpoint_skip_wal_threshold`, skips the WAL: the COMMIT returns once the rows are in the file's
blocks and its header is written (durable on return, as before).

Failure: when that checkpoint fails, DuckDB invalidates the attached database until it is detached, and the
COMMIT raises. Where it skipped the WAL the write failed: the file holds the old state (a failure before the
header write) or, rarely, the new one (after it: a re-run of an append then appends again, as after a kill
between the sink's commit and the watermark's, `delivery-guarantees.md`). Where it had written the WAL (a
small write, or rows already written to the file's blocks as they landed: the WAL points at them) DuckDB
says the COMMIT "succeeded and is durable": that is a committed write, and the checkpoint after it
(`DuckDBConnector._checkpoint`) notes that the `.wal` holds the change until the next write.

`checkpoint_threshold` is an instance-wide setting: it is lowered only for the COMMIT, under a lock of this
process (sink commits take turns), and set back after. A commit of another node into the staging database
that lands in that window checkpoints the staging file too: slower, never wrong.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING

from pipelinez.core.sqlnames import quote_literal

if TYPE_CHECKING:
    import duckdb

_LOCK = threading.Lock()


_DURABLE = "COMMIT succeeded and is durable"


def commit_into_file(cur: duckdb.DuckDBPyConnection) -> None:
    """COMMIT `cur`'s open transaction, checkpointing the written database as part of it (see above)."""
    import duckdb

    with _LOCK:
        row = cur.execute("SELECT current_setting('checkpoint_threshold')").fetchone()
        before = str(row[0]) if row else "16MiB"
        cur.execute("SET checkpoint_threshold = '0b'")
        try:
            cur.execute("COMMIT")
        except duckdb.Error as exc:
            if _DURABLE not in str(exc):
                raise
        finally:
            with contextlib.suppress(Exception):
                cur.execute(f"SET checkpoint_threshold = {quote_literal(before)}")
