"""The executor's seams with real nodes on a real staging database: a backend that sees only picklable work
items, a retry back-off that leaves the worker to other nodes, and the gate hook."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from pipelinez.core.redact import Redactor
from pipelinez.core.vocabulary import NodeStatus
from pipelinez.engine.run import prepare
from pipelinez.engine.run.backend import Attempt, AttemptResult, Done, ThreadBackend
from pipelinez.engine.run.context import RunContext, open_staging
from pipelinez.engine.run.executor import Executor, NodeGate
from pipelinez.engine.run.failures import NodeFailure
from pipelinez.engine.run.scheduler import Defer
from pipelinez.engine.run.session import RunSession
from pipelinez.engine.state.run_results import NodeResult, RunArgs, RunResults
from pipelinez.plan.planner import PlannedNode
from tests.conftest import write_project
from tests.functional.test_run_core import BASE, ORDERS_COPY
from tests.unit.test_scheduler import FakeClock

TWO_BRANCHES = {
    **BASE,
    "pipelines/orders_copy.sql": ORDERS_COPY,
    "pipelines/customers_copy.sql": "SELECT * FROM {{ source('files', 'customers') }}",
}


class PicklingBackend:
    """Ships every work item and result through pickle (as a process or Ray backend would) and makes the
    first attempt of `flaky` fail transiently."""

    def __init__(self, inner: ThreadBackend, flaky: str):
        self.inner = inner
        self.flaky = flaky
        self.submitted: list[tuple[str, int]] = []

    def submit(self, item: Attempt, done: Done) -> None:
        item = pickle.loads(pickle.dumps(item))
        self.submitted.append((item.name, item.attempt))
        if item.name == self.flaky and item.attempt == 1:
            failure = NodeFailure("PZ0505", "connection reset by peer", transient=True, retry_after=5.0)
            done(AttemptResult(item.name, item.attempt, failure=failure))
            return
        self.inner.submit(item, lambda result: done(pickle.loads(pickle.dumps(result))))

    def interrupt(self) -> None:
        self.inner.interrupt()

    def close(self) -> None:
        self.inner.close()


def _run(
    project: Path, backend_for: Any, gate: NodeGate | None = None
) -> tuple[RunResults, list[dict[str, Any]]]:
    plan, _ = prepare.plan(project)
    events: list[dict[str, Any]] = []
    with RunSession(project / ".pz", Redactor(), 5, [lambda _e, data: events.append(data)]) as session:
        results = RunResults(session.run_id, "run", "now", plan.selection, RunArgs())
        results.nodes = [NodeResult(p.node.id, p.node.name, p.node.kind, tier=p.tier) for p in plan.nodes]
        session.begin(results, len(plan.nodes), [])
        staging = open_staging(session.staging_path, "1GB")
        ctx = RunContext(session.run_id, session.run_dir, plan, session.bus, staging)
        try:
            backend = backend_for(ctx)
            Executor(ctx, session.writer, 1, False, backend=backend, gate=gate, clock=FakeClock()).run()
            backend.close()
        finally:
            ctx.close()
            staging.close()
    return results, events


def test_a_retry_back_off_leaves_the_only_worker_to_other_nodes(tmp_path: Path) -> None:
    project = write_project(tmp_path / "shop", TWO_BRANCHES)
    backends: list[PicklingBackend] = []

    def backend_for(ctx: RunContext) -> PicklingBackend:
        backends.append(PicklingBackend(ThreadBackend(ctx, 1), "src_files__orders"))
        return backends[0]

    results, events = _run(project, backend_for)
    started = [(e["name"], e["attempt"]) for e in events if e["event"] == "node_started"]
    # one worker: while the orders load waits out its back-off, the customers branch runs
    assert started.index(("src_files__customers", 1)) < started.index(("src_files__orders", 2))
    assert backends[0].submitted == started
    retry = next(e for e in events if e["event"] == "node_retry")
    assert retry["name"] == "src_files__orders" and retry["delay_ms"] >= 5000
    orders = results.node("src_files__orders")
    assert orders.status == NodeStatus.SUCCESS and orders.attempts == 2 and orders.rows == 3
    assert all(n.status == NodeStatus.SUCCESS for n in results.nodes)


def test_the_gate_defers_a_node_without_holding_the_worker(tmp_path: Path) -> None:
    project = write_project(tmp_path / "shop", TWO_BRANCHES)
    asked: list[tuple[str, float]] = []

    def gate(planned: PlannedNode, now: float) -> Defer | None:
        asked.append((planned.node.name, now))
        if (
            planned.node.name == "src_files__orders"
            and len([a for a in asked if a[0] == "src_files__orders"]) == 1
        ):
            return Defer(now + 60.0)
        return None

    results, events = _run(project, lambda ctx: ThreadBackend(ctx, 1), gate)
    started = [e["name"] for e in events if e["event"] == "node_started"]
    assert started.index("src_files__customers") < started.index("src_files__orders")
    assert all(n.status == NodeStatus.SUCCESS for n in results.nodes)
