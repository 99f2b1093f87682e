"""What each node kind does inside a run. Each runner does one attempt and returns a NodeOutput, or raises
a NodeFailure (classified). Data moves inside DuckDB or as Arrow batches, never row by row in Python; landing
data is `landing`'s, a partitioned load's partitions are `partitions`'."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from pipelinez.compile.checks import outcome
from pipelinez.compile.nodes import CheckNode, PipelineNode, SinkWriteNode, SourceLoadNode
from pipelinez.compile.sql_inputs import outside_reads
from pipelinez.connectors.sdk import (
    OutputRequest,
)
from pipelinez.connectors.sdk_delivery import DeliveryCheckpoint
from pipelinez.core import failpoints
from pipelinez.core.sqlnames import quote_ident
from pipelinez.core.vocabulary import CheckSeverity, NodeKind, NodeStatus, Strategy, Tier
from pipelinez.engine.nodes.landing import (
    NodeContext,
    NodeOutput,
    attempt_tier,
    capture_watermark,
    count_rows,
    drop_quietly,
    is_empty,
    land_partition,
    make_connector,
)
from pipelinez.engine.nodes.partitions import PartitionsFailed, load_partitions
from pipelinez.engine.nodes.sink_checks import check_target, refuse_duplicate_keys, refuse_null_keys
from pipelinez.engine.nodes.sink_stream import sink_stream
from pipelinez.engine.nodes.streamed import with_query_outcome
from pipelinez.engine.run.failures import NodeFailure, classify
from pipelinez.engine.staging.staging_store import Reuse
from pipelinez.plan.planner import PlannedNode

if TYPE_CHECKING:
    import duckdb

SINK_BATCH_ROWS = 122_880

__all__ = ["RUNNERS", "NodeContext", "NodeOutput", "run_sink_write", "run_source_load"]


def run_source_load(
    ctx: NodeContext, planned: PlannedNode, attempt: int, reuse: Reuse | None = None
) -> NodeOutput:
    """Extract the node's dataset into staging. `reuse` (a retry of a load that failed part-way) names the
    partitions that fully landed in the failed run: those whose definition is unchanged are copied from its
    staging, the rest are extracted (see `partitions.load_partitions`)."""
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
        tier = attempt_tier(connector, work)
        cur.execute(f"DROP TABLE IF EXISTS {target}")
        partitions = connector.partitions(request)
        if len(partitions) == 1:
            land_partition(ctx, connector, cur, request, partitions[0], node.table, tier)
            failpoints.hit("source.landed", node.name)
            capture = capture_watermark(ctx, cur, node.table, request)
            return NodeOutput(rows=count_rows(cur, target), tier=tier, watermark=capture)
        part_tables = [node.part_table(p.index) for p in partitions]
        return load_partitions(ctx, node, attempt, reuse, cur, partitions, tier)
    except PartitionsFailed as failed:  # the landed partitions' tables stay: the next attempt keeps them
        drop_quietly(cur, target)
        raise dataclasses.replace(
            classify(failed.first, "PZ0505", what), partitions=tuple(failed.results)
        ) from failed.first
    except Exception as exc:
        ctx.landed.forget(node.name)
        for table in [node.table, *part_tables]:
            drop_quietly(cur, quote_ident(table))
        raise classify(exc, "PZ0505", what) from exc
    finally:
        if connector:
            connector.close()
        ctx.release(cur)


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
        rows = int(row[0]) if row else count_rows(cur, target)
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
        if request.strategy == Strategy.REPLACE and not request.allow_empty and is_empty(cur, source):
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


RUNNERS = {
    NodeKind.SOURCE_LOAD: run_source_load,
    NodeKind.PIPELINE: run_pipeline,
    NodeKind.CHECK: run_check,
    NodeKind.SINK_WRITE: run_sink_write,
}
