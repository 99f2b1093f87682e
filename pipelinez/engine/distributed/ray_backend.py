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

A partitioned source load fans out: one task per partition (as many at once as its instance has free slots of
`max_concurrency`, its own included: `partitions.ReadLease`), each publishing its partition's table; the
load's table is then a manifest listing their files (no row copied). A partition that landed stays landed for
the node's next attempt in the run (`partitions.LandedParts`), so a worker lost mid-partition costs one
`node_retry` that re-reads only the partitions that had not landed.

The driver's `staging.duckdb` holds a view per staged table over its Parquet, so `pz` inspection and
`pz retry` read a Ray run's staging like a local one. A pipeline streamed into its sink write runs where
the local executor runs it (a view in the driver's staging); the write's task re-creates that view first.

`ray` is imported only here, inside functions: without the extra installed, `--executor ray` is PZ0707.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
import re
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pipelinez.compile.nodes import SourceLoadNode
from pipelinez.connectors.sdk import Partition
from pipelinez.connectors.sdk_errors import is_transient_store_error
from pipelinez.core.diagnostics import PzConfigError, error
from pipelinez.core.redact import Redactor
from pipelinez.core.sqlnames import quote_ident
from pipelinez.core.vocabulary import NodeStatus, Tier
from pipelinez.engine.distributed.ray_address import INSTALL, check_reachable
from pipelinez.engine.distributed.remote_task import (
    STAGING_PROBLEM,
    RemoteResult,
    RemoteTask,
    StagedInput,
    driver_failpoints,
    probe,
    published_table,
    run_task,
    versions,
)
from pipelinez.engine.nodes.landing import NodeOutput, attempt_tier, make_connector
from pipelinez.engine.nodes.partitions import LandedParts, ReadLease, partition_fingerprint
from pipelinez.engine.run.backend import Attempt, AttemptResult, Done, ThreadBackend
from pipelinez.engine.run.context import RunContext
from pipelinez.engine.run.executor_choice import ExecutorChoice
from pipelinez.engine.run.failures import DEBUG_LOG, NodeFailure, classify
from pipelinez.engine.staging.shared_staging import StagingRoot, TableManifest
from pipelinez.engine.staging.staging_store import ReuseUnavailable, first_line
from pipelinez.engine.state.run_results import PartitionResult
from pipelinez.plan.planner import Plan, PlannedNode

TASK_CPUS = 1  # each task: one CPU, so its DuckDB runs one thread; memory: engine.memory_limit
PROBE_TIMEOUT = 120.0
_UNITS = {"KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4}
_UNITS |= {"KIB": 1024, "MIB": 1024**2, "GIB": 1024**3, "TIB": 1024**4}
# Ray errors that mean the worker, its node or its raylet went away mid-task: the attempt is lost, not failed
_LOST = (
    "WorkerCrashedError",
    "NodeDiedError",
    "LocalRayletDiedError",
    "ObjectLostError",
    "OwnerDiedError",
    "OutOfMemoryError",
    "ObjectReconstructionFailedError",
    "ObjectReconstructionFailedMaxAttemptsExceededError",
    "ObjectReconstructionFailedLineageEvictedError",
    "ObjectFetchTimedOutError",
    "RaySystemError",
)


def memory_bytes(limit: str) -> int:
    """engine.memory_limit ('512MB', '2GiB') in bytes: each task's Ray `memory` request."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B)\s*", limit, re.IGNORECASE)
    if not m:
        raise ValueError(f"not a byte size: {limit!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def _refuse(code: str, message: str, next_step: str = "") -> PzConfigError:
    return PzConfigError([error(code, message, file="executor ray", next_step=next_step)])


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise _refuse(
            "PZ0707",
            f"--executor ray needs the ray package, which this Python cannot import ({exc})",
            f"{INSTALL} (ray[client]>=2.60,<3), or run with --executor local",
        ) from None
    return ray


@dataclass
class RayCluster:
    """A connection to a Ray cluster for one run: checked (resources, versions, staging) before the run."""

    choice: ExecutorChoice
    memory_limit: str
    redactor: Redactor
    root: StagingRoot
    started: bool = False  # pz started a local Ray instance (and shuts it down at the end)
    slots: int = 1  # the cluster's CPUs: nodes at once unless --threads or engine.threads says
    ray: Any = field(default=None, repr=False)

    def backend(self, ctx: RunContext, slots: int) -> RayBackend:
        return RayBackend(self, ctx, slots)

    def close(self) -> None:
        if self.started and self.ray is not None and self.ray.is_initialized():
            self.ray.shutdown()
        self.started = False


def connect(choice: ExecutorChoice, memory_limit: str, redactor: Redactor, root: StagingRoot) -> RayCluster:
    """Check the staging (it can be written: PZ0711; its bucket exists: PZ0531), then join the cluster
    (RAY_ADDRESS: something answers there within seconds, else PZ0708; a ray:// address needs Ray Client,
    PZ0707) or start a local Ray instance and check it before any node runs: a node can host one task
    (PZ0708), every node runs the driver's pipelinez/DuckDB/Python (PZ0709). Raises PzConfigError (every
    message redacted); the run has not started."""
    ray = import_ray()
    _check_staging(root, redactor)
    cluster = RayCluster(choice, memory_limit, redactor, root, ray=ray)
    if not ray.is_initialized():
        if choice.address:
            check_reachable(choice.address, node_ip=_node_ip)
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        options: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,  # pz prints its own lines; a worker's stray output never reaches stdout
            "logging_level": logging.ERROR,
        }
        try:
            # without RAY_ADDRESS always a new local instance: never whatever cluster `ray start` left behind
            ray.init(address=choice.address or "local", **options)
        except Exception as exc:
            where = f"at RAY_ADDRESS={choice.address}" if choice.address else "locally"
            raise _refuse(
                "PZ0708", f"the Ray cluster cannot be reached or started {where}: {first_line(exc)}"
            ) from None
        cluster.started = True
    try:
        _check_resources(cluster)
        _probe_versions(cluster)
    except BaseException:
        cluster.close()
        raise
    return cluster


def _node_ip() -> str | None:
    """This machine's IP as Ray sees it (Ray connects there for a loopback RAY_ADDRESS)."""
    try:
        return str(importlib.import_module("ray._private.services").get_node_ip_address())
    except Exception:  # a Ray without it: the loopback address alone is tried
        return None


def _check_resources(cluster: RayCluster) -> None:
    ray = cluster.ray
    need = memory_bytes(cluster.memory_limit)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    fits = [
        n
        for n in nodes
        if n.get("Resources", {}).get("CPU", 0) >= TASK_CPUS
        and n.get("Resources", {}).get("memory", 0) >= need
    ]
    if not fits:
        raise _refuse(
            "PZ0708",
            f"no node of the Ray cluster offers {TASK_CPUS} CPU and {cluster.memory_limit} of memory "
            f"(engine.memory_limit), which each pz task asks for: a task would wait forever",
        )
    cluster.slots = max(1, int(sum(n.get("Resources", {}).get("CPU", 0) for n in nodes)))


def _probe_versions(cluster: RayCluster) -> None:
    """One probe task pinned to each alive node: the versions its workers import, and whether they can
    write and read the staging (a node that cannot reach the bucket, or lacks the shared mount's rights,
    is PZ0711 before anything runs, not a PZ0712 on every node it runs)."""
    ray = cluster.ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    remote = ray.remote(probe)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    refs = [
        remote.options(
            num_cpus=0,
            max_retries=0,
            name="pz:version-probe",
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
        ).remote(cluster.root)
        for n in nodes
    ]
    try:
        found = ray.get(refs, timeout=PROBE_TIMEOUT)
    except Exception as exc:
        raise _refuse(
            "PZ0708", f"the version probe did not complete on every Ray node: {first_line(exc)}"
        ) from None
    mine = versions()
    for node, theirs in zip(nodes, found, strict=True):
        differ = [f"{k} {theirs.get(k)} (driver: {v})" for k, v in mine.items() if theirs.get(k) != v]
        host = node.get("NodeManagerAddress", node.get("NodeID", "?"))
        if differ:
            raise _refuse("PZ0709", f"Ray node {host} runs {', '.join(differ)}")
        if theirs.get(STAGING_PROBLEM):
            raise _refuse(
                "PZ0711",
                cluster.redactor(f"Ray node {host}: {theirs[STAGING_PROBLEM]}"),
                "every node needs the staging: a shared folder each one mounts, or an s3:// endpoint each "
                "one reaches with engine.staging's credentials",
            )


def _check_staging(root: StagingRoot, redactor: Redactor) -> None:
    try:
        root.check()
    except PzConfigError as exc:
        raise PzConfigError(
            [
                dataclasses.replace(d, message=redactor(d.message), next_step=redactor(d.next_step))
                for d in exc.diagnostics
            ]
        ) from None


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
        self._staged: dict[str, StagedInput] = {}  # table -> its manifest, as the tasks published them
        self._streamed: dict[str, PlannedNode] = {
            p.stream_into: p for p in ctx.plan.nodes if p.stream_into
        }  # sink write -> the pipeline it reads as it is computed
        self._views = ctx.staging.cursor()
        self.root.attach(self._views)  # the run's views (and streamed pipelines) read the staged Parquet
        self._slots = slots
        self._driver = ThreadPoolExecutor(max_workers=2, thread_name_prefix="pz-ray-driver")  # partitions()
        self._landed: LandedParts[TableManifest] = LandedParts()  # partitions landed in this run
        self._interrupted = False

    # -- ExecutorBackend ---------------------------------------------------------------------------
    def submit(self, item: Attempt, done: Done) -> None:
        planned = item.planned
        if planned.stream_into:  # a pipeline streamed into its write: a view in the driver's staging
            self._local.submit(item, done)
            return
        if planned.fans_out and item.reuse is None:  # a retry's reuse resumes the load in one task
            self._driver.submit(self._fan_out, item, done)  # partitions() may ask the source: not here
            return
        self._submit_task(item, done)

    def _submit_task(self, item: Attempt, done: Done) -> None:
        try:
            task = self._task(item)
        except NodeFailure as failure:
            done(AttemptResult(item.name, item.attempt, failure=failure))
            return
        self._launch(item.name, task, lambda f: self._settle(item, f, done))

    def _launch(self, key: str, task: RemoteTask, then: Callable[[Future[RemoteResult]], None]) -> None:
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

    def interrupt(self) -> None:
        self._interrupted = True
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
        self._views.close()

    # -- tasks ---------------------------------------------------------------------------------------
    def _task(
        self, item: Attempt, partition: Partition | None = None, tier: Tier | None = None
    ) -> RemoteTask:
        planned = item.planned
        prelude = self._streamed.get(item.name)
        needs = list(planned.node.deps)
        if prelude is not None:
            needs += [d for d in prelude.node.deps if d not in needs]
        with self._lock:
            inputs = tuple(self._staged[d] for d in needs if d in self._staged)
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
            done(AttemptResult(item.name, item.attempt, failure=self._lost(item, exc)))
            return
        for note in remote.notes:
            self.ctx.note(note)
        result = remote.result
        try:
            for manifest in remote.published:
                self._register(manifest)
        except (ReuseUnavailable, OSError, RuntimeError) as exc:
            failure = NodeFailure(
                "PZ0712",
                self.cluster.redactor(
                    f"{item.name}: the driver cannot read its published staged data: {exc}"
                ),
                transient=(isinstance(exc, ReuseUnavailable) and exc.transient)
                or is_transient_store_error(exc),
            )
            result = AttemptResult(item.name, item.attempt, failure=failure)
        done(result)

    # -- a partitioned load, one task per partition ------------------------------------------------------
    def _fan_out(self, item: Attempt, done: Done) -> None:
        node = item.planned.node
        assert isinstance(node, SourceLoadNode)
        request = node.work.request
        try:
            connector = make_connector(self.ctx, node.work.endpoint)
            try:
                parts = connector.partitions(request)
                tier = attempt_tier(connector, node.work)
            finally:
                connector.close()
        except Exception as exc:
            failure = classify(exc, "PZ0505", f"source '{node.source}' dataset '{node.dataset}'")
            done(AttemptResult(item.name, item.attempt, failure=failure))
            return
        if len(parts) <= 1:
            self._submit_task(item, done)
            return
        lease = ReadLease(self.ctx, node, len(parts), node.work.endpoint.max_concurrency or len(parts))
        _FanOut(self, item, done, parts, tier, lease).start()

    def _register(self, published: TableManifest) -> None:
        """A task published a table: the driver reads its manifest back (a node is done only when its
        manifest exists on the shared staging) and makes it a view in the run's staging.duckdb."""
        import duckdb

        manifest = self.root.read_manifest(published.run_id, published.table)
        if manifest.files != published.files or manifest.rows != published.rows:
            raise RuntimeError(
                f"{published.table}: its manifest in {self.root.location} is not the one the task wrote"
            )
        sql = self.root.select_sql(manifest.run_id, manifest)
        with self._lock:
            self._staged[manifest.table] = StagedInput(manifest.run_id, manifest)
            try:
                self._views.execute(f"CREATE OR REPLACE VIEW {quote_ident(manifest.table)} AS {sql}")
            except duckdb.Error as exc:
                raise RuntimeError(first_line(exc)) from exc

    def _lost(self, item: Attempt, exc: BaseException) -> NodeFailure:
        """A task that did not return its result: cancelled, its worker lost, or (a bug) it raised."""
        kinds = {cls.__name__ for cls in type(exc).__mro__}
        what = self.cluster.redactor(first_line(exc))
        if "TaskCancelledError" in kinds:
            return NodeFailure("PZ0514", f"{item.name}: interrupted (its Ray task was cancelled)")
        if kinds & set(_LOST) or ("RayError" in kinds and "RayTaskError" not in kinds):
            return NodeFailure(
                "PZ0710",
                f"{item.name}: the Ray worker running attempt {item.attempt} was lost ({type(exc).__name__}: "
                f"{what})",
                transient=True,
                worker_lost=True,
            )
        return NodeFailure(
            "PZ0512", f"internal error running '{item.name}' on Ray: {type(exc).__name__}: {what}"
        )


class _FanOut:
    """One attempt of a partitioned load: its partitions' tasks, as many at once as its lease of the
    instance's slots allows; `done` once."""

    def __init__(
        self,
        backend: RayBackend,
        item: Attempt,
        done: Done,
        parts: list[Partition],
        tier: Tier,
        lease: ReadLease,
    ):
        self.backend = backend
        self.item = item
        self.done = done
        self.parts = parts
        self.tier = tier
        self.lease = lease
        self.limit = lease.width
        node = item.planned.node
        assert isinstance(node, SourceLoadNode)
        self.node = node
        self.pending: deque[Partition] = deque()
        self.landed: dict[int, TableManifest] = {}
        self.failed: dict[int, NodeFailure] = {}
        self.running = 0
        self.finished = False  # `done` was called (exactly once)
        self.lock = threading.Lock()

    def start(self) -> None:
        for part in self.parts:  # landed in an earlier attempt of this run, reading the same slice: kept
            kept = self.backend._landed.kept(self.node.name, part)
            if kept is not None:
                self.landed[part.index] = kept
            else:
                self.pending.append(part)
        self._launch_more()

    def _launch_more(self) -> None:
        while True:
            with self.lock:
                if self.backend._interrupted or not self.pending or self.running >= self.limit:
                    over = self.running == 0 and (not self.pending or self.backend._interrupted)
                    finished = over and not self.finished
                    self.finished = self.finished or finished
                    break
                part = self.pending.popleft()
                self.running += 1
            try:
                task = self.backend._task(self.item, part, self.tier)
            except NodeFailure as failure:
                self._one_ended(part, failure=failure)
                continue
            key = f"{self.item.name}#{part.index}"
            self.backend._launch(key, task, lambda f, p=part: self._task_ended(p, f))  # type: ignore[misc]
        if finished:
            self._finish()

    def _task_ended(self, part: Partition, future: Future[RemoteResult]) -> None:
        try:
            remote = future.result()
        except BaseException as exc:
            self._one_ended(part, failure=self.backend._lost(self.item, exc))
            return
        for note in remote.notes:
            self.backend.ctx.note(note)
        if remote.result.failure is not None:
            self._one_ended(part, failure=remote.result.failure)
        elif not remote.published:
            self._one_ended(part, failure=NodeFailure("PZ0712", f"{self.item.name}: partition not published"))
        else:
            self._one_ended(part, manifest=remote.published[0])

    def _one_ended(
        self, part: Partition, manifest: TableManifest | None = None, failure: NodeFailure | None = None
    ) -> None:
        with self.lock:
            self.running -= 1
            if manifest is not None:
                self.landed[part.index] = manifest
                self.backend._landed.keep(self.node.name, part.index, partition_fingerprint(part), manifest)
            else:
                assert failure is not None
                self.failed[part.index] = failure
        self._launch_more()

    def _finish(self) -> None:
        self.lease.release()  # no partition of this attempt reads any more
        backend, item = self.backend, self.item
        results = [
            PartitionResult(
                p.index,
                self.landed[p.index].rows,
                fingerprint=partition_fingerprint(p),
            )
            if p.index in self.landed
            else PartitionResult(p.index, 0, NodeStatus.FAILED)
            for p in self.parts
        ]
        if self.failed or len(self.landed) < len(self.parts):
            first = self.failed[min(self.failed)] if self.failed else NodeFailure("PZ0514", "interrupted")
            for manifest in self.landed.values():  # landed partitions stay staged: a retry resumes past them
                try:
                    backend._register(manifest)
                except (ReuseUnavailable, OSError, RuntimeError):
                    continue
            failure = dataclasses.replace(first, partitions=tuple(results))
            self.done(AttemptResult(item.name, item.attempt, failure=failure))
            return
        try:
            manifest = backend.root.combine(
                item.run_id,
                self.node.table,
                [self.landed[p.index] for p in self.parts],
                node=self.node.name,
                node_id=self.node.id,
            )
            backend._register(manifest)
        except (ReuseUnavailable, OSError, RuntimeError) as exc:
            failure = NodeFailure(
                "PZ0712",
                backend.cluster.redactor(f"{item.name}: its partitions could not be combined: {exc}"),
                transient=(isinstance(exc, ReuseUnavailable) and exc.transient)
                or is_transient_store_error(exc),
            )
            self.done(AttemptResult(item.name, item.attempt, failure=failure))
            return
        output = NodeOutput(rows=manifest.rows, tier=self.tier, partitions=results)
        self.done(AttemptResult(item.name, item.attempt, output=output))


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
