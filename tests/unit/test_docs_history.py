"""The run history the docs page draws, from run_results.json and events.jsonl as a run writes them: attempts,
retry back-offs, breaker waits, queueing, the critical path, the previous run's durations, check outcomes;
and the graph's layered layout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipelinez.core.vocabulary import NodeKind, NodeStatus, Provenance, RunStatus
from pipelinez.docs_site.history import check_history, run_history
from pipelinez.docs_site.layout import layered_layout
from pipelinez.engine.state.run_results import NodeResult, RunArgs, RunResults

DEPS = {"src_a__x": (), "p": ("src_a__x",), "chk_p__c": ("p",), "s.o": ("p", "chk_p__c")}


def ts(ms: int) -> str:
    return f"2026-11-30T02:00:{ms // 1000:02d}.{ms % 1000:03d}Z"


def write_run(
    state: Path, run_id: str, nodes: list[NodeResult], events: list[dict[str, Any]], end: int
) -> None:
    folder = state / "runs" / run_id
    folder.mkdir(parents=True)
    results = RunResults(
        run_id, "run", ts(0), ["--all"], RunArgs(), status=RunStatus.FAILED, finished_at=ts(end)
    )
    results.nodes = nodes
    (folder / "run_results.json").write_text(json.dumps(results.to_dict()), encoding="utf-8")
    lines = [json.dumps({"ts": ts(e.pop("at")), **e}) for e in events]
    (folder / "events.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def node(name: str, kind: NodeKind, status: NodeStatus, ms: int, rows: int = 0, **more: Any) -> NodeResult:
    return NodeResult(name, name, kind, status, rows=rows, duration_ms=ms, attempts=1, **more)


def started(name: str, at: int, attempt: int = 1) -> dict[str, Any]:
    return {"event": "node_started", "name": name, "attempt": attempt, "at": at}


def completed(name: str, at: int, status: str = "success", ms: int = 0) -> dict[str, Any]:
    return {"event": "node_completed", "name": name, "status": status, "duration_ms": ms, "at": at}


def test_a_run_becomes_attempts_back_offs_waits_and_its_critical_path(tmp_path: Path) -> None:
    write_run(
        tmp_path,
        "20261129T020000000Z-aaaa",
        [
            node("src_a__x", NodeKind.SOURCE_LOAD, NodeStatus.SUCCESS, 1000, 10),
            node("p", NodeKind.PIPELINE, NodeStatus.SUCCESS, 100, 10),
            node("chk_p__c", NodeKind.CHECK, NodeStatus.SUCCESS, 10),
            node("s.o", NodeKind.SINK_WRITE, NodeStatus.SUCCESS, 200, 10),
        ],
        [started("src_a__x", 0), completed("src_a__x", 1000)],
        1400,
    )
    write_run(
        tmp_path,
        "20261130T020000000Z-bbbb",
        [
            node(
                "src_a__x", NodeKind.SOURCE_LOAD, NodeStatus.SUCCESS, 2000, 4000, provenance=Provenance.REUSED
            ),
            node("p", NodeKind.PIPELINE, NodeStatus.SUCCESS, 100, 4000),
            node("chk_p__c", NodeKind.CHECK, NodeStatus.WARN, 10, message="3 rows"),
            node("s.o", NodeKind.SINK_WRITE, NodeStatus.FAILED, 500),
        ],
        [
            started("src_a__x", 100),
            {"event": "node_retry", "name": "src_a__x", "attempt": 2, "delay_ms": 400, "at": 600},
            started("src_a__x", 1000, attempt=2),
            completed("src_a__x", 3000),
            started("p", 3000),
            completed("p", 3100),
            started("chk_p__c", 3100),
            completed("chk_p__c", 3110, "warn"),
            {"event": "breaker_state_changed", "instance": "sink:s", "to": "open", "at": 3200},
            {"event": "breaker_state_changed", "instance": "sink:s", "to": "closed", "at": 3500},
            started("s.o", 3600),
            completed("s.o", 4100, "failed"),
        ],
        4200,
    )
    newest, older = run_history(tmp_path, DEPS, last=5)
    assert newest["previous_run"] == older["run_id"] and "previous_run" not in older
    rows = {n["name"]: n for n in newest["nodes"]}
    load = rows["src_a__x"]
    assert [(s["kind"], s["start"], s["end"]) for s in load["spans"]] == [
        ("attempt", 100, 600),
        ("backoff", 600, 1000),
        ("attempt", 1000, 3000),
    ]
    assert [s.get("ok") for s in load["spans"]] == [False, None, True]
    assert load["provenance"] == "reused" and load["rows_per_s"] == 2000
    assert load["slower"] and load["previous_ms"] == 1000  # 1000ms -> 2000ms
    assert not rows["p"]["slower"]
    assert rows["s.o"]["queued_from"] == 3110 and rows["s.o"]["start"] == 3600  # waited for the breaker
    assert newest["breakers"] == [{"instance": "sink:s", "start": 3200, "end": 3500}]
    assert newest["critical_path"] == ["src_a__x", "p", "chk_p__c", "s.o"]
    assert newest["duration_ms"] == 4200
    history = check_history([newest, older])
    assert [(h["status"], h["message"]) for h in history["chk_p__c"]] == [
        ("success", None),
        ("warn", "3 rows"),
    ]


def test_an_unreadable_run_is_left_out_and_the_limit_holds(tmp_path: Path) -> None:
    for day in ("27", "28", "29"):
        write_run(tmp_path, f"202611{day}T020000000Z-aaaa", [], [], 10)
    (tmp_path / "runs" / "20261130T020000000Z-bad0").mkdir()
    (tmp_path / "runs" / "20261130T020000000Z-bad0" / "run_results.json").write_text("{", encoding="utf-8")
    runs = run_history(tmp_path, DEPS, last=2)
    assert [r["run_id"][:8] for r in runs] == ["20261129", "20261128"]
    assert runs[1]["previous_run"] == "20261127T020000000Z-aaaa"  # compared with the one before, not shown


def test_the_layout_puts_each_node_right_of_all_its_inputs() -> None:
    deps = {"a": [], "b": [], "p": ["a", "b"], "q": ["p"], "c": ["p"], "s": ["q", "c"], "lonely": []}
    at = layered_layout(deps)
    for name, inputs in deps.items():
        assert all(at[d][0] < at[name][0] for d in inputs), name
    assert at["s"][0] == 3
    cells = list(at.values())
    assert len(set(cells)) == len(cells)  # no two nodes in one place


def test_a_carried_forward_write_is_a_mark_not_a_failed_attempt(tmp_path: Path) -> None:
    carried = node("s.o", NodeKind.SINK_WRITE, NodeStatus.CARRIED_FORWARD, 0, 10)
    carried.provenance = Provenance.CARRIED_FORWARD
    write_run(tmp_path, "20261130T020000000Z-cccc", [carried], [completed("s.o", 5, "carried_forward")], 50)
    (run,) = run_history(tmp_path, DEPS, last=1)
    (row,) = run["nodes"]
    assert row["provenance"] == "carried_forward"
    assert row["spans"] == [{"kind": "carried", "start": 5, "end": 5, "ok": True}]
