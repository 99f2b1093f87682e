"""ArrowFeed: an Arrow stream written into DuckDB in bounded statements, and the staging ingest on it."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from pipelinez.connectors.sdk_feed import ROW_GROUP_ROWS, ArrowFeed
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
    feed = ArrowFeed(
        pa.RecordBatchReader.from_batches(batches[0].schema, batches), "s", batches=8, batch_rows=10
    )
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
            con, _batches(40, 122_880 // 8), "staged", False, None, "v", "auto", lambda: next(calls)
        )
    assert caught.value.code == "PZ0514"
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'staged'").fetchone() == (0,)


def _pulled_log(batches: list[pa.RecordBatch], log: list[str]) -> pa.RecordBatchReader:
    def pull():
        for i, batch in enumerate(batches):
            log.append(f"read {i}")
            yield batch

    return pa.RecordBatchReader.from_batches(batches[0].schema, pull())


def test_the_next_group_is_read_while_the_current_one_is_inserted_and_never_more() -> None:
    """The source's read overlaps DuckDB's insert: while a group is inserted the next one is read (by a
    thread of the feed's own), but never the one after it, so at most two groups are in flight."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id BIGINT, v VARCHAR)")
    log: list[str] = []
    batches = _batches(10)
    feed = ArrowFeed(_pulled_log(batches, log), "s", batches=2, batch_rows=10)
    seen: list[list[str]] = []

    def before_each() -> None:
        import time

        deadline = time.monotonic() + 5
        # the group after this one is read ahead before this one is inserted (or the stream is over)
        while time.monotonic() < deadline and len(log) < min(len(batches), 2 * (len(seen) + 2)):
            time.sleep(0.01)
        time.sleep(0.05)  # and nothing beyond it, however long the insert takes
        seen.append(list(log))

    assert feed.insert_into(con, "t", before_each=before_each) == 100
    assert [len(s) for s in seen] == [4, 6, 8, 10, 10]
    assert con.execute("SELECT list(id ORDER BY rowid) FROM t").fetchone() == (list(range(100)),)


def test_an_error_of_the_source_read_ahead_reaches_the_caller_and_the_reader_thread_ends() -> None:
    import threading

    con = duckdb.connect()
    con.execute("CREATE TABLE t (id BIGINT, v VARCHAR)")
    batches = _batches(6)

    def pull():
        yield from batches[:3]
        raise ConnectionResetError("the server went away")

    feed = ArrowFeed(
        pa.RecordBatchReader.from_batches(batches[0].schema, pull()), "s", batches=2, batch_rows=10
    )
    with pytest.raises(Exception, match="the server went away"):
        feed.insert_into(con, "t")
    assert not [t for t in threading.enumerate() if t.name == "pz-feed-read-ahead"]


def test_a_failed_insert_stops_the_read_ahead() -> None:
    import threading

    con = duckdb.connect()
    con.execute("CREATE TABLE t (id BIGINT, v VARCHAR)")
    log: list[str] = []
    feed = ArrowFeed(_pulled_log(_batches(20), log), "s", batches=2, batch_rows=10)

    def before_each() -> None:
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        feed.insert_into(con, "t", before_each=before_each)
    assert len(log) <= 4  # the first group and the one read ahead, nothing more
    assert not [t for t in threading.enumerate() if t.name == "pz-feed-read-ahead"]


def test_each_statement_inserts_whole_row_groups_so_the_table_has_no_partial_one_but_its_last(
    tmp_path: Path,
) -> None:
    """A statement ending with a partial row group leaves it in the table (and in a table copied from it,
    whose CHECKPOINT then compresses them again to merge them): the stream is sliced at row-group
    boundaries, whatever its batches' sizes."""
    con = duckdb.connect(str(tmp_path / "t.duckdb"))
    con.execute("CREATE TABLE t (id BIGINT)")
    batches = [
        pa.record_batch({"id": pa.array(range(i, i + 65_536), pa.int64())}) for i in range(0, 655_360, 65_536)
    ]
    feed = ArrowFeed(pa.RecordBatchReader.from_batches(batches[0].schema, batches), "s", batches=2)
    con.execute("BEGIN TRANSACTION")
    assert feed.insert_into(con, "t") == 655_360
    con.execute("COMMIT")
    con.execute("CHECKPOINT")
    sizes = [
        r[1]
        for r in con.execute(
            "SELECT row_group_id, max(count) FROM pragma_storage_info('t') WHERE column_name = 'id' "
            "GROUP BY ALL ORDER BY 1"
        ).fetchall()
    ]
    assert sizes[:-1] == [ROW_GROUP_ROWS] * (len(sizes) - 1) and sum(sizes) == 655_360
    assert con.execute("SELECT count(DISTINCT id), min(id), max(id) FROM t").fetchone() == (
        655_360,
        0,
        655_359,
    )


def test_batches_joined_across_a_row_group_boundary_keep_every_value_and_type() -> None:
    """Pieces of two batches are concatenated into one row group's batch; dictionary columns whose batches
    carry different dictionaries (DuckDB exports ENUMs so) and extension types land exactly."""
    schema = pa.schema(
        [("id", pa.int64()), ("tag", pa.dictionary(pa.int32(), pa.string())), ("u", pa.uuid())]
    )

    def batch(ids: range, tags: list[str]) -> pa.RecordBatch:
        dictionary = pa.array(tags).dictionary_encode()
        return pa.record_batch(
            [
                pa.array(ids, pa.int64()),
                pa.DictionaryArray.from_arrays(dictionary.indices, dictionary.dictionary),
                pa.array([i.to_bytes(16, "big") for i in ids], pa.uuid()),
            ],
            schema=schema,
        )

    batches = [
        batch(range(0, 6), ["a", "b"] * 3),
        batch(range(6, 13), ["c"] * 7),
        batch(range(13, 15), ["b", "a"]),
    ]
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id BIGINT, tag VARCHAR, u UUID)")
    feed = ArrowFeed(pa.RecordBatchReader.from_batches(schema, batches), "s", batches=1, batch_rows=4)
    assert feed.insert_into(con, "t") == 15
    rows = con.execute("SELECT id, tag, u::VARCHAR FROM t ORDER BY id").fetchall()
    expected_tags = ["a", "b"] * 3 + ["c"] * 7 + ["b", "a"]
    assert [(r[0], r[1]) for r in rows] == list(zip(range(15), expected_tags, strict=True))
    assert rows[14][2] == "00000000-0000-0000-0000-00000000000e"
