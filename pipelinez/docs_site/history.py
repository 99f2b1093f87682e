"""The run history as the docs page shows it: per run, a Gantt row per node (waits, attempts, retries,
reused and carried-forward marks), rows/s, the critical path and each node's duration in the previous run;
per check, its outcomes across runs. Read from each run's run_results.json (through `RunResults`, the class
that writes it) and events.jsonl, both redacted when written; nothing else is consulted.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NotRequired, TypedDict

from pipelinez.core.json_types import JsonObject
from pipelinez.core.vocabulary import NodeKind
from pipelinez.engine.state.run_results import NodeResult, RunResults, read_results
from pipelinez.engine.state.runs import run_ids, runs_dir

SLOWER_RATIO = 1.2  # a node "got slower" when it took this much longer than in the previous run
SLOWER_MIN_MS = 50  # ... and at least this many milliseconds more (noise below that)


class Span(TypedDict):
    """One bar of a node's Gantt row (milliseconds from the run's start)."""

    kind: str  # attempt | backoff | carried
    start: float
    end: float
    attempt: NotRequired[int]  # attempt
    ok: NotRequired[bool]  # attempt, carried


class BreakerSpan(TypedDict):
    """An interval during which an instance's circuit breaker was open or half-open."""

    instance: str
    start: float
    end: float


class TimelineRow(TypedDict):
    """One node of one run in the history."""

    name: str
    kind: str
    status: str
    rows: int
    rows_per_s: int | None
    duration_ms: int
    attempts: int
    provenance: str | None
    reused_from: str | None
    error: str | None
    skipped_because: str | None
    message: str | None
    queued_from: float | None
    start: float | None
    end: float | None
    spans: list[Span]
    previous_ms: NotRequired[int | None]  # its duration in the run before (`_compare`)
    slower: NotRequired[bool]


class Timeline(TypedDict):
    """One run in the history."""

    run_id: str
    command: str
    status: str
    started_at: str
    finished_at: str | None
    retry_of: str | None
    duration_ms: int | None
    error: str | None
    nodes: list[TimelineRow]
    breakers: list[BreakerSpan]
    critical_path: list[str]
    previous_run: NotRequired[str]


class CheckOutcome(TypedDict):
    run_id: str
    started_at: str
    status: str
    message: str | None


def _ms(ts: str | None) -> float | None:
    if not ts:
        return None
    try:
        return dt.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000
    except ValueError:
        return None


def _events(folder: Path) -> list[JsonObject]:
    try:
        text = (folder / "events.jsonl").read_text(encoding="utf-8")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue  # a line cut by a crash: the rest still tells the story
        if isinstance(data, dict):
            out.append(data)
    return out


def _spans(node: str, events: Sequence[JsonObject], t0: float) -> list[Span]:
    """The node's bars: each attempt (from its start to its end or retry), each back-off after a retry."""
    spans: list[Span] = []
    started: dict[int, float] = {}
    for e in events:
        if e.get("name") != node:
            continue
        at = _ms(e.get("ts"))
        if at is None:
            continue
        at -= t0
        kind = e.get("event")
        if kind == "node_started":
            started[int(e.get("attempt") or 1)] = at
        elif kind == "node_retry":
            attempt = int(e.get("attempt") or 2) - 1
            begin = started.get(attempt, at)
            spans.append({"kind": "attempt", "attempt": attempt, "start": begin, "end": at, "ok": False})
            spans.append({"kind": "backoff", "start": at, "end": at + int(e.get("delay_ms") or 0)})
        elif kind == "node_completed":
            attempt = max(started) if started else 1
            begin = started.get(attempt, at - int(e.get("duration_ms") or 0))
            if e.get("status") == "carried_forward":  # recorded at the start, never run
                spans.append({"kind": "carried", "start": at, "end": at, "ok": True})
                continue
            ok = e.get("status") in ("success", "warn")
            spans.append({"kind": "attempt", "attempt": attempt, "start": begin, "end": at, "ok": ok})
    return spans


def _breakers(events: Sequence[JsonObject], t0: float) -> list[BreakerSpan]:
    """Intervals during which an instance's circuit breaker was open or half-open."""
    out: list[BreakerSpan] = []
    opened: dict[str, float] = {}
    for e in events:
        if e.get("event") != "breaker_state_changed":
            continue
        at = (_ms(e.get("ts")) or t0) - t0
        instance = str(e.get("instance"))
        if e.get("to") == "closed":
            if instance in opened:
                out.append({"instance": instance, "start": opened.pop(instance), "end": at})
        elif instance not in opened:
            opened[instance] = at
    end = max((_ms(e.get("ts")) or t0) - t0 for e in events) if events else 0
    out += [{"instance": i, "start": s, "end": end} for i, s in opened.items()]
    return out


def _critical_path(rows: Mapping[str, TimelineRow], deps: Mapping[str, Sequence[str]]) -> list[str]:
    """From the node that ended last, back through the dependency that ended last before it started."""
    ended = {n: r["end"] for n, r in rows.items() if r["end"] is not None}
    if not ended:
        return []
    node: str | None = max(ended, key=lambda n: ended[n])
    path = []
    while node is not None and node not in path:
        path.append(node)
        before = [d for d in deps.get(node, ()) if d in ended]
        node = max(before, key=lambda d: ended[d]) if before else None
    return path[::-1]


def _row(result: NodeResult, spans: list[Span], deps_end: float | None) -> TimelineRow:
    start = min((s["start"] for s in spans), default=None)
    end = max((s["end"] for s in spans), default=None)
    seconds = result.duration_ms / 1000
    return {
        "name": result.name,
        "kind": str(result.kind),
        "status": str(result.status),
        "rows": result.rows,
        "rows_per_s": round(result.rows / seconds) if seconds > 0 and result.rows else None,
        "duration_ms": result.duration_ms,
        "attempts": result.attempts,
        "provenance": None if result.provenance is None else str(result.provenance),
        "reused_from": result.reused_from,
        "error": None
        if result.error is None
        else f"{result.error.code or ''} {result.error.message}".strip(),
        "skipped_because": result.skipped_because,
        "message": result.message,
        "queued_from": deps_end if deps_end is not None and start is not None and deps_end < start else None,
        "start": start,
        "end": end,
        "spans": spans,
    }


def run_timeline(folder: Path, results: RunResults, deps: Mapping[str, Sequence[str]]) -> Timeline:
    events = _events(folder)
    t0 = _ms(results.started_at) or 0.0
    rows: dict[str, TimelineRow] = {}
    ends: dict[str, float] = {}
    for result in results.nodes:  # run_results lists nodes in run order: deps come first
        spans = _spans(result.name, events, t0)
        deps_end = max((ends[d] for d in deps.get(result.name, ()) if d in ends), default=0.0)
        rows[result.name] = _row(result, spans, deps_end)
        end = rows[result.name]["end"]
        if end is not None:
            ends[result.name] = end
    finished = _ms(results.finished_at)
    return {
        "run_id": results.run_id,
        "command": results.command,
        "status": str(results.status),
        "started_at": results.started_at,
        "finished_at": results.finished_at,
        "retry_of": results.retry_of,
        "duration_ms": None if finished is None else round(finished - t0),
        "error": None if results.error is None else results.error.message,
        "nodes": list(rows.values()),
        "breakers": _breakers(events, t0),
        "critical_path": _critical_path(rows, deps),
    }


def _compare(newer: Timeline, older: Timeline) -> None:
    before = {n["name"]: n["duration_ms"] for n in older["nodes"] if n["status"] == "success"}
    for node in newer["nodes"]:
        prev = before.get(node["name"])
        node["previous_ms"] = prev
        node["slower"] = bool(
            prev is not None
            and node["status"] == "success"
            and node["duration_ms"] >= prev * SLOWER_RATIO
            and node["duration_ms"] - prev >= SLOWER_MIN_MS
        )
    newer["previous_run"] = older["run_id"]


def run_history(state_dir: Path, deps: Mapping[str, Sequence[str]], last: int) -> list[Timeline]:
    """The newest `last` runs whose record reads, newest first, each compared with the run before it."""
    timelines = []
    for run_id in run_ids(state_dir)[::-1]:
        folder = runs_dir(state_dir) / run_id
        results = read_results(folder / "run_results.json")
        if results is None:
            continue  # `pz runs` names the unreadable ones (PZ0523)
        timelines.append(run_timeline(folder, results, deps))
        if len(timelines) > last:  # one more than shown: the oldest shown is compared with it
            break
    for newer, older in itertools.pairwise(timelines):
        _compare(newer, older)
    return timelines[:last]


def check_history(runs: Sequence[Timeline]) -> dict[str, list[CheckOutcome]]:
    """Per check node, its outcome in each run (oldest first) that ran or skipped it."""
    out: dict[str, list[CheckOutcome]] = {}
    for run in reversed(runs):
        for node in run["nodes"]:
            if node["kind"] != NodeKind.CHECK:
                continue
            out.setdefault(node["name"], []).append(
                {
                    "run_id": run["run_id"],
                    "started_at": run["started_at"],
                    "status": node["status"],
                    "message": node["message"] or node["error"] or node["skipped_because"],
                }
            )
    return out
