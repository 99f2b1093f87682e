"""The duckdb sink's COMMIT checkpoints the file as part of it (`connectors/duckdb/commit.py`): the rows are
written once, into the file's blocks, not to the WAL first; a failed checkpoint fails the write with the old
rows kept; the staging instance's own checkpoint threshold is set back."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from pipelinez.connectors.duckdb.connector import DuckDBConnector
from pipelinez.connectors.sdk import ConnectorContext, OutputRequest
from pipelinez.core.diagnostics import PzConnectorError

APPEND = OutputRequest(name="events", options={}, strategy="append", run_id="r1")


@pytest.fixture
def staging(tmp_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A staging instance set up as a run's is (no checkpoint on shutdown, a 1TB threshold), holding a
    100,000-row delta (less than a row group: DuckDB keeps it in memory until the commit) and a 200,000-row
    one (whole row groups are written to the file's blocks as they land); the sink file holds 300,000 rows."""
    with contextlib.closing(duckdb.connect(str(tmp_path / "wh.duckdb"))) as sink:
        sink.execute("CREATE TABLE events AS SELECT range AS id, 'v' || range AS v FROM range(300000)")
    con = duckdb.connect(str(tmp_path / "staging.duckdb"))
    con.execute("PRAGMA disable_checkpoint_on_shutdown")
    con.execute("SET checkpoint_threshold = '1TB'")
    con.execute("CREATE TABLE delta AS SELECT range + 300000 AS id, 'v' || range AS v FROM range(100000)")
    con.execute("CREATE TABLE big AS SELECT range + 300000 AS id, 'v' || range AS v FROM range(200000)")
    yield con
    con.close()


def _count(file: Path) -> int:
    with contextlib.closing(duckdb.connect(str(file), read_only=True)) as con:
        row = con.execute("SELECT count(*) FROM events").fetchone()
    return int(row[0]) if row else -1


def test_the_commit_writes_the_rows_into_the_file_not_the_wal(
    tmp_path: Path, staging: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    wal_at_checkpoint: list[int] = []
    wal = tmp_path / "wh.duckdb.wal"

    def seen(self: DuckDBConnector, cur: duckdb.DuckDBPyConnection, catalog: str) -> None:
        wal_at_checkpoint.append(wal.stat().st_size if wal.exists() else 0)

    monkeypatch.setattr(DuckDBConnector, "_checkpoint", seen)
    sink = DuckDBConnector(ConnectorContext("wh", tmp_path, {"path": "wh.duckdb"}))
    assert sink.write_native(staging, APPEND, "delta").rows == 100_000
    # committed, and already in the file's blocks: the WAL was never written (it held ~1.7 MB before)
    assert wal_at_checkpoint == [0]
    assert not wal.exists()
    assert _count(tmp_path / "wh.duckdb") == 400_000
    # the staging instance's own threshold (1TB), set back (DuckDB shows it rounded: 931.2 GiB)
    after = staging.execute("SELECT current_setting('checkpoint_threshold')").fetchone()
    assert after is not None and str(after[0]).endswith(" GiB") and float(str(after[0]).split()[0]) > 900


def test_a_checkpoint_that_fails_in_the_commit_fails_the_write_and_keeps_the_old_rows(
    tmp_path: Path, staging: duckdb.DuckDBPyConnection
) -> None:
    staging.execute("SET debug_checkpoint_abort = 'before_header'")
    sink = DuckDBConnector(ConnectorContext("wh", tmp_path, {"path": "wh.duckdb"}))
    with pytest.raises(PzConnectorError) as failed:
        sink.write_native(staging, APPEND, "delta")
    assert failed.value.code == "PZ0501"
    staging.execute("SET debug_checkpoint_abort = 'none'")
    assert _count(tmp_path / "wh.duckdb") == 300_000  # none of the delta
    assert not (tmp_path / "wh.duckdb.wal").exists()
    # the next write attaches the file again and lands
    assert sink.write_native(staging, APPEND, "delta").rows == 100_000
    assert _count(tmp_path / "wh.duckdb") == 400_000


def test_a_commit_durable_in_the_wal_is_a_committed_write_when_its_checkpoint_fails(
    tmp_path: Path, staging: duckdb.DuckDBPyConnection
) -> None:
    """Whole row groups landed in the file's blocks, the WAL points at them: DuckDB writes it, and a failed
    checkpoint leaves a durable commit, which the write reports, with a note."""
    notes: list[str] = []
    staging.execute("SET debug_checkpoint_abort = 'before_header'")
    sink = DuckDBConnector(ConnectorContext("wh", tmp_path, {"path": "wh.duckdb"}, note=notes.append))
    assert sink.write_native(staging, APPEND, "big").rows == 200_000
    staging.execute("SET debug_checkpoint_abort = 'none'")
    assert len(notes) == 1 and "could not be checkpointed" in notes[0], notes
    assert _count(tmp_path / "wh.duckdb") == 500_000
