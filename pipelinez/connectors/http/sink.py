"""Sending a result to an API: the rows cut into batches of `batch_size`, in the order the engine streams
them, each batch one request (a JSON array, or newline-delimited JSON), with checkpointed delivery.

A batch counts as delivered when the server acknowledged it (a 2xx answer). Every acknowledged batch is
recorded with a fingerprint of its body; a retried write skips them only when what it would send has the
same fingerprints (`sdk_delivery.deliver`). Bodies are built by DuckDB's `to_json` and joined by Arrow,
never row by row in Python.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from pipelinez.connectors.http.client import request, with_params
from pipelinez.connectors.http.settings import HttpConnection, HttpOutput
from pipelinez.connectors.http.source import endpoint_url
from pipelinez.connectors.sdk import WriteResult
from pipelinez.connectors.sdk_delivery import DeliveryCheckpoint, deliver
from pipelinez.core import duck_connect
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident

if TYPE_CHECKING:
    import pyarrow as pa

CONTENT_TYPES = {"json": "application/json", "ndjson": "application/x-ndjson"}


def rechunk(reader: pa.RecordBatchReader, rows: int) -> Iterator[pa.Table]:
    """The stream cut into tables of exactly `rows` rows (the last one shorter), in order; at most one
    batch of the input beyond `rows` is held at a time."""
    import pyarrow as pa

    pending: list[pa.RecordBatch] = []
    held = 0
    for batch in reader:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        held += batch.num_rows
        if held >= rows:
            table = pa.Table.from_batches(pending)
            start = 0
            while held - start >= rows:
                yield table.slice(start, rows)
                start += rows
            rest = table.slice(start)
            pending = rest.to_batches()
            held = rest.num_rows
    if held:
        yield pa.Table.from_batches(pending)


class BodyEncoder:
    """Serializes a table of rows as one request body, in row order."""

    def __init__(self, fmt: str):
        import duckdb

        self.fmt = fmt
        self._con: duckdb.DuckDBPyConnection = duck_connect.connect()
        self._con.execute("SET TimeZone = 'UTC'")

    def encode(self, table: pa.Table) -> bytes:
        import pyarrow as pa
        import pyarrow.compute as pc

        self._con.register("__pz_batch", table)
        try:
            self._refuse_non_finite(table)
            lines = self._con.execute("SELECT to_json(b)::VARCHAR AS j FROM __pz_batch AS b").to_arrow_table()
        finally:
            self._con.unregister("__pz_batch")
        values = lines.column(0).combine_chunks()
        listed = pa.LargeListArray.from_arrays(pa.array([0, len(values)], pa.int64()), values)
        if self.fmt == "ndjson":
            joined = str(pc.binary_join(listed, "\n")[0].as_py())
            return (joined + "\n").encode("utf-8")
        joined = str(pc.binary_join(listed, ",")[0].as_py())
        return ("[" + joined + "]").encode("utf-8")

    def _refuse_non_finite(self, table: pa.Table) -> None:
        """JSON has no NaN or Infinity (DuckDB would write them as bare words no parser accepts)."""
        import pyarrow as pa

        floats = [f.name for f in table.schema if pa.types.is_floating(f.type)]
        if not floats:
            return
        counts = ", ".join(f"count(*) FILTER (WHERE NOT isfinite({quote_ident(n)}))" for n in floats)
        row = self._con.execute(f"SELECT {counts} FROM __pz_batch").fetchone() or ()
        bad = [n for n, c in zip(floats, row, strict=True) if c]
        if bad:
            raise PzConnectorError(
                f"column(s) {', '.join(repr(b) for b in bad)} hold NaN or Infinity, which JSON cannot carry; "
                "map them in the pipeline, e.g. CASE WHEN isfinite(x) THEN x END"
            )

    def close(self) -> None:
        self._con.close()


def write(
    conn: HttpConnection,
    out: HttpOutput,
    reader: pa.RecordBatchReader,
    resume: DeliveryCheckpoint | None,
    note: Callable[[str], None],
) -> WriteResult:
    url = with_params(endpoint_url(conn, out.path), conn.params)
    headers = {**conn.headers, "Content-Type": CONTENT_TYPES[out.format]}
    encoder = BodyEncoder(out.format)

    def send(body: bytes) -> None:
        request(out.method, url, headers, conn.timeout, body, private_params=conn.params)

    try:
        bodies = ((t.num_rows, encoder.encode(t)) for t in rechunk(reader, out.batch_size))
        checkpoint = deliver(bodies, send, out.batch_size, resume, note)
    finally:
        encoder.close()
    return WriteResult(rows=checkpoint.rows, batches_committed=len(checkpoint.batches), checkpoint=checkpoint)
