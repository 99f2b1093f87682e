"""The postgres connector's universal tier: ADBC's PostgreSQL driver (COPY BINARY into Arrow record
batches) runs the server-side projection; batches are converted column by column with pyarrow kernels,
never per row. A partition worker's reads share one `ReaderConnection`."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.postgres.arrow_convert import arrow_schema, convert_batch
from pipelinez.connectors.postgres.settings import Settings, lead
from pipelinez.connectors.postgres.source import Relation, read_where
from pipelinez.connectors.sdk import Partition, ReadBounds
from pipelinez.core.diagnostics import PzConnectorError

if TYPE_CHECKING:
    import pyarrow as pa


class ReaderConnection:
    """The ADBC connection a connector's universal-tier reads share (autocommit: each read is one COPY
    statement, no transaction left open between reads). Opening one costs a handshake and the driver's type
    catalog load (about 0.3 s), so a partition worker opens it once for all its partitions.

    A read takes the connection out (`acquire`) and gives it back (`release`) only when it finished cleanly;
    a read that failed, or was abandoned mid-stream, closes its connection instead, so the next read connects
    afresh and a connection that may be broken or mid-COPY is never reused."""

    def __init__(self, settings: Settings):
        self._settings = settings
        self._idle: Any = None
        self._lock = threading.Lock()  # an abandoned read may be finalized on another thread
        self.opened = 0  # connections opened (tests, benchmarks)

    def acquire(self) -> Any:
        with self._lock:
            conn, self._idle = self._idle, None
        if conn is None:
            conn = self._settings.adbc("PZ0505", autocommit=True)
            self.opened += 1
        return conn

    def release(self, conn: Any, *, reusable: bool) -> None:
        with self._lock:
            if reusable and self._idle is None:
                self._idle = conn
                return
        with contextlib.suppress(Exception):
            conn.close()

    def close(self) -> None:
        with self._lock:
            conn, self._idle = self._idle, None
        if conn is not None:
            self.release(conn, reusable=False)


def extract_batches(
    settings: Settings,
    relation: Relation,
    partition: Partition,
    where: str,
    bounds: ReadBounds | None = None,
    reader_connection: ReaderConnection | None = None,
) -> Iterator[pa.RecordBatch]:
    """The partition's rows as Arrow batches, read through `reader_connection` (kept by the caller across
    reads) or through a connection of its own."""
    import pyarrow as pa

    sql = relation.select_sql(True, read_where(relation, partition, bounds or ReadBounds()))
    schema = arrow_schema(relation.plans)
    through = reader_connection or ReaderConnection(settings)
    finished = False
    conn = through.acquire()
    try:
        cur = conn.cursor()
        try:
            try:
                cur.execute(sql)
                reader = cur.fetch_record_batch()
            except Exception as exc:
                raise settings.error(exc, where, "PZ0505") from exc
            produced = False
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    break
                except Exception as exc:
                    raise settings.error(exc, where, "PZ0505") from exc
                produced = True
                try:
                    yield convert_batch(batch, relation.plans, schema)
                except PzConnectorError as exc:
                    raise PzConnectorError(
                        f"{lead(where)}{settings.scrub(exc.message)}", code=exc.code or "PZ0505"
                    ) from exc
            finished = True
            if not produced:
                yield pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)
        finally:
            with contextlib.suppress(Exception):
                cur.close()
    finally:
        through.release(conn, reusable=finished and reader_connection is not None)
