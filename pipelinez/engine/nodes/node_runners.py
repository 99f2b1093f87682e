"""What each node kind does inside a run. Each runner does one attempt and returns a NodeOutput, or raises
a NodeFailure (classified). Data moves inside DuckDB or as Arrow batches, never row by row in Python."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pipelinez.compile.checks import outcome
from pipelinez.compile.ids import canonical, digest
from pipelinez.compile.nodes import CheckNode, PipelineNode, SinkWriteNode, SourceLoadNode
from pipelinez.compile.sql_inputs import outside_reads
from pipelinez.compile.work import Endpoint
from pipelinez.connectors.sdk import (
    NATIVE,
    Connector,
    DatasetRequest,
    OutputRequest,
    Partition,
)
from pipelinez.connectors.sdk_delivery import DeliveryCheckpoint
from pipelinez.connectors.sdk_feed import ArrowFeed
from pipelinez.connectors.sdk_sql import create_staging_table
from pipelinez.core import duck_catalog, failpoints
from pipelinez.core.diagnostics import ConnectorHostError
from pipelinez.core.sqlnames import quote_ident
from pipelinez.core.vocabulary import CheckSeverity, NodeKind, NodeStatus, Provenance, Strategy, Tier
from pipelinez.engine.nodes.sink_checks import check_target, refuse_duplicate_keys, refuse_null_keys
from pipelinez.engine.nodes.sink_stream import sink_stream
from pipelinez.engine.nodes.streamed import with_query_outcome
from pipelinez.engine.nodes.watermarks import Capture, trim_and_capture
from pipelinez.engine.run.failures import NodeFailure, classify
from pipelinez.engine.staging.staging_store import Reuse, ReuseUnavailable, StagedPart
from pipelinez.engine.state.run_results import PartitionResult
from pipelinez.plan.planner import PlannedNode

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

SINK_BATCH_ROWS = 122_880
PARTITION_WORKERS = (
    4  # parallel partition reads per source load, unless the instance's max_concurrency says less
)


class NodeContext(Protocol):
    """All a runner needs besides its node: the run's id, cursors of the staging database (released when
    done), a way to publish a note. `RunContext` is the local one; a remote worker builds its own around its
    copy of staging."""

    @property
    def run_id(self) -> str: ...

    def cursor(self) -> duckdb.DuckDBPyConnection: ...

    def release(self, cur: duckdb.DuckDBPyConnection) -> None: ...

    def note(self, message: str) -> None: ...

    @property
    def interrupted(self) -> bool: ...


@dataclass
class NodeOutput:
    rows: int = 0
    tier: Tier | None = None
    status: NodeStatus = NodeStatus.SUCCESS
    message: str | None = None
    partitions: list[PartitionResult] | None = None
    batches_committed: int | None = None
    checkpoint: DeliveryCheckpoint | None = None
    provenance: Provenance | None = None  # reused: copied from an earlier run's staging
    reused_from: str | None = None
    watermark: Capture | None = None  # an incremental load's capture


def make_connector(ctx: NodeContext, point: Endpoint) -> Connector:
    try:
        return point.connect(note=ctx.note, run_id=ctx.run_id)
    except ConnectorHostError as exc:
        d = exc.diagnostics[0]
        raise NodeFailure(d.code, d.message) from exc


def _count(cur: duckdb.DuckDBPyConnection, table: str) -> int:
    row = cur.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(row[0]) if row else 0


def _is_empty(cur: duckdb.DuckDBPyConnection, relation: str) -> bool:
    """Whether a table or a streamed pipeline's view has no row; stops at the first row it finds."""
    return cur.execute(f"SELECT 1 FROM {relation} LIMIT 1").fetchone() is None


def _table_exists(cur: duckdb.DuckDBPyConnection, name: str) -> bool:
    """One lookup in staging: never an enumeration that would reach other nodes' attachments."""
    return duck_catalog.table_exists(cur, quote_ident(name))


def ingest_batches(
    cur: duckdb.DuckDBPyConnection,
    batches: Iterable[pa.RecordBatch],
    table: str,
    exists: bool,
    columns: dict[str, str] | None,
    view_name: str,
    compression: str = "auto",
    interrupted: Callable[[], bool] = lambda: False,
) -> None:
    """Stream Arrow record batches into the staging table `table` (unquoted), casting to the contract, in
    one transaction of bounded statements (see ArrowFeed). An interrupt that comes between two statements
    (DuckDB forgets it once its query ended) stops the load before the next one."""
    import pyarrow as pa

    iterator = iter(batches)
    first = next(iterator, None)
    target = quote_ident(table)
    if first is None:
        if not exists:
            if not columns:
                raise NodeFailure(
                    "PZ0505",
                    "the source returned no data and the dataset declares no columns: "
                    "cannot create its staging table",
                )
            cols = ", ".join(f"{quote_ident(c)} {t}" for c, t in columns.items())
            cur.execute(f"CREATE TABLE {target} ({cols})")
        return
    raised: list[BaseException] = []

    def rest() -> Iterator[pa.RecordBatch]:
        # DuckDB pulls the batches: an error the connector raises mid-stream reaches us wrapped in a DuckDB
        # error that lost its class (and is_transient, retry_after). Keep the original to re-raise it.
        try:
            yield from iterator
        except BaseException as exc:
            raised.append(exc)
            raise

    reader = pa.RecordBatchReader.from_batches(first.schema, itertools.chain([first], rest()))
    select = "*"
    if columns:
        missing = [c for c in columns if c not in first.schema.names]
        if missing:
            raise NodeFailure(
                "PZ0505",
                f"columns {', '.join(missing)} of the contract are missing from the data "
                f"(found: {', '.join(first.schema.names)})",
            )
        select = ", ".join(f"CAST({quote_ident(c)} AS {t}) AS {quote_ident(c)}" for c, t in columns.items())
    feed = ArrowFeed(reader, view_name)
    cur.execute("BEGIN TRANSACTION")
    try:
        if not exists:
            cur.register(view_name, first.slice(0, 0))  # (empty_table() fails on extension types)
            try:
                shape = f"SELECT {select} FROM {quote_ident(view_name)}"
                if not create_staging_table(cur, target, shape, compression):
                    cur.execute(f"CREATE TABLE {target} AS {shape} WITH NO DATA")
            finally:
                cur.unregister(view_name)
        feed.insert_into(cur, target, by_name=exists, select=select, before_each=_stop_if(interrupted))
        cur.execute("COMMIT")
    except BaseException:  # any exit: a partition worker reuses this cursor for its next partition
        with contextlib.suppress(Exception):
            cur.execute("ROLLBACK")
        if raised:
            raise raised[0] from None
        raise


def _stop_if(interrupted: Callable[[], bool]) -> Callable[[], None]:
    def check() -> None:
        if interrupted():
            raise NodeFailure("PZ0514", "interrupted while it loaded")

    return check


def run_source_load(
    ctx: NodeContext, planned: PlannedNode, attempt: int, reuse: Reuse | None = None
) -> NodeOutput:
    """Extract the node's dataset into staging. `reuse` (a retry of a load that failed part-way) names the
    partitions that fully landed in the failed run: those whose definition is unchanged are copied from its
    staging, the rest are extracted."""
    node = planned.node
    assert isinstance(node, SourceLoadNode)
    work = node.work
    what = f"source '{node.source}' dataset '{node.dataset}'"
    request = work.request
    cur = ctx.cursor()
    target = quote_ident(node.table)
    connector = None
    part_tables: list[str] = []
    try:
        connector = make_connector(ctx, work.endpoint)
        tier = Tier(connector.source_tier(request))
        cur.execute(f"DROP TABLE IF EXISTS {target}")
        partitions = connector.partitions(request)
        if len(partitions) == 1:
            _land_partition(ctx, connector, cur, request, partitions[0], node.table, tier)
            failpoints.hit("source.landed", node.name)
            capture = capture_watermark(ctx, cur, node.table, request)
            return NodeOutput(rows=_count(cur, target), tier=tier, watermark=capture)
        part_tables = [f"{node.table}__part{p.index}" for p in partitions]
        return _load_partitions(ctx, node, attempt, reuse, cur, partitions, part_tables, tier)
    except _PartitionsFailed as failed:
        drop_quietly(cur, target)
        _EARLIER_ATTEMPTS.keep(ctx.run_id, node.name, failed.results)
        raise dataclasses.replace(
            classify(failed.first, "PZ0505", what), partitions=tuple(failed.results)
        ) from failed.first
    except Exception as exc:
        for table in [node.table, *part_tables]:
            drop_quietly(cur, quote_ident(table))
        raise classify(exc, "PZ0505", what) from exc
    finally:
        if connector:
            connector.close()
        ctx.release(cur)


def _load_partitions(
    ctx: NodeContext,
    node: SourceLoadNode,
    attempt: int,
    reuse: Reuse | None,
    cur: duckdb.DuckDBPyConnection,
    partitions: list[Partition],
    part_tables: list[str],
    tier: Tier,
) -> NodeOutput:
    """Land a partitioned load. Partitions are read in parallel, each landing in its own table (`part_tables`,
    in the order of `partitions`), then combined into the staging table: the first is renamed (no copy), the
    others appended by column name. A partition that landed stays in staging when another fails, so a retry
    can resume past it."""
    work = node.work
    landed = _landed_parts(partitions, reuse)
    if reuse is not None and len(landed) < len(reuse.staged.parts):
        ctx.note(
            f"{len(reuse.staged.parts) - len(landed)} partition(s) of {node.name} that landed in run "
            f"{reuse.staged.run_id} no longer match this run's partitions; reading them again"
        )
    workers = min(len(partitions), max(1, work.endpoint.max_concurrency or PARTITION_WORKERS))
    pool = _Workers(ctx, work.endpoint)
    kept = _EARLIER_ATTEMPTS.take(ctx.run_id, node.name)
    if kept:
        ctx.note(
            f"attempt {attempt} of {node.name} keeps the {len(kept)} partition(s) that landed in its "
            "earlier attempt(s) and reads the others"
        )
    land = _partition_lander(ctx, node, pool, tier, kept, reuse, landed)
    try:
        results = _land_all(land, list(zip(partitions, part_tables, strict=True)), workers)
    finally:
        pool.close()
    target = quote_ident(node.table)
    _combine(cur, target, part_tables)
    failpoints.hit("source.landed", node.name)
    capture = capture_watermark(ctx, cur, node.table, work.request)
    rows = _count(cur, target) if capture is not None else sum(r.rows for r in results)
    return NodeOutput(rows=rows, tier=tier, partitions=results, watermark=capture)


def _partition_lander(
    ctx: NodeContext,
    node: SourceLoadNode,
    pool: _Workers,
    tier: Tier,
    kept: dict[int, PartitionResult],
    reuse: Reuse | None,
    landed: dict[int, StagedPart],
) -> Callable[[tuple[Partition, str]], PartitionResult]:
    """The job that lands one partition into its table, on a worker of `pool`: the table an earlier attempt
    of this run landed (`kept`) when it still holds the same slice and rows, else a copy of the failed run's
    landed partition (`landed`, on a retry), else a fresh extraction."""
    request = node.work.request

    def land(job: tuple[Partition, str]) -> PartitionResult:
        partition, table = job
        fingerprint = partition_fingerprint(partition)
        worker = pool.mine()
        part_cur = worker.cursor
        try:
            earlier = kept.get(partition.index)
            if earlier is not None and earlier.fingerprint == fingerprint:
                rows = _kept_rows(part_cur, table)
                if rows == earlier.rows:
                    return PartitionResult(partition.index, rows, fingerprint=fingerprint)
            if reuse is not None and partition.index in landed:
                rows = _copy_part(ctx, part_cur, reuse, landed[partition.index], table)
                if rows is not None:
                    return PartitionResult(
                        partition.index, rows, fingerprint=fingerprint, provenance=Provenance.REUSED
                    )
            part_cur.execute(f"DROP TABLE IF EXISTS {quote_ident(table)}")
            _land_partition(ctx, worker.connector(), part_cur, request, partition, table, tier)
            failpoints.hit("source.landed", f"{node.name}#{partition.index}")
            return PartitionResult(
                partition.index, _count(part_cur, quote_ident(table)), fingerprint=fingerprint
            )
        except Exception:
            drop_quietly(part_cur, quote_ident(table))
            raise

    return land


class _EarlierAttempts:
    """The partitions that landed in a failed attempt of a partitioned load, kept (in this process) for the
    load's next attempt in the same run: a transient failure of one partition of a thousand re-reads that
    one, not the thousand. Their tables stay in staging when an attempt fails (see run_source_load); the next
    attempt keeps a table only when its partition still reads the same slice (fingerprint) and the table
    still holds the rows recorded, and reads it again otherwise. Taken (and forgotten) by the next attempt."""

    def __init__(self) -> None:
        self._landed: dict[tuple[str, str], dict[int, PartitionResult]] = {}
        self._lock = threading.Lock()

    def keep(self, run_id: str, node: str, results: list[PartitionResult]) -> None:
        landed = {r.index: r for r in results if r.status == NodeStatus.SUCCESS and r.fingerprint}
        with self._lock:
            self._landed[(run_id, node)] = landed

    def take(self, run_id: str, node: str) -> dict[int, PartitionResult]:
        with self._lock:
            return self._landed.pop((run_id, node), {})


_EARLIER_ATTEMPTS = _EarlierAttempts()


def _kept_rows(cur: duckdb.DuckDBPyConnection, table: str) -> int | None:
    """The rows of a partition table an earlier attempt landed; None when it is gone."""
    try:
        return _count(cur, quote_ident(table))
    except Exception:  # dropped meanwhile: read the partition again
        return None


def partition_fingerprint(partition: Partition) -> str:
    """What a partition reads, hashed: a retry reuses a landed partition only for the same slice."""
    return digest(canonical(partition))


class _PartitionsFailed(Exception):
    """Some partitions failed; `results` holds how every partition ended (landed ones keep their tables)."""

    def __init__(self, first: BaseException, results: list[PartitionResult]):
        super().__init__(str(first))
        self.first = first
        self.results = results


def _land_all(
    land: Callable[[tuple[Partition, str]], PartitionResult],
    jobs: list[tuple[Partition, str]],
    workers: int,
) -> list[PartitionResult]:
    """Land every partition (in parallel); when any fails, _PartitionsFailed after all have ended."""
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pz-partition") as pool:
        futures = [pool.submit(land, job) for job in jobs]
        wait(futures)
    results: list[PartitionResult] = []
    first: BaseException | None = None
    for (partition, _table), future in zip(jobs, futures, strict=True):
        exc = future.exception()
        if exc is None:
            results.append(future.result())
        else:
            first = first or exc
            results.append(PartitionResult(partition.index, 0, NodeStatus.FAILED))
    if first is not None:
        raise _PartitionsFailed(first, results)
    return results


def _landed_parts(partitions: list[Partition], reuse: Reuse | None) -> dict[int, StagedPart]:
    """The failed run's landed partitions that read exactly what this run's partition of that index reads."""
    if reuse is None or reuse.whole:
        return {}
    now = {p.index: partition_fingerprint(p) for p in partitions}
    return {p.index: p for p in reuse.staged.parts if now.get(p.index) == p.fingerprint}


def _copy_part(
    ctx: NodeContext, cur: duckdb.DuckDBPyConnection, reuse: Reuse, part: StagedPart, table: str
) -> int | None:
    """Copy one landed partition; None (with a note) when it cannot be reused and must be extracted."""
    staged = reuse.staged
    try:
        rows = reuse.store.copy(cur, staged.run_id, part.table, table)
    except ReuseUnavailable as exc:
        ctx.note(
            f"partition {part.index} of {staged.table} from run {staged.run_id}: {exc}; extracting it again"
        )
        return None
    if rows != part.rows:
        drop_quietly(cur, quote_ident(table))
        ctx.note(
            f"partition {part.index} of {staged.table} from run {staged.run_id}: copied {rows} rows, the run "
            f"recorded {part.rows}; extracting it again"
        )
        return None
    return rows


class _Worker:
    """What one partition worker thread keeps for every partition it takes: a cursor of staging and a
    connector (opened at its first extraction). A thousand small partitions cost a thousand reads, not a
    thousand connections, ATTACHes and catalog lookups as well; the connector may keep state in staging
    (an ATTACH) through the cursor, which lives until the connector is closed."""

    def __init__(self, ctx: NodeContext, point: Endpoint):
        self._ctx, self._point = ctx, point
        self.cursor = ctx.cursor()
        self._connector: Connector | None = None

    def connector(self) -> Connector:
        if self._connector is None:
            self._connector = make_connector(self._ctx, self._point)
        return self._connector

    def close(self) -> None:
        try:
            if self._connector is not None:
                self._connector.close()
        finally:
            self._ctx.release(self.cursor)


class _Workers:
    """The partition workers of one load, one `_Worker` per thread. Each partition first passes the run's
    interrupt gate (`ctx.cursor()` refuses once the run was interrupted), so after Ctrl-C or a fail-fast
    no worker starts another partition; a partition already reading is interrupted through its worker's
    cursor."""

    def __init__(self, ctx: NodeContext, point: Endpoint):
        self._ctx, self._point = ctx, point
        self._local = threading.local()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()

    def mine(self) -> _Worker:
        self._ctx.release(self._ctx.cursor())  # the interrupt gate: PZ0514 once the run was interrupted
        worker: _Worker | None = getattr(self._local, "worker", None)
        if worker is None:
            worker = self._local.worker = _Worker(self._ctx, self._point)
            with self._lock:
                self._all.append(worker)
        return worker

    def close(self) -> None:
        for worker in self._all:
            with contextlib.suppress(Exception):
                worker.close()


COMBINE_CHUNK = 64  # partition tables appended per INSERT when combining


def _combine(cur: duckdb.DuckDBPyConnection, target: str, tables: list[str]) -> None:
    """The partition tables become the staging table, in partition order, in one transaction (one commit
    instead of two per partition): the first is renamed (no copy), the others appended by column name,
    COMBINE_CHUNK tables per INSERT (a UNION ALL BY NAME keeps their order)."""
    cur.execute("BEGIN TRANSACTION")
    try:
        cur.execute(f"ALTER TABLE {quote_ident(tables[0])} RENAME TO {target}")
        rest = tables[1:]
        for start in range(0, len(rest), COMBINE_CHUNK):
            chunk = rest[start : start + COMBINE_CHUNK]
            union = " UNION ALL BY NAME ".join(f"SELECT * FROM {quote_ident(t)}" for t in chunk)
            cur.execute(f"INSERT INTO {target} BY NAME {union}")
            for table in chunk:
                cur.execute(f"DROP TABLE {quote_ident(table)}")
        cur.execute("COMMIT")
    except BaseException:
        cur.execute("ROLLBACK")
        raise


def capture_watermark(
    ctx: NodeContext, cur: duckdb.DuckDBPyConnection, table: str, request: DatasetRequest
) -> Capture | None:
    """An incremental load's staging trimmed to its bounds and its new watermark (see engine.watermarks)."""
    if not request.bounds.incremental:
        return None
    capture = trim_and_capture(cur, table, request.bounds)
    if capture.null_rows:
        ctx.note(
            f"{table}: {capture.null_rows} staged row(s) have a NULL {capture.cursor}; every incremental run "
            "reads such rows again (they cannot be placed against the watermark)"
        )
    return capture


def _land_partition(
    ctx: NodeContext,
    connector: Connector,
    cur: duckdb.DuckDBPyConnection,
    request: DatasetRequest,
    partition: Partition,
    table: str,
    tier: Tier,
) -> None:
    if tier == NATIVE:
        connector.extract_native(cur, request, partition, quote_ident(table))
    else:
        ingest_batches(
            cur,
            connector.extract_batches(request, partition),
            table,
            _table_exists(cur, table),
            request.columns,
            f"__pz_ingest_{table}",
            request.staging_compression,
            lambda: ctx.interrupted,
        )


def run_pipeline(ctx: NodeContext, planned: PlannedNode, attempt: int) -> NodeOutput:
    node = planned.node
    assert isinstance(node, PipelineNode)
    cur = ctx.cursor()
    target = quote_ident(node.name)
    query = node.sql.rstrip().rstrip(";")
    try:
        failpoints.hit("pipeline.start", node.name)
        refuse_outside_reads(cur, node.sql, node.work.external_access, f"pipeline '{node.name}'")
        if planned.stream_into:  # its one sink write reads the query itself: computed once, while written
            cur.execute(f"CREATE OR REPLACE VIEW {target} AS {query}")
            return NodeOutput(message=f"streamed into {planned.stream_into}, not stored in staging")
        if node.work.view:  # materialized: view: its readers (checks, pipelines, sink writes) run the query
            cur.execute(f"CREATE OR REPLACE VIEW {target} AS {query}")
            return NodeOutput(message="a view in staging (materialized: view)")
        cur.execute(f"DROP TABLE IF EXISTS {target}")
        row = cur.execute(f"CREATE TABLE {target} AS {query}").fetchone()
        rows = int(row[0]) if row else _count(cur, target)
        return NodeOutput(rows=rows)
    except Exception as exc:
        if not planned.stream_into and not node.work.view:
            drop_quietly(cur, target)
        raise classify(exc, "PZ0507", f"pipeline '{node.name}' ({node.place.file})") from exc
    finally:
        ctx.release(cur)


def run_check(ctx: NodeContext, planned: PlannedNode, attempt: int) -> NodeOutput:
    node = planned.node
    assert isinstance(node, CheckNode) and node.check is not None
    cur = ctx.cursor()
    try:
        refuse_outside_reads(cur, node.sql, node.work.external_access, f"check '{node.check.name}'")
        row = cur.execute(node.sql).fetchone()
    except Exception as exc:
        raise classify(exc, "PZ0508", f"check '{node.check.name}' on '{node.target}'") from exc
    finally:
        ctx.release(cur)
    failing, observed = (int(row[0] or 0), row[1]) if row else (0, None)
    result = outcome(node.check, node.target, failing, None if observed is None else str(observed))
    if not result.failed:
        return NodeOutput(rows=result.rows)
    if result.severity == CheckSeverity.WARN:
        return NodeOutput(rows=result.rows, status=NodeStatus.WARN, message=result.message)
    raise NodeFailure("PZ0508", result.message, rows=result.rows)


def refuse_outside_reads(cur: duckdb.DuckDBPyConnection, sql: str, allowed: bool, what: str) -> None:
    """The run's own guard (validate refused the same SQL with its secrets masked): a query reads only its
    inputs unless the project set engine.external_access."""
    reads = [] if allowed else outside_reads(cur, sql, prescan=False)  # one parse: the run never skips it
    if reads:
        raise NodeFailure("PZ0413", f"{what} reads {reads[0].what}, not one of its inputs; nothing ran")


def run_sink_write(
    ctx: NodeContext, planned: PlannedNode, attempt: int, resume: DeliveryCheckpoint | None = None
) -> NodeOutput:
    node = planned.node
    assert isinstance(node, SinkWriteNode)
    work = node.work
    what = f"sink '{node.sink}' output '{node.output}'"
    request = dataclasses.replace(work.request, run_id=ctx.run_id, resume_from=resume)
    if work.view_sql:
        return _write_view(ctx, node, request, what)
    source = quote_ident(node.pipeline)
    cur = ctx.cursor()
    connector = None
    try:
        if request.strategy == Strategy.REPLACE and not request.allow_empty and _is_empty(cur, source):
            raise NodeFailure(
                "PZ0509",
                f"{what}: pipeline '{node.pipeline}' returned no rows and a replace would leave the target "
                "empty; nothing was written",
            )
        refuse_null_keys(cur, request, source, what)
        refuse_duplicate_keys(cur, request, source, what)
        connector = make_connector(ctx, work.endpoint)
        check_target(cur, connector, request, source, what)
        with failpoints.scoped(node.name):
            failpoints.hit("sink.write")
            if work.tier == Tier.NATIVE:
                result = connector.write_native(cur, request, source)
            else:
                reader = sink_stream(cur, source, SINK_BATCH_ROWS)
                result = connector.write_batches(request, reader)
            failpoints.hit("sink.committed")
        return NodeOutput(
            rows=result.rows,
            tier=work.tier,
            batches_committed=result.batches_committed,
            checkpoint=result.checkpoint,
        )
    except Exception as exc:
        failure = classify(exc, "PZ0501", what)
        # after an interrupt the query is never computed again: whatever the write's error says, the run stops
        interrupted = ctx.interrupted or failure.code == "PZ0514" or "interrupt" in failure.message.lower()
        if planned.streamed_from and not interrupted:  # the pipeline's query ran here: how did it end?
            raise with_query_outcome(cur, node.pipeline, planned.streamed_from, what, failure) from exc
        raise failure from exc
    finally:
        if connector:
            connector.close()
        ctx.release(cur)


def _write_view(ctx: NodeContext, node: SinkWriteNode, request: OutputRequest, what: str) -> NodeOutput:
    """strategy: view: the target gets a view of the pipeline's SQL over its own tables; no rows move."""
    connector = make_connector(ctx, node.work.endpoint)
    try:
        with failpoints.scoped(node.name):
            failpoints.hit("sink.write")
            connector.write_view(request, node.work.view_sql)
        return NodeOutput(message=f"view {node.name} created or replaced in sink '{node.sink}'")
    except Exception as exc:
        raise classify(exc, "PZ0501", what) from exc
    finally:
        connector.close()


def drop_quietly(cur: duckdb.DuckDBPyConnection, target: str) -> None:
    try:
        cur.execute(f"DROP TABLE IF EXISTS {target}")
    except Exception:  # the staging db itself may be the failure; the table is dropped on the next attempt
        return


RUNNERS = {
    NodeKind.SOURCE_LOAD: run_source_load,
    NodeKind.PIPELINE: run_pipeline,
    NodeKind.CHECK: run_check,
    NodeKind.SINK_WRITE: run_sink_write,
}
