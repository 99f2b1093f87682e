"""Where node attempts run. The scheduler decides *when*; an ExecutorBackend decides *where*.

The seam is an `Attempt` in (one attempt of one planned node, which carries the node's frozen work item), an
`AttemptResult` out, both picklable: a process-pool or Ray backend can ship the attempt to a worker that
opens staging at `StagingLocation` itself, runs `run_attempt`, and sends the `AttemptResult` back (errors as
data: NodeFailure survives a pickle round-trip). The thread backend, the first implementation, runs attempts
on a pool of threads sharing one staging connection (a cursor each). A backend's `submit` knows nothing of
node kinds or connectors: what it may do with a node (stream it locally, fan a load out) is the plan's
annotation.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pipelinez.connectors.sdk_delivery import DeliveryCheckpoint
from pipelinez.core.vocabulary import NodeKind
from pipelinez.engine.nodes.landing import NodeContext, NodeOutput
from pipelinez.engine.nodes.node_runners import RUNNERS, run_sink_write
from pipelinez.engine.nodes.reuse_runner import run_reused_source_load
from pipelinez.engine.run.context import RunContext
from pipelinez.engine.run.failures import NodeFailure
from pipelinez.engine.staging.staging_store import Reuse
from pipelinez.plan.planner import PlannedNode


@dataclass(frozen=True)
class StagingLocation:
    """What a worker needs to open the run's staging database itself."""

    path: Path
    memory_limit: str


@dataclass(frozen=True)
class Attempt:
    """One attempt of one node: everything a worker needs besides the staging database. (The node's work
    item, `compile.work`, is what the node does; an attempt is one try at doing it.)"""

    run_id: str
    planned: PlannedNode
    attempt: int
    resume: DeliveryCheckpoint | None = None  # a sink write with checkpointed delivery: batches acknowledged
    reuse: Reuse | None = None  # a retry's source load: take the failed run's staged data (checked)

    @property
    def name(self) -> str:
        return self.planned.node.name


@dataclass(frozen=True)
class AttemptResult:
    """How one attempt ended: an output, or a failure (never both)."""

    name: str
    attempt: int
    output: NodeOutput | None = None
    failure: NodeFailure | None = None


Done = Callable[[AttemptResult], None]


class ExecutorBackend(Protocol):
    def submit(self, item: Attempt, done: Done) -> None:
        """Start the attempt; call `done` exactly once, from any thread, when it ended (however it ended)."""

    def interrupt(self) -> None:
        """Stop running attempts as soon as possible (fail-fast, Ctrl-C); they still report through `done`."""

    def close(self) -> None:
        """Wait for running attempts and release the workers."""


class BackendProvider(Protocol):
    """Where a run's attempts go when not to the local thread pool (the Ray cluster)."""

    @property
    def slots(self) -> int:
        """Nodes at once when neither --threads nor engine.threads says: the cluster's CPUs."""

    def backend(self, ctx: RunContext, slots: int) -> ExecutorBackend:
        """The run's backend; the caller closes it after the run."""


def run_attempt(ctx: NodeContext, item: Attempt) -> AttemptResult:
    """Run one attempt of a node; a runner bug becomes the node's PZ0512 failure, never a crash."""
    node = item.planned.node
    try:
        if item.resume is not None:
            output = run_sink_write(ctx, item.planned, item.attempt, resume=item.resume)
        elif item.reuse is not None and node.kind == NodeKind.SOURCE_LOAD:
            output = run_reused_source_load(ctx, item.planned, item.attempt, item.reuse)
        else:
            output = RUNNERS[node.kind](ctx, item.planned, item.attempt)
    except NodeFailure as failure:
        return AttemptResult(node.name, item.attempt, failure=failure)
    except Exception as exc:
        message = f"internal error in {node.kind} '{node.name}': {type(exc).__name__}: {exc}"
        return AttemptResult(node.name, item.attempt, failure=NodeFailure("PZ0512", message))
    return AttemptResult(node.name, item.attempt, output=output)


class ThreadBackend:
    """Attempts on `threads` worker threads in this process, sharing the run's staging connection."""

    def __init__(self, ctx: RunContext, threads: int):
        self.ctx = ctx
        self._pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="pz-node")

    def run(self, item: Attempt) -> AttemptResult:
        """One attempt, on a worker thread (a subclass adds to it: `shared_publish.PublishingBackend`)."""
        return run_attempt(self.ctx, item)

    def submit(self, item: Attempt, done: Done) -> None:
        future = self._pool.submit(self.run, item)

        def report(f: Future[AttemptResult]) -> None:
            exc = f.exception()
            if exc is None:
                done(f.result())
            else:  # the worker itself died (not the node's runner): still one result per attempt
                message = f"internal error running '{item.name}': {type(exc).__name__}: {exc}"
                done(AttemptResult(item.name, item.attempt, failure=NodeFailure("PZ0512", message)))

        future.add_done_callback(report)

    def interrupt(self) -> None:
        self.ctx.interrupt_all()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
