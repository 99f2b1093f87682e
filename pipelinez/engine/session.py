"""The engine facade: one run of a plan, from lock to retention sweep."""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pipelinez.core.codes import lookup
from pipelinez.core.diagnostics import Diagnostic
from pipelinez.core.oserrors import os_reason
from pipelinez.core.redact import Redactor
from pipelinez.core.vocabulary import NodeError, NodeStatus, RunStatus
from pipelinez.engine.context import RunContext, open_staging
from pipelinez.engine.events import (
    EventBus,
    JsonlWriter,
    RunCompleted,
    RunStarted,
    Subscriber,
    WarningEvent,
    utc_now,
)
from pipelinez.engine.executor import OK_STATUSES, Executor
from pipelinez.engine.lock import ProjectLock
from pipelinez.engine.run_results import NodeResult, ResultsWriter, RunArgs, RunResults
from pipelinez.engine.runs import STAGING_FILE, new_run_id, runs_dir, sweep
from pipelinez.engine.statedir import state_error
from pipelinez.plan.planner import Plan


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    status: RunStatus  # success | failed | error
    results: RunResults
    log_file: Path | None = None

    @property
    def exit_code(self) -> int:
        return 0 if self.status == RunStatus.SUCCESS else 1


def execute(
    plan: Plan,
    *,
    command: str,
    args: RunArgs,
    warnings: Sequence[Diagnostic] = (),
    subscribers: Sequence[Subscriber] = (),
    threads: int | None = None,
    fail_fast: bool | None = None,
    retry_of: str | None = None,
) -> RunOutcome:
    project = plan.dag.project
    state_dir = project.state_dir
    with ProjectLock(state_dir):
        run_id = new_run_id()
        run_dir = runs_dir(state_dir) / run_id
        results = RunResults(run_id, command, utc_now(), plan.selection, args, retry_of=retry_of)
        results.nodes = [NodeResult(p.node.id, p.node.name, p.node.kind, tier=p.tier) for p in plan.nodes]
        writer = ResultsWriter(run_dir / "run_results.json", results, plan.dag.redactor)
        try:  # refused before any node runs when the run's folder cannot be written
            run_dir.mkdir(parents=True)
            events = JsonlWriter(run_dir / "events.jsonl")
            writer.write()
        except OSError as exc:
            raise state_error(exc, state_dir) from None
        bus = EventBus(plan.dag.redactor)
        bus.subscribe(events)
        for subscriber in subscribers:
            bus.subscribe(subscriber)
        started = time.monotonic()
        bus.publish(
            RunStarted(
                run_id, command=command, selection=plan.selection, nodes=len(plan.nodes), retry_of=retry_of
            )
        )
        for w in warnings:
            bus.publish(
                WarningEvent(
                    run_id, code=w.code, message=w.message, place=w.place.render(), next_step=w.next_step
                )
            )
        log_file = None
        staging = None
        try:
            staging = open_staging(run_dir / STAGING_FILE, project.engine.memory_limit)
            ctx = RunContext(run_id, run_dir, plan, bus, staging)
            n_threads = threads or project.engine.threads or os.cpu_count() or 1
            ff = project.engine.fail_fast if fail_fast is None else fail_fast
            Executor(ctx, writer, n_threads, ff).run()
            ok = all(n.status in OK_STATUSES for n in results.nodes)
            results.status = RunStatus.SUCCESS if ok else RunStatus.FAILED
        except KeyboardInterrupt:
            results.status = RunStatus.FAILED
            results.error = NodeError("PZ0514", "the run was interrupted (SIGINT)")
            raise
        except Exception as exc:  # orchestrator-level failure: a bug, the staging db or the disk failing
            log_file = _write_log(run_dir / "pz.log", plan.dag.redactor(traceback.format_exc()))
            results.status = RunStatus.ERROR
            for node in results.nodes:
                if not node.status.finished:
                    node.status = NodeStatus.CANCELLED
                    node.skipped_because = "the run stopped at the orchestrator level"
            results.error = _orchestrator_error(exc, plan.dag.redactor)
        finally:
            if staging is not None:
                staging.close()
            results.finished_at = utc_now()
            _final_write(writer, bus, run_id)
            bus.publish(
                RunCompleted(
                    run_id,
                    status=results.status,
                    duration_ms=int((time.monotonic() - started) * 1000),
                    counts=results.counts,
                )
            )
            events.close()
            with contextlib.suppress(OSError):  # retention retries on the next run
                sweep(state_dir, project.keep_last, current=run_id)
        return RunOutcome(run_id, results.status, results, log_file)


def _write_log(path: Path, text: str) -> Path | None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError:
        return None
    return path


def _orchestrator_error(exc: Exception, redactor: Redactor) -> NodeError:
    """A disk refusing a write is PZ0521 (the user's to fix); anything else is a bug, PZ0512."""
    if isinstance(exc, OSError):
        message = f"writing the run's state failed: {os_reason(exc)}"
        if exc.filename:
            message += f" ({exc.filename})"
        return NodeError("PZ0521", redactor(message))
    return NodeError("PZ0512", redactor(f"{type(exc).__name__}: {exc}"))


def _final_write(writer: ResultsWriter, bus: EventBus, run_id: str) -> None:
    try:
        writer.write()
    except OSError as exc:
        bus.publish(
            WarningEvent(
                run_id,
                code="PZ0521",
                message=f"run_results.json could not be written: {os_reason(exc)}",
                place=str(writer.path),
                next_step=lookup("PZ0521").next_step,
            )
        )
