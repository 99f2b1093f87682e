"""One node's attempt as a remote worker runs it (a Ray task; nothing here imports Ray).

The worker gets a `RemoteTask`: the work item, the staged tables it reads (their manifests), and the staging
root. It opens a fresh DuckDB of its own in a temporary folder (threads and memory_limit as the task's
resources; larger work spills there), makes each input a view over its Parquet, runs the node with the same
runners as the local executor, and publishes what the node staged (a source load's or a pipeline's table)
as Parquet plus a manifest. Everything comes back as data (`RemoteResult`): the attempt's output or its
`NodeFailure`, the notes, the manifests. Failure messages and notes are redacted here, in the worker, so no
secret value travels back or reaches a log; a runner bug is the node's PZ0512, never a task exception.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipelinez.compile.nodes import PipelineNode, SourceLoadNode
from pipelinez.connectors.sdk import Partition
from pipelinez.core import failpoints
from pipelinez.core.diagnostics import PzConfigError
from pipelinez.core.redact import Redactor
from pipelinez.core.sqlnames import quote_ident
from pipelinez.core.vocabulary import NodeStatus, Tier
from pipelinez.engine.nodes.landing import NodeOutput, attempt_tier, drop_quietly, make_connector
from pipelinez.engine.nodes.partitions import LandedParts, land_one
from pipelinez.engine.run.backend import Attempt, AttemptResult, run_attempt
from pipelinez.engine.run.context import close_staging, open_staging
from pipelinez.engine.run.failures import NodeFailure, classify
from pipelinez.engine.staging.manifest import ManifestPartition, TableManifest
from pipelinez.engine.staging.shared_staging import StagingRoot, transient_io
from pipelinez.engine.state.run_results import PartitionResult
from pipelinez.plan.planner import PlannedNode

if TYPE_CHECKING:
    import duckdb


@dataclass(frozen=True)
class StagedInput:
    """A staged table a node reads: the run that staged it and its manifest."""

    run_id: str
    manifest: TableManifest

    @property
    def table(self) -> str:
        return self.manifest.table


@dataclass(frozen=True)
class RemoteTask:
    item: Attempt
    root: StagingRoot
    inputs: tuple[StagedInput, ...]
    threads: int  # DuckDB threads: the task's num_cpus
    memory_limit: str  # DuckDB memory_limit: the task's memory request
    redactor: Redactor
    publish: str | None = None  # the table the node stages (a source load's, a stored pipeline's)
    prelude: PlannedNode | None = None  # a pipeline streamed into this sink write: its view comes first
    failpoints: tuple[tuple[str, str], ...] = ()  # the driver's PZ_FAILPOINTS(_DIR) (tests)
    partition: Partition | None = None  # a source load fanned out: land this one partition only
    tier: Tier | None = None  # ... in the tier its attempt's connector confirmed on the driver

    @property
    def name(self) -> str:
        return self.item.name


@dataclass(frozen=True)
class RemoteResult:
    result: AttemptResult
    notes: tuple[str, ...] = ()
    published: tuple[TableManifest, ...] = ()
    worker: str = ""  # host:pid, for the debug log


def versions() -> dict[str, str]:
    """What the driver and every worker must agree on (the version probe)."""
    import duckdb

    from pipelinez import __version__

    return {
        "pipelinez": __version__,
        "duckdb": str(duckdb.__version__),
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
    }


def published_table(planned: PlannedNode) -> str | None:
    """The staging table a node leaves for its readers: a source load's table, a stored pipeline's."""
    node = planned.node
    if isinstance(node, SourceLoadNode):
        return node.table
    if isinstance(node, PipelineNode) and not planned.stream_into:
        return node.name
    return None


class _WorkerContext:
    """The NodeContext of a worker: its own DuckDB, notes kept to send back."""

    def __init__(self, run_id: str, con: duckdb.DuckDBPyConnection):
        self._run_id = run_id
        self.con = con
        self.notes: list[str] = []
        self.landed: LandedParts[PartitionResult] = LandedParts()  # one attempt per task: nothing earlier

    @property
    def run_id(self) -> str:
        return self._run_id

    def cursor(self) -> duckdb.DuckDBPyConnection:
        return self.con.cursor()

    def release(self, cur: duckdb.DuckDBPyConnection) -> None:
        cur.close()

    def note(self, message: str) -> None:
        self.notes.append(message)

    @property
    def interrupted(self) -> bool:
        return False  # a worker is stopped by cancelling its Ray task, process and all

    def borrow(self, group: str, wanted: int) -> int:
        return 0  # the instance's slots are the driver's: a task reads its load's partitions one at a time

    def give_back(self, group: str, n: int) -> None:
        return None


FAILPOINT_ENV = (failpoints.ENV, failpoints.DIR_ENV)


def driver_failpoints() -> tuple[tuple[str, str], ...]:
    """The failpoints set in the driver's environment, for its tasks (tests)."""
    return tuple((k, os.environ[k]) for k in FAILPOINT_ENV if os.environ.get(k))


@contextmanager
def _failpoints(spec: tuple[tuple[str, str], ...]) -> Iterator[None]:
    """The driver's failpoints for the task's duration (a worker process runs many tasks)."""
    before = {k: os.environ.get(k) for k in FAILPOINT_ENV}
    given = dict(spec)
    for key in FAILPOINT_ENV:
        if key in given:
            os.environ[key] = given[key]
        else:
            os.environ.pop(key, None)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_task(task: RemoteTask) -> RemoteResult:
    """Run one attempt in this process on a fresh DuckDB; never raises for anything the node does."""
    worker = f"{socket.gethostname()}:{os.getpid()}"
    folder = Path(tempfile.mkdtemp(prefix="pz-task-"))
    ctx: _WorkerContext | None = None
    try:
        with _failpoints(task.failpoints):
            con = open_staging(folder / "task.duckdb", task.memory_limit)
            con.execute(f"SET threads = {int(task.threads)}")
            task.root.attach(con)  # an object-store staging: httpfs and its secret, for inputs and publish
            ctx = _WorkerContext(task.item.run_id, con)
            try:
                result, published = _attempt(ctx, task)
            finally:
                close_staging(con)
    except Exception as exc:  # the worker's own DuckDB could not be opened: the node's PZ0512, as data
        message = f"internal error running '{task.name}' on a Ray worker: {type(exc).__name__}: {exc}"
        result = AttemptResult(task.name, task.item.attempt, failure=NodeFailure("PZ0512", message))
        published = ()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    notes = tuple(task.redactor(n) for n in (ctx.notes if ctx else []))
    return RemoteResult(_redacted(result, task.redactor), notes, published, worker)


def _attempt(ctx: _WorkerContext, task: RemoteTask) -> tuple[AttemptResult, tuple[TableManifest, ...]]:
    item = task.item
    cur = ctx.cursor()
    try:
        for staged in task.inputs:
            cur.execute(
                f"CREATE OR REPLACE VIEW {quote_ident(staged.table)} AS "
                f"{task.root.select_sql(staged.run_id, staged.manifest)}"
            )
    finally:
        ctx.release(cur)
    if task.prelude is not None:  # the streamed pipeline's view, read by this write as it is computed
        before = run_attempt(ctx, Attempt(item.run_id, task.prelude, 1))
        if before.failure is not None:
            return AttemptResult(item.name, item.attempt, failure=before.failure), ()
    if task.partition is not None:
        result = _attempt_partition(ctx, item, task.partition, task.tier)
    else:
        result = run_attempt(ctx, item)
    if result.failure is not None:
        return result, _publish_landed_partitions(ctx, task, result.failure)
    if task.publish is None or result.output is None:
        return result, ()
    partitions = tuple(
        ManifestPartition(p.index, p.rows, p.fingerprint) for p in (result.output.partitions or [])
    )
    try:
        manifest = _publish(ctx, task, task.publish, partitions)
    except Exception as exc:
        failure = NodeFailure(
            "PZ0712",
            f"{item.name}: its staged data could not be published under {task.root.location}: "
            f"{type(exc).__name__}: {exc}",
            transient=isinstance(exc, OSError) and transient_io(exc),
        )
        return AttemptResult(item.name, item.attempt, failure=failure), ()
    return result, (manifest,)


def _attempt_partition(
    ctx: _WorkerContext, item: Attempt, partition: Partition, tier: Tier | None
) -> AttemptResult:
    """Land one partition of a fanned-out source load in this worker's DuckDB, in its own table."""
    try:
        output = run_partition(ctx, item.planned, partition, tier)
    except NodeFailure as failure:
        return AttemptResult(item.name, item.attempt, failure=failure)
    except Exception as exc:
        message = f"internal error in source_load '{item.name}': {type(exc).__name__}: {exc}"
        return AttemptResult(item.name, item.attempt, failure=NodeFailure("PZ0512", message))
    return AttemptResult(item.name, item.attempt, output=output)


def run_partition(
    ctx: _WorkerContext, planned: PlannedNode, partition: Partition, given: Tier | None = None
) -> NodeOutput:
    """One partition of a source load, landed as the local executor's partition workers land it."""
    node = planned.node
    assert isinstance(node, SourceLoadNode)
    cur = ctx.cursor()
    connector = None
    try:
        connector = make_connector(ctx, node.work.endpoint)
        tier = given or attempt_tier(connector, node.work)
        landed = land_one(ctx, node, connector, cur, partition, tier)
        return NodeOutput(rows=landed.rows, tier=tier, partitions=[landed])
    except Exception as exc:
        drop_quietly(cur, quote_ident(node.part_table(partition.index)))
        raise classify(exc, "PZ0505", f"source '{node.source}' dataset '{node.dataset}'") from exc
    finally:
        if connector is not None:
            connector.close()
        ctx.release(cur)


def _publish(
    ctx: _WorkerContext, task: RemoteTask, table: str, partitions: tuple[ManifestPartition, ...] = ()
) -> TableManifest:
    node = task.item.planned.node
    cur = ctx.cursor()
    try:
        return task.root.publish(
            cur,
            task.item.run_id,
            table,
            node=node.name,
            node_id=node.id,
            partitions=partitions,
            versions=versions(),
        )
    finally:
        ctx.release(cur)


def _publish_landed_partitions(
    ctx: _WorkerContext, task: RemoteTask, failure: NodeFailure
) -> tuple[TableManifest, ...]:
    """A partitioned load that failed part-way keeps its landed partitions (what a retry resumes past)."""
    node = task.item.planned.node
    if not isinstance(node, SourceLoadNode) or not failure.partitions:
        return ()
    out = []
    for part in failure.partitions:
        if part.status != NodeStatus.SUCCESS:
            continue
        try:
            out.append(_publish(ctx, task, node.part_table(part.index)))
        except Exception:  # not published: the retry extracts that partition again
            continue
    return tuple(out)


def _redacted(result: AttemptResult, redactor: Redactor) -> AttemptResult:
    failure = result.failure
    if failure is not None:
        failure = dataclasses.replace(failure, message=redactor(failure.message))
        return dataclasses.replace(result, failure=failure)
    output = result.output
    if output is not None and output.message:
        output = dataclasses.replace(output, message=redactor(output.message))
        return dataclasses.replace(result, output=output)
    return result


STAGING_PROBLEM = "staging_problem"  # the probe's key: why this node cannot use the staging


def probe(root: StagingRoot | None = None) -> dict[str, str]:
    """The version probe's task body: the versions, and (given the staging) why this node cannot write and
    read it back, if it cannot."""
    found = versions()
    if root is not None:
        try:
            root.check()
        except PzConfigError as exc:
            found[STAGING_PROBLEM] = "; ".join(d.message for d in exc.diagnostics)
        except Exception as exc:
            name = type(exc).__name__
            found[STAGING_PROBLEM] = f"the staging {root.location} cannot be checked: {name}: {exc}"
    return found
