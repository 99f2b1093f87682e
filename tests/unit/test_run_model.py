"""The run model's typed vocabulary and artifacts: run_results.json read back through its classes (every
schema version written, with the upgrade path), and every result and error surviving a pickle round-trip."""

from __future__ import annotations

import copy
import json
import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import pytest

from pipelinez.core.redact import Redactor
from pipelinez.core.vocabulary import (
    OK_STATUSES,
    NodeError,
    NodeKind,
    NodeStatus,
    Provenance,
    RunStatus,
    Tier,
)
from pipelinez.engine.run.failures import NodeFailure, StreamedQuery
from pipelinez.engine.state import run_results
from pipelinez.engine.state.run_results import (
    NodeResult,
    PartitionResult,
    ResultsWriter,
    RunArgs,
    RunResults,
    UnreadableResults,
    read_results,
)
from pipelinez.engine.state.runs import history

V1 = Path(__file__).parents[1] / "fixtures" / "run_results" / "v1_failed_run.json"


def _v1() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(V1.read_text())
    return data


def test_v1_fixture_reads_into_typed_results() -> None:
    results = RunResults.from_dict(_v1())
    assert results.status is RunStatus.FAILED
    assert results.args == RunArgs(select=(), exclude=(), vars={}, threads=None, fail_fast=None)
    bad = results.node("bad")
    assert bad.kind is NodeKind.PIPELINE and bad.status is NodeStatus.FAILED
    assert bad.error is not None and (bad.error.code, bad.error.transient) == ("PZ0507", False)
    assert bad.error.message.startswith("pipeline 'bad' (pipelines/bad.sql): Conversion Error")
    assert results.node("src_files__orders").tier is Tier.NATIVE
    assert results.node("wh.bad_totals").skipped_because == "upstream bad failed"
    assert results.counts == {"success": 3, "failed": 1, "skipped": 1}


def test_v1_round_trips_to_the_same_file() -> None:
    data = _v1()
    again = RunResults.from_dict(data).to_dict()
    assert again == data


def test_provenance_and_partitions_read_back() -> None:
    data = _v1()
    node = data["nodes"][0]
    node.update(
        provenance="reused",
        reused_from="20261130T000000000Z-abcd",
        partitions=[
            {"index": 0, "rows": 2, "status": "success"},
            {"index": 1, "rows": 1, "status": "success"},
        ],
    )
    results = RunResults.from_dict(data)
    first = results.nodes[0]
    assert first.provenance is Provenance.REUSED
    assert first.partitions == [PartitionResult(0, 2), PartitionResult(1, 1)]
    assert results.to_dict()["nodes"][0] == node


def test_an_older_version_goes_through_the_upgrade_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    """A future v2 reader still reads v1: each step of _UPGRADES runs in order."""
    seen: list[int] = []

    def v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
        seen.append(data["schema_version"])
        data = copy.deepcopy(data)
        data["selection"] = [*data["selection"], "upgraded"]
        return data

    monkeypatch.setattr(run_results, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(run_results._UPGRADES, 1, v1_to_v2)
    results = RunResults.from_dict(_v1())
    assert seen == [1]
    assert results.selection == ["--all", "upgraded"]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"schema_version": 99}, "newer pz"),
        ({"schema_version": None}, "schema_version"),
        ({"schema_version": True}, "schema_version"),
        ({"status": "exploded"}, "ValueError"),
        ({"nodes": [{"name": "x"}]}, "KeyError"),
    ],
)
def test_unreadable_files_are_refused_not_guessed(change: dict[str, Any], why: str) -> None:
    data = {**_v1(), **change}
    with pytest.raises(UnreadableResults, match=why):
        RunResults.from_dict(data)
    with pytest.raises(UnreadableResults):
        RunResults.from_dict(["not", "an", "object"])


def test_read_results_is_none_for_a_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "run_results.json"
    path.write_text("{ half a file")
    assert read_results(path) is None
    shutil.copy(V1, path)
    results = read_results(path)
    assert results is not None and results.run_id == "20261130T022122499Z-ec7b"


def test_history_reads_through_the_typed_results(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "20261130T022122499Z-ec7b"
    run_dir.mkdir(parents=True)
    data = _v1()
    data["nodes"][3]["provenance"] = "carried_forward"
    data["nodes"][3]["reused_from"] = "20261129T000000000Z-0000"
    (run_dir / "run_results.json").write_text(json.dumps(data))
    [summary] = history(tmp_path)
    assert summary.status is RunStatus.FAILED
    assert summary.counts == {"success": 3, "failed": 1, "skipped": 1}
    assert (summary.reused, summary.carried_forward) == (0, 1)
    assert summary.duration_ms == 220


def test_a_running_run_whose_process_is_gone_reads_as_interrupted(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "20261130T022122499Z-ec7b"
    run_dir.mkdir(parents=True)
    data = {**_v1(), "status": "running", "pid": 2**22 + 12345, "finished_at": None}
    (run_dir / "run_results.json").write_text(json.dumps(data))
    [summary] = history(tmp_path)
    assert summary.status is RunStatus.INTERRUPTED
    assert summary.duration_ms is None


def test_enums_serialize_as_the_strings_the_artifacts_carry() -> None:
    assert json.dumps({NodeStatus.SUCCESS: Tier.NATIVE}) == '{"success": "native"}'
    assert NodeStatus.WARN.ok and NodeStatus.CARRIED_FORWARD.ok and not NodeStatus.FAILED.ok
    assert {"success", "warn", "carried_forward"} == OK_STATUSES
    assert not NodeStatus.RUNNING.finished and NodeStatus.CANCELLED.finished
    assert f"{RunStatus.ERROR:<6}|" == "error |"


def test_run_args_round_trip() -> None:
    args = RunArgs(("a+", "tag:x"), ("b",), {"day": "2026-01-01"}, 4, True, True)
    assert RunArgs.from_dict(json.loads(json.dumps(args.to_dict()))) == args


@pytest.mark.parametrize(
    "value",
    [
        NodeFailure("PZ0505", "source 'pg' dataset 'orders': reset", True, 2.5, 3, 7),
        NodeFailure("PZ0501", "boom", streamed=StreamedQuery(error=NodeError("PZ0507", "cast", False))),
        NodeError("PZ0501", "sink 'wh' output 'o': boom", True),
        PartitionResult(2, 10),
        RunArgs(("x",), (), {"v": "1"}, 2, None, False),
        RunResults.from_dict(_v1()),
        NodeResult("0123456789abcdef", "n", NodeKind.CHECK, NodeStatus.WARN, message="2 rows"),
    ],
)
def test_results_and_errors_survive_pickle(value: object) -> None:
    again = pickle.loads(pickle.dumps(value))
    assert again == value
    assert type(again) is type(value)


def test_a_pickled_node_failure_keeps_every_field_and_still_raises() -> None:
    failure = NodeFailure("PZ0505", "reset", transient=True, retry_after=1.5, batches_committed=2, rows=4)
    again = pickle.loads(pickle.dumps(failure))
    assert (again.code, again.message, again.transient, again.retry_after) == ("PZ0505", "reset", True, 1.5)
    assert (again.batches_committed, again.rows) == (2, 4)
    assert str(again) == "reset"
    assert again.error == NodeError("PZ0505", "reset", True)
    with pytest.raises(NodeFailure):
        raise again


def test_run_results_is_written_durably_before_its_name_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each write fsyncs the whole temp file before renaming it over the record (a power loss leaves a whole
    record under the name, never half of one); the folders are fsynced after the first write (the run and its
    record exist) and the final one (the run's status survives)."""
    run_dir = tmp_path / "runs" / "20261130T022122499Z-ec7b"
    run_dir.mkdir(parents=True)
    path = run_dir / "run_results.json"
    steps: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        steps.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        assert json.loads(Path(src).read_text())["run_id"] == results.run_id  # whole before it moves
        steps.append(("rename", str(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    results = RunResults("20261130T022122499Z-ec7b", "run", "2026-11-30T02:21:22Z", [], RunArgs())
    writer = ResultsWriter(path, results, Redactor())
    tmp = str(path.with_suffix(".json.tmp"))
    writer.write()
    assert steps == [
        ("fsync", tmp),
        ("rename", str(path)),
        ("fsync", str(run_dir.parent)),
        ("fsync", str(run_dir)),
    ]
    steps.clear()
    writer.write()  # a node finished: the record durable, its name left to the file system's journal
    assert steps == [("fsync", tmp), ("rename", str(path))]
    steps.clear()
    results.status = RunStatus.FAILED
    writer.write(final=True)
    assert steps == [("fsync", tmp), ("rename", str(path)), ("fsync", str(run_dir))]
    final = read_results(path)
    assert final is not None and final.status is RunStatus.FAILED


def _streamed_pipeline() -> NodeResult:
    return NodeResult("p1", "p", NodeKind.PIPELINE, NodeStatus.RUNNING, message="streamed into wh.p")


@pytest.mark.parametrize(
    ("write_status", "failure", "expected"),
    [
        (NodeStatus.SUCCESS, None, (NodeStatus.SUCCESS, 9, None)),
        (
            NodeStatus.FAILED,
            NodeFailure("PZ0501", "refused", streamed=StreamedQuery(rows=4)),
            (NodeStatus.SUCCESS, 4, None),
        ),
        (
            NodeStatus.FAILED,
            NodeFailure("PZ0507", "cast", streamed=StreamedQuery(error=NodeError("PZ0507", "cast"))),
            (NodeStatus.FAILED, 0, NodeError("PZ0507", "cast")),
        ),
        (NodeStatus.FAILED, NodeFailure("PZ0506", "breaker open"), (NodeStatus.CANCELLED, 0, None)),
        (NodeStatus.CANCELLED, None, (NodeStatus.CANCELLED, 0, None)),
    ],
)
def test_a_streamed_pipeline_settles_as_its_query_ended(
    write_status: NodeStatus, failure: NodeFailure | None, expected: tuple[object, ...]
) -> None:
    """Its write succeeded (so did the query), failed (the query's own outcome decides), or never computed it
    (refused, cancelled): then neither did the pipeline, which is never `success` for a query not run."""
    from pipelinez.engine.nodes.streamed import settle_pipeline

    pipeline = _streamed_pipeline()
    write = NodeResult("w1", "wh.p", NodeKind.SINK_WRITE, write_status, rows=9 if failure is None else 0)
    settle_pipeline(pipeline, write, failure)
    assert (pipeline.status, pipeline.rows, pipeline.error) == expected
    if expected[0] == NodeStatus.CANCELLED:
        assert pipeline.skipped_because == (
            f"streamed into wh.p, which ended {write_status} without computing its query"
        )
