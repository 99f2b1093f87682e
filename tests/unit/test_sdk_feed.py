"""ArrowFeed: an Arrow stream written into DuckDB in bounded statements, and the staging ingest on it."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from pipelinez.connectors.sdk_feed import ArrowFeed
from pipelinez.engine.nodes.landing import ingest_batches
from pipelinez.engine.run.failures import NodeFailure


def _batches(n: int, size: int = 10) -> list[pa.RecordBatch]:
    return [
        pa.record_batch({"id": list(range(i * size, (i + 1) * size)), "v": ["x"] * size}) for i in range(n)
    ]


def test_a_stream_goes_in_groups_of_batches_and_lands_whole() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id BIGINT, v VARCHAR)")
    statements: list[int] = []
    batches = _batches(20)
    feed = ArrowFeed(pa.RecordBatchReader.from_batches(batches[0].schema, batches), "s", batches=8)
    rows = feed.insert_into(con, "t", before_each=lambda: statements.append(1))
    assert rows == 200 and len(statements) == 3  # 8 + 8 + 4 batches
    assert con.execute("SELECT count(*), count(DISTINCT id) FROM t").fetchone() == (200, 200)
    with pytest.raises(ValueError, match="once"):
        feed.insert_into(con, "t")


def test_an_interrupt_between_two_statements_stops_the_load_and_nothing_is_staged() -> None:
    """DuckDB forgets an interrupt that came while no query ran; the ingest checks for one before each
    statement, stops with PZ0514 and rolls the whole load back."""
    con = duckdb.connect()
    calls = iter([False, True])  # the first statement runs; the interrupt comes before the second
    with pytest.raises(NodeFailure) as caught:
        ingest_batches(
            con, _batches(20, 122_880 // 8), "staged", False, None, "v", "auto", lambda: next(calls)
        )
    assert caught.value.code == "PZ0514"
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'staged'").fetchone() == (0,)
