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
