"""`.pz/state.duckdb`: reading never creates it; a commit is all or nothing; a newer mark replaces the old."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelinez.core.run_state import RunState, Watermark


def test_reading_without_state_creates_nothing(tmp_path: Path) -> None:
    state = RunState(tmp_path / ".pz")
    assert state.watermarks() == {}
    assert state.watermark("pg", "orders") is None
    assert not (tmp_path / ".pz").exists()


def test_commit_then_read_back_and_replace(tmp_path: Path) -> None:
    state = RunState(tmp_path / ".pz")
    first = Watermark("pg", "orders", "updated_at", "TIMESTAMP '2026-11-30 01:00:00'", "run-1")
    other = Watermark("pg", "customers", "id", "42", "run-1")
    state.commit_watermarks([first, other])
    assert state.watermark("pg", "orders") == first
    later = Watermark("pg", "orders", "updated_at", "TIMESTAMP '2026-11-30 02:00:00'", "run-2")
    state.commit_watermarks([later])
    assert RunState(tmp_path / ".pz").watermarks() == {("pg", "customers"): other, ("pg", "orders"): later}


def test_a_failed_commit_changes_nothing(tmp_path: Path) -> None:
    state = RunState(tmp_path / ".pz")
    kept = Watermark("pg", "orders", "id", "1", "run-1")
    state.commit_watermarks([kept])
    bad = Watermark("pg", "orders", "id", None, "run-2")  # type: ignore[arg-type]
    with pytest.raises(Exception, match="NOT NULL"):
        state.commit_watermarks([Watermark("pg", "customers", "id", "7", "run-2"), bad])
    assert state.watermarks() == {("pg", "orders"): kept}


def test_threads_of_one_process_reading_and_committing_at_once_take_turns(tmp_path: Path) -> None:
    """The state file is ATTACHed to the process's one helper instance, which refuses a second ATTACH of a
    file already attached: two threads reading or committing at once took turns with no error only since
    each attach holds the file's lock (before, nearly every overlapping call failed as PZ0527)."""
    import threading

    state = RunState(tmp_path / ".pz")
    state.commit_watermarks([Watermark("pg", "orders", "id", "0", "run-0")])
    failures: list[BaseException] = []

    def work(kind: str) -> None:
        for i in range(40):
            try:
                if kind == "read":
                    assert state.watermark("pg", "orders") is not None
                else:
                    state.commit_watermarks([Watermark("pg", kind, "id", str(i), f"run-{i}")])
            except BaseException as exc:
                failures.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in ("read", "a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert {k: w.value for k, w in state.watermarks().items()} == {
        ("pg", "orders"): "0",
        ("pg", "a"): "39",
        ("pg", "b"): "39",
    }
