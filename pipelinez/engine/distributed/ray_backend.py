"""The Ray backend: each node attempt is one Ray task; the pz process stays the driver.

The driver keeps everything that decides (validation, plan, ids, lock, scheduler, retries, breakers,
`max_concurrency`, events, run_results.json, watermarks). A task gets its node's picklable work item and the
manifests of the staged tables it reads (`remote_task.RemoteTask`), never an ObjectRef: a node is submitted
only after its upstream results arrived, so no task waits on another inside Ray.

pz is the only retry authority: tasks are submitted with `max_retries=0` and no `retry_exceptions` (Ray's
own retries would multiply pz's attempts invisibly and re-run appends outside `batches_committed`). A
worker or node lost mid-task comes back as a transient PZ0710 with `worker_lost`, so the node's retry policy
retries it and no circuit breaker counts it. Fail-fast and Ctrl-C cancel running tasks with
`ray.cancel(force=True)`.

A pipeline streamed into its sink write runs where the local executor runs it (a view in the driver's
staging); the write's task re-creates that view first.

This module owns task submission and `adapt_plan`; beside it: ray_cluster.py (connecting to and checking the
cluster; `connect` and `RayCluster` are re-exported here), ray_fan_out.py (a partitioned load, one task per
partition), ray_results.py (published tables as views in the driver's staging, lost tasks).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from pipelinez.compile.nodes import SourceLoadNode
from pipelinez.connectors.sdk import Partition
from pipelinez.core.vocabulary import Tier
from pipelinez.engine.distributed.ray_cluster import TASK_CPUS, RayCluster, connect, memory_bytes
from pipelinez.engine.distributed.ray_fan_out import fan_out
from pipelinez.engine.distributed.ray_results import UNREADABLE, StagedViews, lost, unreadable
from pipelinez.engine.distributed.remote_task import (
    RemoteResult,
    RemoteTask,
    driver_failpoints,
    published_table,
    run_task,
)
from pipelinez.engine.nodes.partitions import LandedParts
from pipelinez.engine.run.backend import Attempt, AttemptResult, Done, ThreadBackend
from pipelinez.engine.run.context import RunContext
from pipelinez.engine.run.failures import DEBUG_LOG, NodeFailure
from pipelinez.engine.staging.manifest import TableManifest
from pipelinez.plan.planner import Plan, PlannedNode

__all__ = ["RayBackend", "RayCluster", "adapt_plan", "connect"]


class RayBackend:
    """ExecutorBackend: one Ray task per attempt; results come back as data through the task's future."""

    def __init__(self, cluster: RayCluster, ctx: RunContext, slots: int):
        self.cluster = cluster
        self.ctx = ctx
        self.ray = cluster.ray
        self.root = cluster.root
        self._remote = self.ray.remote(run_task)
        self._memory = memory_bytes(cluster.memory_limit)
        self._local = ThreadBackend(ctx, 1)  # streamed pipelines: a view in the driver's staging
        self._lock = threading.Lock()
        self._running: dict[str, Any] = {}  # node name -> ObjectRef of its running attempt
        self._streamed: dict[str, PlannedNode] = {
            p.stream_into: p for p in ctx.plan.nodes if p.stream_into
        }  # sink write -> the pipeline it reads as it is computed
        cursor = ctx.staging.cursor()
        self.root.attach(cursor)  # the run's views (and streamed pipelines) read the staged Parquet
        self.views = StagedViews(self.root, cursor)
        self._slots = slots
        self._driver = ThreadPoolExecutor(max_workers=2, thread_name_prefix="pz-ray-driver")  # partitions()
        self.landed: LandedParts[TableManifest] = LandedParts()  # partitions landed in this run
        self.interrupted = False

    # -- ExecutorBackend ---------------------------------------------------------------------------
    def submit(self, item: Attempt, done: Done) -> None:
        planned = item.planned
        if planned.stream_into:  # a pipeline streamed into its write: a view in the driver's staging
            self._local.submit(item, done)
            return
        if planned.fans_out and item.reuse is None:  # a retry's reuse resumes the load in one task
            self._driver.submit(fan_out, self, item, done)  # partitions() may ask the source: not here
            return
        self.submit_task(item, done)

    def interrupt(self) -> None:
        self.interrupted = True
        self._local.interrupt()
        with self._lock:
            refs = list(self._running.values())
        for ref in refs:
            try:
                self.ray.cancel(ref, force=True)
            except Exception as exc:  # finished meanwhile: nothing to cancel
                DEBUG_LOG.info("ray.cancel: %s", exc)

    def close(self) -> None:
        with self._lock:
            refs = list(self._running.values())
        if refs:
            self.ray.wait(refs, num_returns=len(refs))
        self._driver.shutdown(wait=True)
        self._local.close()
        self.views.close()

    # -- tasks ---------------------------------------------------------------------------------------
    def submit_task(self, item: Attempt, done: Done) -> None:
        """The attempt as one task; `done` with its result once the task returned."""
        try:
            task = self.task(item)
        except NodeFailure as failure:
            done(AttemptResult(item.name, item.attempt, failure=failure))
            return
        self.launch(item.name, task, lambda f: self._settle(item, f, done))

    def launch(self, key: str, task: RemoteTask, then: Callable[[Future[RemoteResult]], None]) -> None:
        """Submit `task` (no Ray retries: pz is the retry authority); `then` gets its future once done."""
        part = f"/p{task.partition.index}" if task.partition is not None else ""
        ref = self._remote.options(
            name=f"pz:{task.name}#{task.item.attempt}{part}",
            num_cpus=TASK_CPUS,
            memory=self._memory,
            max_retries=0,
            retry_exceptions=False,
        ).remote(task)
        with self._lock:
            self._running[key] = ref
        future: Future[RemoteResult] = ref.future()

        def finished(f: Future[RemoteResult]) -> None:
            with self._lock:
                self._running.pop(key, None)
            then(f)

        future.add_done_callback(finished)

    def task(self, item: Attempt, partition: Partition | None = None, tier: Tier | None = None) -> RemoteTask:
        """The picklable task of an attempt (or of one of its partitions): its staged inputs, its table."""
        planned = item.planned
        prelude = self._streamed.get(item.name)
        needs = list(planned.node.deps)
        if prelude is not None:
            needs += [d for d in prelude.node.deps if d not in needs]
        inputs = self.views.inputs(needs)
        table = published_table(planned)
        if partition is not None and isinstance(planned.node, SourceLoadNode):
            table = planned.node.part_table(partition.index)
        return RemoteTask(
            item,
            self.root,
            inputs,
            TASK_CPUS,
            self.cluster.memory_limit,
            self.cluster.redactor,
            publish=table,
            prelude=prelude,
            failpoints=driver_failpoints(),
            partition=partition,
            tier=tier,
        )

    def _settle(self, item: Attempt, future: Future[RemoteResult], done: Done) -> None:
        try:
            remote = future.result()
        except BaseException as exc:
            done(AttemptResult(item.name, item.attempt, failure=lost(item, exc, self.cluster.redactor)))
            return
        for note in remote.notes:
            self.ctx.note(note)
        result = remote.result
        try:
            for manifest in remote.published:
                self.views.register(manifest)
        except UNREADABLE as exc:
            message = f"{item.name}: the driver cannot read its published staged data"
            failure = unreadable(message, exc, self.cluster.redactor)
            result = AttemptResult(item.name, item.attempt, failure=failure)
        done(result)


def adapt_plan(plan: Plan) -> tuple[Plan, list[str]]:
    """The plan as Ray runs it. A connector that declares `single_writer` (a DuckDB database file) admits
    one writing process: on the local executor one process shares it between threads, but Ray tasks are
    separate processes, so each such instance's nodes run one at a time (its `max_concurrency` becomes 1),
    and a note says so."""
    nodes: list[PlannedNode] = []
    capped: list[str] = []
    for p in plan.nodes:
        instance = p.node.instance
        point = p.node.endpoint
        if point is not None and point.caps.single_writer and instance and p.max_concurrency != 1:
            p = dataclasses.replace(p, concurrency_cap=1)
            if instance not in capped:
                capped.append(instance)
        nodes.append(p)
    notes = [
        f"executor ray: the nodes of {instance} run one at a time (a DuckDB database file has one writer "
        "process at a time)"
        for instance in capped
    ]
    return dataclasses.replace(plan, nodes=nodes), notes
