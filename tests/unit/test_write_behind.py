"""The staging file's write-behind (engine/staging/write_behind.py): it writes the file back while it changes,
for as long as the staging database is open, and never touches its content. No timings: each step is driven
by hand or observed through the thread's life."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from pipelinez.engine.run.context import close_staging, open_staging
from pipelinez.engine.staging import write_behind
from pipelinez.engine.staging.write_behind import WriteBehind

pytestmark = pytest.mark.skipif(not hasattr(os, "fdatasync"), reason="no fdatasync on this platform")


def _threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "pz-write-behind"]


def test_a_step_writes_the_file_back_only_when_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "staging.duckdb"
    path.write_bytes(b"a" * 4096)
    synced: list[int] = []
    monkeypatch.setattr(write_behind.os, "fdatasync", synced.append)
    behind = WriteBehind(path, period=3600).start()  # the thread waits an hour: the steps below are ours
    try:
        assert behind.tick() is False and synced == []  # unchanged since start
        with path.open("ab") as f:
            f.write(b"b" * 4096)
        assert behind.tick() is True and len(synced) == 1
        assert behind.tick() is False and len(synced) == 1
    finally:
        behind.stop()
    assert path.read_bytes() == b"a" * 4096 + b"b" * 4096  # content as written
    assert behind.tick() is False  # stopped: its descriptor is closed


def test_the_staging_database_is_written_back_while_it_is_open(tmp_path: Path) -> None:
    before = len(_threads())
    con = open_staging(tmp_path / "staging.duckdb", "320MB")
    try:
        assert len(_threads()) == before + 1
        con.execute("CREATE TABLE t AS SELECT range AS i FROM range(1000)")
    finally:
        close_staging(con)
    assert len(_threads()) == before  # stopped (and joined) when staging closed


def test_no_write_behind_where_there_is_no_fdatasync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x")
    monkeypatch.delattr(write_behind.os, "fdatasync")
    behind = WriteBehind(path).start()
    assert behind.tick() is False
    behind.stop()


def test_a_removed_file_is_let_go(tmp_path: Path) -> None:
    """A staging file removed while its write-behind still runs (a connection closed without close_staging,
    its run folder swept): the descriptor is closed, so the removed file's space is given back."""
    path = tmp_path / "staging.duckdb"
    path.write_bytes(b"x")
    behind = WriteBehind(path, period=3600).start()
    fd = behind._fd
    assert fd is not None
    path.unlink()
    assert behind.tick() is False
    assert behind._fd is None
    with pytest.raises(OSError):
        os.fstat(fd)
    behind.stop()
