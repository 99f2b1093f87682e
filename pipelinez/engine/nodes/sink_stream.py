"""The Arrow stream a universal-tier sink write reads: the staged result, batch by batch, with its types.

DuckDB's Arrow export turns UUID and JSON into plain strings unless the database it runs in exports them
losslessly, and that setting (`arrow_lossless_conversion`) is global to a database: turning it on in the
run's staging database would change every other node's exports too (and HUGEINT, TIME WITH TIME ZONE, BIT
would become opaque DuckDB extension types). So the staged rows are exported as usual, and the columns whose
type holds a UUID or JSON (`UUID`, `JSON[]`, `STRUCT(id UUID)`, ...) are cast back to their staged type, batch
by batch, in a private in-memory DuckDB that exports losslessly: they reach the sink as Arrow's canonical
`arrow.uuid` and `arrow.json` extension types, the same types the native tier writes. Every other column is
passed through untouched. One statement per batch, so nothing accumulates in the private database.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pipelinez.core import duck_connect
from pipelinez.core.sqlnames import quote_ident

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

_LOSSY = re.compile(r"\b(UUID|JSON)\b")
_BATCH = "pz_sink_batch"


def typed_columns(cur: duckdb.DuckDBPyConnection, source: str) -> dict[str, str]:
    """The staged result's columns whose DuckDB type a plain Arrow export turns into text: name -> type."""
    described = cur.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
    return {str(name): str(kind) for name, kind, *_ in described if _LOSSY.search(str(kind))}


def sink_stream(cur: duckdb.DuckDBPyConnection, source: str, batch_rows: int) -> pa.RecordBatchReader:
    """The staged result `source` (quoted) as an Arrow stream that keeps UUID and JSON types."""
    import pyarrow as pa

    typed = typed_columns(cur, source)
    reader = cur.execute(f"SELECT * FROM {source}").to_arrow_reader(batch_rows)
    if not typed:
        return reader

    private = duck_connect.connect()
    private.execute("SET arrow_lossless_conversion = true")
    names = list(reader.schema.names)
    select = ", ".join(f"CAST({quote_ident(n)} AS {typed[n]}) AS {quote_ident(n)}" for n in typed)
    shape = _retyped(private, select, pa.Table.from_batches([], schema=reader.schema))
    fields = [shape.schema.field(n) if n in typed else reader.schema.field(n) for n in names]
    schema = pa.schema(fields, metadata=reader.schema.metadata)

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            for batch in reader:
                cast = _retyped(private, select, batch)
                columns = [cast.column(n) if n in typed else batch.column(n) for n in names]
                yield pa.RecordBatch.from_arrays(
                    [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in columns],
                    schema=schema,
                )
        finally:
            private.close()

    return pa.RecordBatchReader.from_batches(schema, batches())


def _retyped(private: duckdb.DuckDBPyConnection, select: str, data: pa.RecordBatch | pa.Table) -> pa.Table:
    private.register(_BATCH, data)
    try:
        return private.execute(f"SELECT {select} FROM {_BATCH}").to_arrow_table()
    finally:
        private.unregister(_BATCH)
