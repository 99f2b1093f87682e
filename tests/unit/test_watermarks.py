"""Units of incremental reads: the read bounds of a run, the staging trim and capture, the commit decision."""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest

from pipelinez.compile.bounds import read_bounds, shift
from pipelinez.compile.incremental import IncrementalRoute, IncrementalSpec
from pipelinez.connectors.sdk import ReadBounds, bounds_predicate
from pipelinez.core.vocabulary import NodeStatus, Provenance
from pipelinez.engine.nodes.watermarks import Capture, LoadOutcome, decide, trim_and_capture


def spec(**kw: object) -> IncrementalSpec:
    base: dict[str, object] = {
        "source": "s",
        "dataset": "d",
        "route": IncrementalRoute.YAML,
        "cursor": "c",
        "cursor_type": "TIMESTAMP",
    }
    return IncrementalSpec(**{**base, **kw})  # type: ignore[arg-type]


# -- bounds ----------------------------------------------------------------------------------------------
def test_bounds_before_the_first_commit() -> None:
    assert read_bounds(spec(), None) == ReadBounds(cursor="c", cursor_type="TIMESTAMP")
    assert read_bounds(spec(start="2024-01-01"), None).lower == "2024-01-01"


def test_bounds_after_a_commit_ignore_start_and_keep_full_precision() -> None:
    b = read_bounds(spec(start="2024-01-01"), "2024-03-01 10:00:00.000001")
    assert (b.lower, b.upper, b.committed) == (
        "2024-03-01 10:00:00.000001",
        None,
        "2024-03-01 10:00:00.000001",
    )
    assert not b.lower_inclusive


def test_lag_moves_the_lower_bound_not_the_window_base() -> None:
    b = read_bounds(spec(lag_seconds=600, window_seconds=86400), "2024-03-01 10:00:00.5")
    assert b.lower == "2024-03-01 09:50:00.500000"
    assert b.upper == "2024-03-02 10:00:00.500000"
    assert b.committed == "2024-03-01 10:00:00.5"


def test_lag_does_not_apply_to_start() -> None:
    assert read_bounds(spec(start="2024-01-01", lag_seconds=600), None).lower == "2024-01-01"


def test_windows_on_dates_and_zoned_timestamps() -> None:
    assert shift("2024-02-28", 2 * 86400, "DATE") == "2024-03-01"
    assert shift("2024-01-01 23:00:00+00", 3600, "TIMESTAMP WITH TIME ZONE") == "2024-01-02 00:00:00+00:00"
    b = read_bounds(spec(cursor_type="DATE", start="2024-01-01", window_seconds=7 * 86400), None)
    assert (b.lower, b.upper) == ("2024-01-01", "2024-01-08")


def test_sql_route_keeps_its_comparison() -> None:
    b = read_bounds(spec(route=IncrementalRoute.SQL, inclusive=True), "5")
    assert b.lower_inclusive and b.describe() == "c >= 5"


def test_bounds_predicate_reads_null_cursors_and_composes() -> None:
    b = ReadBounds(cursor="c", lower="1", upper="9")
    assert bounds_predicate('"c"', b, lambda t: t) == '(("c" > 1 AND "c" <= 9) OR "c" IS NULL)'
    assert bounds_predicate('"c"', ReadBounds(cursor="c"), lambda t: t) == ""
    assert bounds_predicate('"c"', ReadBounds(), lambda t: t) == ""


# -- trim and capture --------------------------------------------------------------------------------------
@pytest.fixture
def staged() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t AS SELECT i AS id, TIMESTAMP '2024-01-01 00:00:00.000001' + to_hours(i) AS c "
        "FROM range(0, 10) r(i) UNION ALL SELECT 99, NULL"
    )
    return con


def test_capture_is_the_max_over_staged_rows_at_full_precision(staged: duckdb.DuckDBPyConnection) -> None:
    cap = trim_and_capture(staged, "t", ReadBounds(cursor="c"))
    assert cap.high == "2024-01-01 09:00:00.000001" and cap.null_rows == 1 and cap.trimmed == 0


def test_backstop_trims_to_the_window_and_keeps_null_cursors(staged: duckdb.DuckDBPyConnection) -> None:
    bounds = ReadBounds(cursor="c", lower="2024-01-01 02:00:00.000001", upper="2024-01-01 05:00:00")
    cap = trim_and_capture(staged, "t", bounds)
    ids = [r[0] for r in staged.execute("SELECT id FROM t ORDER BY id").fetchall()]
    assert ids == [3, 4, 99]  # (02:00:00.000001, 05:00:00]: 05:00:00.000001 is past the upper bound
    assert cap.trimmed == 8 and cap.high == "2024-01-01 04:00:00.000001"


def test_capture_never_goes_below_the_committed_watermark(staged: duckdb.DuckDBPyConnection) -> None:
    bounds = ReadBounds(cursor="c", lower="2024-01-01 00:00:00", committed="2024-01-01 12:00:00")
    assert trim_and_capture(staged, "t", bounds).high is None  # a lag overlap re-read: unchanged


def test_empty_window_in_the_past_advances_to_its_upper_bound() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (c DATE)")
    now = dt.datetime(2024, 6, 1, tzinfo=dt.UTC)
    past = ReadBounds(cursor="c", lower="2024-01-01", upper="2024-01-08", committed="2024-01-01")
    assert trim_and_capture(con, "t", past, now=now).high == "2024-01-08"
    future = ReadBounds(cursor="c", lower="2024-05-30", upper="2024-06-06", committed="2024-05-30")
    assert trim_and_capture(con, "t", future, now=now).high is None


# -- commit decision ----------------------------------------------------------------------------------------
CAP = Capture("c", "1", None, "1", "9")


def test_commit_needs_every_downstream_sink_committed() -> None:
    load = LoadOutcome("src_s__d", NodeStatus.SUCCESS, CAP)
    both = {"a.x": NodeStatus.SUCCESS, "b.y": NodeStatus.SUCCESS}
    assert decide(load, ["a.x", "b.y"], both).commit
    one_failed = {"a.x": NodeStatus.SUCCESS, "b.y": NodeStatus.FAILED}
    assert decide(load, ["a.x", "b.y"], one_failed).reason == "sink write b.y did not commit (failed)"
    assert not decide(load, ["a.x", "b.y"], {"a.x": NodeStatus.SUCCESS}).commit  # b.y not in this run
    assert not decide(load, ["a.x"], {"a.x": NodeStatus.SKIPPED}).commit


def test_no_commit_without_a_new_value_a_successful_load_or_any_sink() -> None:
    ok = {"a.x": NodeStatus.SUCCESS}
    unchanged = Capture("c", "1", None, "1", None)
    assert not decide(LoadOutcome("l", NodeStatus.SUCCESS, unchanged), ["a.x"], ok).commit
    assert not decide(LoadOutcome("l", NodeStatus.FAILED, CAP), ["a.x"], ok).commit
    assert not decide(LoadOutcome("l", NodeStatus.SUCCESS, CAP), [], ok).commit


def test_carried_forward_sink_counts_only_with_a_reused_load() -> None:
    carried = {"a.x": NodeStatus.CARRIED_FORWARD, "b.y": NodeStatus.SUCCESS}
    reused = LoadOutcome("l", NodeStatus.SUCCESS, CAP, Provenance.REUSED)
    assert decide(reused, ["a.x", "b.y"], carried).commit
    extracted = LoadOutcome("l", NodeStatus.SUCCESS, CAP)
    verdict = decide(extracted, ["a.x", "b.y"], carried)
    assert not verdict.commit and "re-extracted" in verdict.reason
