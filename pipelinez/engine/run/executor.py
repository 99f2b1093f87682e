"""The DAG executor: the generic scheduler with pz's nodes. Up to `threads` nodes at once, each instance at
most `max_concurrency`, dbt failure semantics (a failed node's descendants are skipped, independent
branches go on) or fail-fast, retries of transient failures re-submitted after their back-off (no worker
waits), and the gate: the circuit breakers of `engine.breaker` (`breaker_gate.py`) hold nodes back without a
worker and hear how every attempt ended. Node results, events and run_results.json are
recorded here, on the coordinator thread."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from pipelinez.compile.policy import BreakerPolicy
from pipelinez.connectors.sdk_delivery import DeliveryCheckpoint
from pipelinez.core import vocabulary
from pipelinez.core.vocabulary import NodeStatus, Provenance
from pipelinez.engine.events import BreakerStateChanged, NodeCompleted, NodeRetry, NodeStarted
from pipelinez.engine.nodes.streamed import settle_pipeline
from pipelinez.engine.nodes.watermarks import Capture
from pipelinez.engine.resilience.breaker import Transition
from pipelinez.engine.resilience.breaker_gate import BreakerGate
from pipelinez.engine.resilience.retry import retry_delay
from pipelinez.engine.run.backend import Attempt, AttemptResult, Done, ExecutorBackend, ThreadBackend
from pipelinez.engine.run.context import RunContext
from pipelinez.engine.run.failures import NodeFailure
from pipelinez.engine.run.scheduler import (
    Clock,
    Finished,
    GateDecision,
    Graph,
    MonotonicClock,
    Refuse,
    RetryIn,
    Scheduler,
    Verdict,
    interrupted_reason,
)
from pipelinez.engine.staging.staging_store import Reuse
from pipelinez.engine.state.run_results import NodeResult, ResultsWriter
from pipelinez.plan.planner import PlannedNode

OK_STATUSES = vocabulary.OK_STATUSES

NodeGate = Callable[[PlannedNode, float], GateDecision]
Fence = Callable[[PlannedNode], NodeFailure | None]  # None: the node may start


def node_completed(run_id: str, result: NodeResult) -> NodeCompleted:
    """The node_completed event of a node's result (one construction for run and carried-forward nodes)."""
    return NodeCompleted(
        run_id,
        name=result.name,
        id=result.id,
        kind=result.kind,
        status=result.status,
        rows=result.rows,
        duration_ms=result.duration_ms,
        provenance=result.provenance,
        error=result.error,
        reason=result.skipped_because or result.message,
    )


class Executor:
    """Implements the scheduler's Hooks for pz nodes keyed by name."""

    def __init__(
        self,
        ctx: RunContext,
        writer: ResultsWriter,
        threads: int,
        fail_fast: bool,
        *,
        backend: ExecutorBackend | None = None,
        gate: NodeGate | None = None,
        clock: Clock | None = None,
        checkpoints: dict[str, DeliveryCheckpoint] | None = None,
        reuse: Mapping[str, Reuse] | None = None,
        breaker: BreakerPolicy | None = None,
        fence: Fence | None = None,
    ):
        """`gate`: asked before each attempt (tests); `breaker`: engine.breaker's policy: one breaker per
        source/sink instance, asked after `gate` and told how every attempt ended; `fence`: asked first,
        before each attempt: a failure it returns refuses the node (a run that lost its project lock's
        lease starts no further node, so no sink write)."""
        self.ctx = ctx
        self.writer = writer
        self.threads = max(1, threads)
        self.fail_fast = fail_fast
        self._own_backend = backend is None
        self._backend: ExecutorBackend = backend or ThreadBackend(ctx, self.threads)
        self.gate = gate
        self.fence = fence
        self.reuse = dict(reuse or {})  # a retry's source loads that take the failed run's staged data
        self.clock: Clock = clock or MonotonicClock()
        self.breakers = BreakerGate(breaker, self.publish_transition) if breaker else None
        self.results = {n.name: n for n in writer.results.nodes}
        self.planned = {p.node.name: p for p in ctx.plan.nodes}
        self._started: dict[str, float] = {}
        # checkpointed delivery: what the next attempt of a sink write may resume past (seeded by a retry
        # from the failed run, then by each failed attempt of this run)
        self._resume: dict[str, DeliveryCheckpoint] = dict(checkpoints or {})
        self._attempts: dict[str, int] = {}  # the latest attempt submitted per node
        self._last_failure: dict[str, NodeFailure] = {}  # of a node waiting to retry
        # a streamed pipeline's rows are the rows its sink write read through it: recorded when that settles
        self._streamed = {p.stream_into: p.node.name for p in ctx.plan.nodes if p.stream_into}
        # streamed pipelines whose view is made: their query runs inside their write, and they settle with it
        self._held: set[str] = set()
        self.captures: dict[str, Capture] = {}  # incremental loads' captures, by node name

    def run(self) -> None:
        order = [p.node.name for p in self.ctx.plan.nodes]
        graph = Graph(
            order,
            {name: self.planned[name].node.deps for name in order},
            group=lambda name: self.planned[name].node.instance,
            slots=self.ctx.slots,  # shared with the partitions a running load reads at once
        )
        settled = {
            n: r.status in OK_STATUSES for n, r in self.results.items() if r.status != NodeStatus.PENDING
        }
        scheduler: Scheduler[str, AttemptResult] = Scheduler(
            graph,
            self,
            slots=self.threads,
            fail_fast=self.fail_fast,
            gate=self._gate if self.gate or self.breakers or self.fence else None,
            clock=self.clock,
            settled=settled,
        )
        try:
            scheduler.run()
            for write, pipeline in self._streamed.items():  # a write the scheduler never settled
                if pipeline in self._held:
                    self._settle_streamed(pipeline, self.results[write], None)
        finally:
            if self._own_backend:
                self._backend.close()

    def _gate(self, name: str, now: float) -> GateDecision:
        planned = self.planned[name]
        refused = self.fence(planned) if self.fence else None
        if refused is not None:
            return Refuse(refused)
        for gate in (self.gate, self.breakers):
            decision = gate(planned, now) if gate else None
            if decision is not None:
                return decision
        return None

    def publish_transition(self, change: Transition) -> None:
        """A breaker changed state: the `breaker_state_changed` event."""
        self.ctx.bus.publish(
            BreakerStateChanged(
                self.ctx.run_id,
                instance=change.instance,
                from_state=change.from_state,
                to_state=change.to_state,
                reason=change.reason,
                retry_in_ms=None if change.retry_in is None else int(change.retry_in * 1000),
            )
        )

    # -- Hooks ---------------------------------------------------------------------------------------
    def submit(self, key: str, attempt: int, done: Done) -> None:
        planned = self.planned[key]
        node = planned.node
        self._attempts[key] = attempt
        self._started.setdefault(key, time.monotonic())
        self.results[key].status = NodeStatus.RUNNING
        self.ctx.bus.publish(
            NodeStarted(self.ctx.run_id, name=key, id=node.id, kind=node.kind, attempt=attempt)
        )
        work = Attempt(self.ctx.run_id, planned, attempt, self._resume.get(key), self.reuse.get(key))
        self._backend.submit(work, done)

    def settle(self, key: str, attempt: int, result: AttemptResult, may_retry: bool) -> Verdict:
        failure = result.failure
        if failure is not None and failure.checkpoint is not None:
            self._resume[key] = failure.checkpoint
        if self.breakers is not None:
            if result.output is not None and result.output.provenance == Provenance.REUSED:
                self.breakers.release(self.planned[key])  # copied from old staging: the source was not asked
            else:
                self.breakers.observe(self.planned[key], failure, self.clock.now())
        if failure is not None and may_retry:
            delay = retry_delay(self.planned[key].retry, attempt, failure)
            if delay is not None:
                retry = NodeRetry(
                    self.ctx.run_id,
                    name=key,
                    attempt=attempt,
                    delay_ms=int(delay * 1000),
                    error=failure.error,
                )
                self.ctx.bus.publish(retry)
                self._last_failure[key] = failure
                return RetryIn(delay)
        return Finished(self._finish(result))

    def settle_interrupted(self, key: str, attempt: int, result: AttemptResult) -> None:
        if self.breakers is not None:
            self.breakers.release(self.planned[key])
        if result.failure is None:
            self._finish(result)  # it finished before the interrupt reached it
        else:
            self._give_up(key, NodeStatus.CANCELLED, interrupted_reason())

    def refuse(self, key: str, reason: object) -> None:
        failure = reason if isinstance(reason, NodeFailure) else NodeFailure("PZ0506", str(reason))
        self._finish(AttemptResult(key, self._attempts.get(key, 0), failure=failure))

    def give_up(self, key: str, status: NodeStatus, reason: str) -> None:
        self._give_up(key, status, reason)

    def _give_up(self, key: str, status: NodeStatus, reason: str) -> None:
        result = self.results[key]
        result.status = status
        result.skipped_because = reason
        pipeline = self._streamed.get(key)
        if pipeline in self._held:
            self._settle_streamed(pipeline, result, self._last_failure.get(key))
        if key in self._attempts:  # cancelled after it ran: the attempts it made and its last error
            result.attempts = self._attempts[key]
            started = self._started.get(key)
            result.duration_ms = int((time.monotonic() - started) * 1000) if started is not None else 0
            last = self._last_failure.get(key)
            if last is not None and result.error is None:
                result.error = last.error
        self._publish(result)

    def interrupt(self) -> None:
        self._backend.interrupt()

    # -- recording -----------------------------------------------------------------------------------
    def _finish(self, done: AttemptResult) -> bool:
        """Record how a node ended and publish it; whether it ended ok (what depends on it may run)."""
        result = self.results[done.name]
        result.attempts = done.attempt
        started = self._started.get(done.name)
        result.duration_ms = int((time.monotonic() - started) * 1000) if started is not None else 0
        if done.failure:
            result.status = NodeStatus.FAILED
            result.error = done.failure.error
            result.batches_committed = done.failure.batches_committed
            result.rows = done.failure.rows
            result.checkpoint = done.failure.checkpoint
            if done.failure.partitions is not None:
                result.partitions = list(done.failure.partitions)
        elif done.output:
            out = done.output
            result.status = out.status
            result.rows = out.rows
            result.tier = out.tier or result.tier
            result.partitions = out.partitions
            result.batches_committed = out.batches_committed
            result.checkpoint = out.checkpoint
            result.message = out.message
            result.provenance = out.provenance
            result.reused_from = out.reused_from
            reuse = self.reuse.get(done.name)
            if out.watermark is not None:  # committed (or not) at the end of the run
                self.captures[done.name] = out.watermark
                result.watermark = out.watermark.record(committed=False)
            elif out.provenance is not None and reuse is not None and reuse.watermark is not None:
                result.watermark = reuse.watermark  # the same rows: the failed run's cursor range
        ok = result.status in OK_STATUSES
        if ok and self.planned[done.name].stream_into:  # only its view exists: it settles with its write
            result.status = NodeStatus.RUNNING
            self._held.add(done.name)
            return True
        pipeline = self._streamed.get(done.name)
        if pipeline in self._held:
            self._settle_streamed(pipeline, result, done.failure)
        self._publish(result)
        return ok

    def _settle_streamed(self, pipeline: str, write: NodeResult, failure: NodeFailure | None) -> None:
        """A streamed pipeline's result, from how the write that ran its query ended; published first."""
        self._held.discard(pipeline)
        result = self.results[pipeline]
        settle_pipeline(result, write, failure)
        started = self._started.get(pipeline)
        if started is not None:  # its query ran until its write settled
            result.duration_ms = int((time.monotonic() - started) * 1000)
        self._publish(result)

    def _publish(self, result: NodeResult) -> None:
        self.writer.write()
        self.ctx.bus.publish(node_completed(self.ctx.run_id, result))
