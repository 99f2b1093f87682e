"""A pipeline streamed into its sink write: its query runs inside that write, so how the query ended is known
only when the write settles, and the pipeline's result follows the query, never the view it created.

On the worker, a failed write learns how the query ends by computing it alone (`with_query_outcome`); on the
coordinator, the executor holds the pipeline's result until its write settles and then sets it from the
write's result (`settle_pipeline`): the write succeeded, so did the query; the write failed, the query's own
outcome decides; the write never computed it (cancelled, skipped, refused), neither did the pipeline.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from pipelinez.core.sqlnames import quote_ident
from pipelinez.core.vocabulary import OK_STATUSES, NodeError, NodeStatus
from pipelinez.engine.run.failures import (
    BUDGET_EXHAUSTED,
    DEBUG_LOG,
    NodeFailure,
    StreamedQuery,
    classify,
    duck_summary,
)
from pipelinez.engine.state.run_results import NodeResult

if TYPE_CHECKING:
    import duckdb


def with_query_outcome(
    cur: duckdb.DuckDBPyConnection, view: str, pipeline: str, what: str, failure: NodeFailure
) -> NodeFailure:
    """A write that read the streamed pipeline `view` failed: compute the query alone, every column, and
    attach how it ended. When it fails too and the write failed as PZ0501, the query is the cause (a cast
    that fails on some row): the failure names the pipeline (PZ0507), as it would had the pipeline been
    stored first. A write refused for its own reason (an empty result, a narrowing) keeps its error."""
    try:
        row = cur.execute(f"SELECT count(*), count(COLUMNS(*)) FROM {quote_ident(view)}").fetchone()
    except Exception as exc:
        cause = classify(exc, "PZ0507", pipeline)
        DEBUG_LOG.info("%s: full message:\n%s", pipeline, exc)
        message = f"{pipeline}: {duck_summary(str(exc))} (streamed into {what}; nothing was written)"
        code = "PZ0507"
        if cause.code == "PZ0714":  # the query alone ran out of its share of the memory budget
            code, message = "PZ0714", f"{message}; {BUDGET_EXHAUSTED}"
        query = StreamedQuery(error=NodeError(code, message, cause.transient))
        if failure.code not in ("PZ0501", "PZ0714"):
            return dataclasses.replace(failure, streamed=query)
        return dataclasses.replace(
            failure,
            code=code,
            message=message,
            transient=cause.transient,
            retry_after=cause.retry_after,
            streamed=query,
        )
    return dataclasses.replace(failure, streamed=StreamedQuery(rows=int(row[0]) if row else 0))


def settle_pipeline(pipeline: NodeResult, write: NodeResult, failure: NodeFailure | None) -> None:
    """Set the held result of a pipeline streamed into `write` from how that write ended."""
    query = failure.streamed if failure is not None else None
    if write.status in OK_STATUSES:
        pipeline.status, pipeline.rows = NodeStatus.SUCCESS, write.rows
    elif query is not None and query.error is None:
        pipeline.status, pipeline.rows = NodeStatus.SUCCESS, query.rows
    elif query is not None:
        pipeline.status, pipeline.rows, pipeline.error = NodeStatus.FAILED, 0, query.error
        pipeline.message = None
    else:
        pipeline.status, pipeline.rows, pipeline.message = NodeStatus.CANCELLED, 0, None
        pipeline.skipped_because = (
            f"streamed into {write.name}, which ended {write.status} without computing its query"
        )
