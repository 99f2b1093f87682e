"""The DAG executor: up to `threads` nodes at once, each instance at most `max_concurrency`, dbt failure
semantics (a failed node's descendants are skipped, independent branches go on) or fail-fast."""

from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from pipelinez.core import vocabulary
from pipelinez.core.vocabulary import NodeStatus
from pipelinez.engine.context import RunContext
from pipelinez.engine.events import NodeCompleted, NodeRetry, NodeStarted
from pipelinez.engine.failures import NodeFailure
from pipelinez.engine.node_runners import RUNNERS, NodeOutput
from pipelinez.engine.retry import AttemptsFailed, run_with_retry
from pipelinez.engine.run_results import NodeResult, ResultsWriter
from pipelinez.plan.planner import PlannedNode

OK_STATUSES = vocabulary.OK_STATUSES


@dataclass
class _Done:
    name: str
    output: NodeOutput | None
    failure: NodeFailure | None
    attempts: int
    duration_ms: int


class Executor:
    def __init__(self, ctx: RunContext, writer: ResultsWriter, threads: int, fail_fast: bool):
        self.ctx = ctx
        self.writer = writer
        self.threads = max(1, threads)
        self.fail_fast = fail_fast
        self.results = {n.name: n for n in writer.results.nodes}
        self.planned = {p.node.name: p for p in ctx.plan.nodes}
        self.failed_root: dict[str, str] = {}  # node -> the failed node that made it skip

    def run(self) -> None:
        pending = [
            p.node.name for p in self.ctx.plan.nodes if self.results[p.node.name].status == NodeStatus.PENDING
        ]
        running: dict[Future[_Done], str] = {}
        busy: dict[str, int] = {}
        cancelled = False
        with ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="pz-node") as pool:
            try:
                while pending or running:
                    progressed = False
                    for name in list(pending):
                        if cancelled:
                            break
                        planned = self.planned[name]
                        deps = [self.results[d] for d in planned.node.deps if d in self.results]
                        if any(not d.status.finished for d in deps):
                            continue
                        bad = [d for d in deps if d.status not in OK_STATUSES]
                        if bad:
                            pending.remove(name)
                            root = self.failed_root.get(bad[0].name, bad[0].name)
                            self.failed_root[name] = root
                            self._finish_skipped(name, NodeStatus.SKIPPED, f"upstream {root} failed")
                            progressed = True
                            continue
                        instance = planned.node.instance
                        limit = planned.max_concurrency
                        if instance and limit and busy.get(instance, 0) >= limit:
                            continue
                        if len(running) >= self.threads:
                            break
                        pending.remove(name)
                        if instance:
                            busy[instance] = busy.get(instance, 0) + 1
                        self.results[name].status = NodeStatus.RUNNING
                        running[pool.submit(self._execute, planned)] = name
                        progressed = True
                    if cancelled:
                        for name in pending:
                            self._finish_skipped(name, NodeStatus.CANCELLED, "cancelled by fail-fast")
                        pending = []
                    if not running:
                        if pending and not progressed:
                            raise RuntimeError(f"executor stalled with pending nodes {pending}")
                        continue
                    done, _ = wait(list(running), return_when=FIRST_COMPLETED)
                    for future in done:
                        name = running.pop(future)
                        instance = self.planned[name].node.instance
                        if instance:
                            busy[instance] -= 1
                        result = future.result()
                        self._finish(result)
                        if result.failure and self.fail_fast and not cancelled:
                            cancelled = True
                            self.ctx.interrupt_all()
            except KeyboardInterrupt:
                self._interrupted(pending, running)
                raise

    def _interrupted(self, pending: list[str], running: dict[Future[_Done], str]) -> None:
        """Ctrl-C: stop every query in staging, cancel what has not started, and record how the running
        nodes ended, so run_results.json tells the truth."""
        self.ctx.interrupt_all()
        for name in pending:
            if self.results[name].status == NodeStatus.PENDING:
                self._finish_skipped(name, NodeStatus.CANCELLED, "interrupted (SIGINT)")
        for future in list(running):
            try:
                done = future.result()
            except BaseException:  # the node's own thread failed on the interrupt; recorded below
                continue
            if done.failure is None:
                self._finish(done)  # it finished before the interrupt reached it
        for result in self.results.values():
            if not result.status.finished:
                self._finish_skipped(result.name, NodeStatus.CANCELLED, "interrupted (SIGINT)")

    # ---------------------------------------------------------------------------------------
    def _execute(self, planned: PlannedNode) -> _Done:
        node = planned.node
        runner = RUNNERS[node.kind]
        started = time.monotonic()

        def attempt(number: int) -> NodeOutput:
            self.ctx.bus.publish(
                NodeStarted(self.ctx.run_id, name=node.name, id=node.id, kind=node.kind, attempt=number)
            )
            try:
                return runner(self.ctx, planned, number)
            except NodeFailure:
                raise
            except Exception as exc:  # a runner bug: reported as the node's failure, never a crash
                raise NodeFailure(
                    "PZ0512", f"internal error in {node.kind} '{node.name}': {type(exc).__name__}: {exc}"
                ) from exc

        def on_retry(number: int, delay: float, failure: NodeFailure) -> None:
            self.ctx.bus.publish(
                NodeRetry(
                    self.ctx.run_id,
                    name=node.name,
                    attempt=number,
                    delay_ms=int(delay * 1000),
                    error=failure.error,
                )
            )

        try:
            output, attempts = run_with_retry(attempt, planned.retry, on_retry)
            failure = None
        except AttemptsFailed as exc:
            output, attempts, failure = None, exc.attempts, exc.failure
        return _Done(node.name, output, failure, attempts, int((time.monotonic() - started) * 1000))

    def _finish(self, done: _Done) -> None:
        result = self.results[done.name]
        result.attempts = done.attempts
        result.duration_ms = done.duration_ms
        if done.failure:
            result.status = NodeStatus.FAILED
            result.error = done.failure.error
            result.batches_committed = done.failure.batches_committed
            result.rows = done.failure.rows
        elif done.output:
            out = done.output
            result.status = out.status
            result.rows = out.rows
            result.tier = out.tier or result.tier
            result.partitions = out.partitions
            result.batches_committed = out.batches_committed
            result.message = out.message
        self._publish(result)

    def _finish_skipped(self, name: str, status: NodeStatus, reason: str) -> None:
        result = self.results[name]
        result.status = status
        result.skipped_because = reason
        self._publish(result)

    def _publish(self, result: NodeResult) -> None:
        self.writer.write()
        reason = result.skipped_because or result.message
        self.ctx.bus.publish(
            NodeCompleted(
                self.ctx.run_id,
                name=result.name,
                id=result.id,
                kind=result.kind,
                status=result.status,
                rows=result.rows,
                duration_ms=result.duration_ms,
                provenance=result.provenance,
                error=result.error,
                reason=reason,
            )
        )
