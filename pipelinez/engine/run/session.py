"""One run of a plan. `RunSession` owns the run's lifecycle around the nodes: project lock, run folder,
event bus (events.jsonl plus subscribers), run_results.json and the retention sweep. `execute` opens a
session, runs the plan's nodes through the executor on the staging database, and returns the outcome."""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from pipelinez.compile.ids import id_parts
from pipelinez.compile.policy import BreakerPolicy
from pipelinez.connectors.sdk_delivery import DeliveryCheckpoint
from pipelinez.core import failpoints, stop_signals
from pipelinez.core.codes import lookup
from pipelinez.core.diagnostics import Diagnostic
from pipelinez.core.oserrors import os_reason
from pipelinez.core.redact import Redactor
from pipelinez.core.run_state import RunState
from pipelinez.core.state.backend import EVENTS, RESULTS, StateBackend, StateBackendError
from pipelinez.core.state.local import LocalBackend
from pipelinez.core.vocabulary import NodeError, NodeStatus, RunCommand, RunStatus
from pipelinez.engine.events import (
    EventBus,
    JsonlWriter,
    Note,
    RunCompleted,
    RunStarted,
    Subscriber,
    WarningEvent,
    utc_now,
)
from pipelinez.engine.nodes.watermarks import Capture, commit_run
from pipelinez.engine.run.backend import BackendProvider, ExecutorBackend
from pipelinez.engine.run.context import RunContext, close_staging, fold_wal, open_run_staging
from pipelinez.engine.run.debug_log import debug_log
from pipelinez.engine.run.executor import OK_STATUSES, Executor, NodeGate, node_completed
from pipelinez.engine.run.failures import DEBUG_LOG
from pipelinez.engine.staging import staging_store
from pipelinez.engine.staging.staging_store import Reuse
from pipelinez.engine.state.lease import lease_fence, lost_error
from pipelinez.engine.state.lock import ProjectLock
from pipelinez.engine.state.mirror import RunMirror
from pipelinez.engine.state.run_results import (
    NodeResult,
    ResultsWriter,
    RunArgs,
    RunResults,
)
from pipelinez.engine.state.runs import STAGING_FILE, new_run_id, runs_dir, sweep
from pipelinez.engine.state.shared import backend_for, mirror
from pipelinez.engine.state.statedir import state_error
from pipelinez.plan.planner import Plan

if TYPE_CHECKING:
    from pipelinez.engine.staging.shared_staging import StagingRoot


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    status: RunStatus  # success | failed | error
    results: RunResults
    log_file: Path | None = None

    @property
    def nodes(self) -> list[NodeResult]:
        """One result per planned node, in plan order."""
        return self.results.nodes

    @property
    def exit_code(self) -> int:
        return 0 if self.status == RunStatus.SUCCESS else 1


class RunSession:
    """`with RunSession(...) as session:` holds the lock and the run folder; on exit the results are final,
    run_completed is published, events.jsonl closed, old staging swept and the lock released."""

    def __init__(
        self,
        state_dir: Path,
        redactor: Redactor,
        keep_last: int,
        subscribers: Sequence[Subscriber] = (),
        lock: ProjectLock | None = None,
        remove_staged: Callable[[str, str], None] | None = None,
        backend: StateBackend | None = None,
    ):
        """`lock`: the project lock, held by the caller's `with` block (a retry decides and runs under it);
        without it the session takes the lock itself, until its end. `remove_staged`: how the retention
        sweep deletes what a Ray run staged (see `runs.sweep`)."""
        self.remove_staged = remove_staged
        self.state_dir = state_dir
        self.redactor = redactor
        self.keep_last = keep_last
        self.subscribers = subscribers
        self._held = lock
        self.backend = backend or LocalBackend(state_dir)
        # a backend the caller's lock holds is closed by the lock's owner
        self._owns_backend = lock is None or lock.backend is not self.backend
        self._mirror: RunMirror | None = None
        self._owned = contextlib.ExitStack()  # the session's own lock, when the caller holds none

    def __enter__(self) -> RunSession:
        lock = self._held
        if lock is None or not lock.held:
            lock = self._owned.enter_context(ProjectLock(self.state_dir, self.backend))
        self.run_id = new_run_id()
        lock.serve(self.run_id)
        self.lock = lock
        self.run_dir = runs_dir(self.state_dir) / self.run_id
        try:  # refused before any node runs when the run's folder cannot be written
            self.run_dir.mkdir(parents=True)
            self._events = JsonlWriter(self.run_dir / "events.jsonl")
        except OSError as exc:
            self._owned.close()
            raise state_error(exc, self.state_dir) from None
        self.bus = EventBus(self.redactor)
        self.bus.subscribe(self._events)
        if self.backend.remote:  # the run's files reach the backend while it lives, not only at its end
            mirror = self._mirror = RunMirror(self.backend, self.run_id, self.run_dir)
            self.bus.subscribe(lambda _event, _data: mirror.touch(EVENTS))
        for subscriber in self.subscribers:
            self.bus.subscribe(subscriber)
        self.started = time.monotonic()
        return self

    @property
    def staging_path(self) -> Path:
        return self.run_dir / STAGING_FILE

    def begin(
        self, results: RunResults, nodes: int, warnings: Sequence[Diagnostic], notes: Sequence[str] = ()
    ) -> None:
        """Write the first run_results.json and publish run_started, the plan's warnings and notes."""
        self.results = results
        writer = ResultsWriter(
            self.run_dir / "run_results.json", results, self.redactor, self._mirror_results
        )
        try:
            writer.write()
        except OSError as exc:
            raise state_error(exc, self.state_dir) from None
        self.writer = writer
        stop_signals.run_recorded(self.run_id)
        self.bus.publish(
            RunStarted(
                self.run_id,
                command=results.command,
                selection=results.selection,
                nodes=nodes,
                retry_of=results.retry_of,
            )
        )
        for w in warnings:
            self.bus.publish(
                WarningEvent(
                    self.run_id, code=w.code, message=w.message, place=w.place.render(), next_step=w.next_step
                )
            )
        for note in notes:
            self.bus.publish(Note(self.run_id, message=note))

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if hasattr(self, "writer"):
                self.results.finished_at = utc_now()
                self._final_write()
                duration_ms = int((time.monotonic() - self.started) * 1000)
                self.bus.publish(
                    RunCompleted(
                        self.run_id,
                        status=self.results.status,
                        duration_ms=duration_ms,
                        counts=self.results.counts,
                    )
                )
            self._mirror_final()
            self._events.close()
            self._sweep()
        finally:
            try:
                self._owned.close()
            finally:
                if self._owns_backend:
                    self.backend.close()

    def _sweep(self) -> None:
        """The retention sweep, over the project's runs (a shared backend's too); what fails now is
        retried by the next run's sweep."""
        history = None
        if self.backend.remote:  # imported only then: a local run's startup budget
            from pipelinez.engine.state.shared_retention import sweep_history

            try:
                history = sweep_history(self.backend, self.state_dir, self.keep_last)
            except (StateBackendError, OSError) as exc:
                DEBUG_LOG.info("the runs of the state backend were not swept: %s", exc)
        with contextlib.suppress(OSError):
            sweep(
                self.state_dir,
                self.keep_last,
                current=self.run_id,
                remove_staged=self.remove_staged,
                history=history,
            )

    def _mirror_results(self) -> None:
        """run_results.json was just rewritten: a shared backend gets a copy (in the background)."""
        if self._mirror is not None:
            self._mirror.touch(RESULTS)

    def _mirror_final(self) -> None:
        """The run's final record and events, into a shared backend; a failure is a warning on stderr
        (the run's outcome stands, its record stays in the local .pz/runs)."""
        if not self.backend.remote:
            return
        if self._mirror is not None:
            self._mirror.close()
        try:
            mirror(self.backend, self.run_id, self.run_dir)
        except StateBackendError as exc:
            for d in exc.diagnostics:
                self.bus.publish(
                    WarningEvent(self.run_id, code=d.code, message=d.message, next_step=d.next_step)
                )

    def _final_write(self) -> None:
        try:
            self.writer.write(final=True)
        except OSError as exc:
            self.bus.publish(
                WarningEvent(
                    self.run_id,
                    code="PZ0521",
                    message=f"run_results.json could not be written: {os_reason(exc)}",
                    place=str(self.writer.path),
                    next_step=lookup("PZ0521").next_step,
                )
            )


def execute(
    plan: Plan,
    *,
    command: RunCommand,
    args: RunArgs,
    warnings: Sequence[Diagnostic] = (),
    subscribers: Sequence[Subscriber] = (),
    threads: int | None = None,
    fail_fast: bool | None = None,
    retry_of: str | None = None,
    gate: NodeGate | None = None,
    checkpoints: dict[str, DeliveryCheckpoint] | None = None,
    resume: Resumption | None = None,
    lock: ProjectLock | None = None,
    notes: Sequence[str] = (),
    provider: BackendProvider | None = None,
    shared: StagingRoot | None = None,
) -> RunOutcome:
    """Run `plan`. `resume` (a retry): notes to print first, source loads to reuse, sink writes carried
    forward (recorded, never run); `lock`: the project lock when the caller already holds it; `provider`:
    where attempts run when not on local threads (a Ray cluster); `shared`: the local executor's shared
    staging, where each source load is published too (checked by the caller)."""
    project = plan.dag.project
    resume = resume or Resumption()
    remover = staging_store.staged_remover(plan.dag.staging)
    # under a caller's lock, its backend: the one holding the lease, whose watermark commit is fenced by it
    held = lock.backend if lock is not None and lock.held else None
    backend = held or backend_for(project, plan.dag.state)
    with RunSession(
        project.state_dir, plan.dag.redactor, project.keep_last, subscribers, lock, remover, backend
    ) as session:
        results = RunResults(session.run_id, command, utc_now(), plan.selection, args, retry_of=retry_of)
        planned = [
            NodeResult(
                p.node.id,
                p.node.name,
                p.node.kind,
                tier=p.tier,
                id_parts=id_parts(p.node),
                description=plan.descriptions.get(p.node.name),
            )
            for p in plan.nodes
        ]
        by_name = {n.name: n for n in [*planned, *resume.carried]}
        results.nodes = [by_name[name] for name in plan.dag.nodes if name in by_name]
        session.begin(results, len(results.nodes), warnings, (*resume.notes, *notes))
        for carried in resume.carried:
            session.bus.publish(node_completed(session.run_id, carried))
        default_slots = provider.slots if provider is not None else os.cpu_count() or 1
        n_threads = threads or project.engine.threads or default_slots
        ff = project.engine.fail_fast if fail_fast is None else fail_fast
        log_file = _run_nodes(
            session, plan, n_threads, ff, gate, resume.reuse, checkpoints, plan.breaker, provider, shared
        )
        return RunOutcome(session.run_id, results.status, results, log_file)


@dataclass(frozen=True)
class Resumption:
    """What a retry hands the run besides its plan."""

    notes: tuple[str, ...] = ()
    reuse: Mapping[str, Reuse] = field(default_factory=dict)
    carried: tuple[NodeResult, ...] = ()


def _run_nodes(
    session: RunSession,
    plan: Plan,
    threads: int,
    fail_fast: bool,
    gate: NodeGate | None,
    reuse: Mapping[str, Reuse],
    checkpoints: dict[str, DeliveryCheckpoint] | None = None,
    breaker: BreakerPolicy | None = None,
    provider: BackendProvider | None = None,
    shared: StagingRoot | None = None,
) -> Path | None:
    """Run the nodes on a fresh staging database; set the run's status. Returns the log file of an
    orchestrator-level failure (a bug, or the staging database itself failing), else None."""
    results = session.results
    staging = ctx = None
    try:
        # a distributed run's staging.duckdb holds views over the shared Parquet: never seeded with tables
        seeded_from = reuse if provider is None else {}
        staging = open_run_staging(session.staging_path, plan, seeded_from)
        ctx = RunContext(session.run_id, session.run_dir, plan, session.bus, staging)
        with debug_log(session.run_dir / "pz.log", session.redactor):
            backend = _backend(ctx, threads, provider, shared)
            executor = Executor(
                ctx,
                session.writer,
                threads,
                fail_fast,
                backend=backend,
                gate=gate,
                checkpoints=checkpoints,
                reuse=reuse,
                breaker=breaker,
                fence=lease_fence(session.lock.lease),
            )
            try:
                executor.run()
            finally:
                if backend is not None:
                    backend.close()
        failpoints.hit("run.after_nodes")
        lost = session.lock.lost  # fenced: what did not start, and the watermarks, are another run's now
        if executor.captures:
            _commit_watermarks(session, plan, executor.captures, lost)
        ok = all(n.status in OK_STATUSES for n in results.nodes)
        results.status = RunStatus.SUCCESS if ok else RunStatus.FAILED
        if lost and session.lock.lease is not None:
            results.status, results.error = RunStatus.FAILED, lost_error(session.lock.lease)
        return None
    except KeyboardInterrupt:
        results.status = RunStatus.FAILED
        results.error = NodeError("PZ0514", f"the run was interrupted ({stop_signals.received()})")
        raise
    except Exception as exc:  # orchestrator-level failure: a bug, the staging db or the disk failing
        log_file = _write_log(session.run_dir / "pz.log", session.redactor(traceback.format_exc()))
        results.status = RunStatus.ERROR
        for node in results.nodes:
            if not node.status.finished:
                node.status = NodeStatus.CANCELLED
                node.skipped_because = "the run stopped at the orchestrator level"
        results.error = _orchestrator_error(exc, session.redactor)
        return log_file
    finally:
        if ctx is not None:
            ctx.close()
        if staging is not None:
            try:
                if results.status is RunStatus.FAILED and results.error is None:
                    fold_wal(staging)
            finally:
                close_staging(staging)


def _backend(
    ctx: RunContext, threads: int, provider: BackendProvider | None, shared: StagingRoot | None
) -> ExecutorBackend | None:
    """Where the run's attempts go: the provider's (Ray), the local threads publishing to a shared staging,
    or None (the executor's own local threads)."""
    if provider is not None:
        return provider.backend(ctx, threads)
    if shared is not None:
        from pipelinez.engine.run.shared_publish import PublishingBackend

        return PublishingBackend(ctx, threads, shared)
    return None


def _commit_watermarks(session: RunSession, plan: Plan, captures: dict[str, Capture], lost: bool) -> None:
    """Commit the watermarks this run earned (see engine.watermarks), record each decision in the load's
    run_results entry, and say why a new watermark was not committed. `lost`: the run's lease was lost."""
    results = {n.name: n for n in session.results.nodes}
    if lost:  # another run holds the project now: its watermarks are the ones that count
        _lease_lost(session, captures, results)
        return
    done = commit_run(
        plan.dag.nodes,
        {name: r.status for name, r in results.items()},
        {name: r.provenance for name, r in results.items()},
        captures,
        session.backend,
        session.run_id,
    )
    failpoints.hit("state.watermarks_committed")
    for name, capture in captures.items():
        reason = done.skipped.get(name)
        results[name].watermark = capture.record(committed=name in done.committed, reason=reason)
        if name in done.committed:
            session.bus.publish(
                Note(session.run_id, message=f"{name}: watermark {capture.cursor} -> {capture.high}")
            )
        elif capture.high is not None and done.error is None:
            session.bus.publish(
                Note(session.run_id, message=f"{name}: watermark {capture.cursor} not advanced: {reason}")
            )
    if done.error is not None:
        if session.backend.remote:
            where = place = session.backend.describe()
        else:
            where, place = ".pz/state.duckdb", str(RunState(plan.dag.project.state_dir).path)
        session.bus.publish(
            WarningEvent(
                session.run_id,
                code="PZ0525",
                message=f"the new watermarks could not be recorded in {where}: {done.error}",
                place=place,
                next_step=lookup("PZ0525").next_step,
            )
        )


def _lease_lost(session: RunSession, captures: dict[str, Capture], results: dict[str, NodeResult]) -> None:
    reason = "the project lock's lease was lost (another run took it over)"
    for name, capture in captures.items():
        results[name].watermark = capture.record(committed=False, reason=reason)
    session.bus.publish(
        WarningEvent(
            session.run_id,
            code="PZ0525",
            message=f"the new watermarks were not recorded in {session.backend.describe()}: {reason}",
            next_step="raise state.lease_seconds if runs pause longer than it; the next run reads the "
            "same rows again",
        )
    )


def _write_log(path: Path, text: str) -> Path | None:
    """Append the orchestrator failure's text to the run's pz.log, after the debug text already in it."""
    try:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(text if text.endswith("\n") else text + "\n")
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
