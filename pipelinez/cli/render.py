"""Text rendering of diagnostics, node lines, plans and run history. Formatting only."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from pipelinez.core.diagnostics import Diagnostic
from pipelinez.core.json_types import JsonObject

if TYPE_CHECKING:
    from pipelinez.api import ColumnLineageReport, RetryOutcome, RunPlan, RunSummary


def diagnostic_lines(d: Diagnostic) -> list[str]:
    head = "error" if d.is_error else "warning"
    lines = [f"{head}: {d.code} {d.place.render()}: {d.message}"]
    if d.next_step:
        lines.append(f"  next: {d.next_step}")
    return lines


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def diagnostics_report(diags: Sequence[Diagnostic]) -> list[str]:
    errors = [d for d in diags if d.is_error]
    warnings = [d for d in diags if not d.is_error]
    lines = [line for d in [*errors, *warnings] for line in diagnostic_lines(d)]
    summary = ", ".join(
        p
        for p in (
            _plural(len(errors), "error") if errors else "",
            _plural(len(warnings), "warning") if warnings else "",
        )
        if p
    )
    if summary:
        lines.append(summary)
    return lines


def node_lines(data: JsonObject) -> list[str]:
    """The text lines of one node_completed event (reference section 8)."""
    name, status = data["name"], data["status"]
    rows, ms = data.get("rows", 0), data.get("duration_ms", 0)
    if status == "skipped":
        return [f"SKIP {name} ({data.get('reason') or 'upstream failed'})"]
    if status == "cancelled":
        return [f"CANCEL {name} ({data.get('reason') or 'cancelled by fail-fast'})"]
    if status == "carried_forward":
        return []  # a retry announced it in its note; it did not run
    label = {"success": "ok", "carried_forward": "ok", "warn": "WARN", "failed": "FAIL"}.get(status, status)
    reason = str(data.get("reason") or "")
    streamed = data.get("kind") == "pipeline" and reason.startswith(("streamed into ", "a view in staging"))
    if status == "success" and streamed:  # its rows are counted by what reads it
        return [f"{label} {name} {str(data['reason']).split(',')[0]} {ms}ms"]
    lines = [f"{label} {name} {rows} rows {ms}ms"]
    if status == "failed" and data.get("error"):
        err = data["error"]
        lines.append(f"  {err['code']}: {err['message']}")
        next_step = _next_step(str(err["code"]))
        if next_step:
            lines.append(f"  next: {next_step}")
    elif status == "warn" and data.get("reason"):
        lines.append(f"  PZ0510: {data['reason']}")
    return lines


def _next_step(code: str) -> str:
    """A failed node's `next:` line, as validation errors have one: the registry's next step of its code."""
    from pipelinez.core.codes import lookup

    try:
        return lookup(code).next_step
    except KeyError:  # a code from a newer pz in an old record: no next step to show
        return ""


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.1f}s" if ms < 60_000 else f"{ms / 60_000:.1f}m"


def node_retry_lines(data: JsonObject) -> list[str]:
    """The text lines of one node_retry event: the node, when its next attempt goes, and why."""
    lines = [f"RETRY {data['name']} attempt {int(data['attempt']) + 1} in {_seconds(int(data['delay_ms']))}"]
    err = data.get("error")
    if err:
        lines.append(f"  {err['code']}: {err['message']}")
    return lines


def breaker_lines(data: JsonObject) -> list[str]:
    """The text line of one breaker_state_changed event."""
    line = f"BREAKER {data['instance']} {data['from']} -> {data['to']}"
    if data.get("reason"):
        line += f": {data['reason']}"
    if data.get("retry_in_ms") is not None:
        line += f"; next probe in {_seconds(int(data['retry_in_ms']))}"
    return [line]


_closed_streams: set[int] = set()


def _write(out: TextIO, lines: list[str]) -> None:
    """Print lines; once the reader went away (`pz run | head`) stay silent and let the run finish."""
    if id(out) in _closed_streams or not lines:
        return
    try:
        out.write("".join(line + "\n" for line in lines))
        out.flush()
    except BrokenPipeError:
        _closed_streams.add(id(out))


class TextReporter:
    """Prints the exact text lines of a run as events arrive (used when stdout is not a terminal)."""

    def __init__(self, out: TextIO | None = None, quiet: bool = False):
        self._out = out
        self.quiet = quiet

    @property
    def out(self) -> TextIO:
        return self._out or sys.stdout

    def __call__(self, data: JsonObject) -> None:
        lines: list[str] = []
        kind = data["event"]
        if kind == "node_completed":
            if self.quiet and data["status"] in ("success", "carried_forward"):
                return
            lines = node_lines(data)
        elif kind == "node_retry":
            lines = node_retry_lines(data)
        elif kind == "breaker_state_changed":
            lines = breaker_lines(data)
        elif kind == "note" and not self.quiet:
            lines = [f"note: {data['message']}"]
        elif kind == "warning":
            lines = [f"warning: {data['code']} {data['place']}: {data['message']}"]
            if data.get("next_step"):
                lines.append(f"  next: {data['next_step']}")
        _write(self.out, lines)


class JsonReporter:
    """--log-format json: one event per line on stdout."""

    def __init__(self, out: TextIO | None = None):
        self._out = out

    def __call__(self, data: JsonObject) -> None:
        _write(self._out or sys.stdout, [json.dumps(data, default=str)])


def plan_lines(plan: RunPlan) -> list[str]:
    lines = [f"plan: {_plural(len(plan.nodes), 'node')} (selection: {' '.join(plan.selection)})"]
    if plan.engine_retry:
        lines.append(f"engine retry: {plan.engine_retry.render(origins=True)}")
    if plan.breaker:
        instances = sorted({p.breaker for p in plan.nodes if p.breaker})
        lines.append(
            f"engine breaker: {plan.breaker.render(origins=True)}; one per instance"
            + (f": {', '.join(instances)}" if instances else "")
        )
    width = max((len(p.name) for p in plan.nodes), default=10)
    for i, p in enumerate(plan.nodes, 1):
        parts = [f"{i:>3}. {p.name:<{width}}", f"{p.kind:<11}"]
        if p.connector:
            parts.append(f"{p.connector} {p.tier}")
        if p.strategy:
            parts.append(p.strategy)
        parts.append(f"id {p.id}")
        lines.append("  ".join(parts).rstrip())
        if p.note:
            lines.append(f"       note: {p.note}")
        if p.incremental:
            inc = p.incremental
            mark = inc["watermark"] if inc["watermark"] is not None else "none committed yet"
            lines.append(f"       incremental: cursor {inc['cursor']}, watermark {mark}")
            lines.append(f"       next read: {inc['reads']} (and rows whose {inc['cursor']} is NULL)")
        if p.delivery:
            lines.append(f"       delivery: {p.delivery}")
        if p.retry:
            lines.append(f"       retry: {p.retry.render(origins=True)}")
        if p.breaker:
            lines.append(f"       breaker: {p.breaker}")
        if p.deps:
            lines.append(f"       after: {', '.join(p.deps)}")
    return lines


def runs_lines(runs: Sequence[RunSummary]) -> list[str]:
    if not runs:
        return ["no runs yet"]
    header = f"{'run_id':<26} {'started_at':<25} {'duration':>9} {'status':<8} {'nodes':<40} reused carried"
    lines = [header]
    for r in runs:
        counts = " ".join(f"{k}={v}" for k, v in sorted(r.counts.items()))
        duration = f"{r.duration_ms}ms" if r.duration_ms is not None else "-"
        lines.append(
            f"{r.run_id:<26} {r.started_at:<25} {duration:>9} {r.status:<8} {counts:<40} "
            f"{r.reused:>6} {r.carried_forward:>7}"
        )
    return lines


def lineage_lines(report: ColumnLineageReport) -> list[str]:
    """The column, its upstream as an indented tree (source datasets marked), where it is written, and what
    could not be traced."""
    lines = [report.column + (f" ({report.type})" if report.type else "")]
    if report.unresolved:
        lines.append(f"  unresolved: {report.unresolved}")
    for step in report.upstream:
        mark = "  [source]" if step.kind == "source" else ""
        lines.append("  " * step.depth + f"<- {step.column}{mark}")
        if step.unresolved:
            lines.append("  " * (step.depth + 1) + f"unresolved: {step.unresolved}")
    if not report.upstream and not report.unresolved:
        lines.append("  computed from no column (a constant or count(*))")
    lines += [f"  -> {sink}  [sink]" for sink in report.sinks]
    return lines


def retry_lines(outcome: RetryOutcome) -> list[str]:
    """A retry that ran nothing: its notes, then what it would do (--dry-run) or why nothing is to retry."""
    lines = [f"note: {note}" for note in outcome.notes]
    if outcome.dry_run and outcome.selection is not None:
        steps = outcome.selection.steps()
        lines.append(
            f"dry run: retry of run {outcome.retry_of} ({_plural(len(steps), 'node')}; nothing runs)"
        )
        width = max((len(a) for a, _, _ in steps), default=3)
        lines += [f"  {a:<{width}}  {n}" + (f"  ({d})" if d else "") for a, n, d in steps]
    elif outcome.message:
        lines.append(outcome.message)
    return lines
