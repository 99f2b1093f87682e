"""A retry's source load: copy the table the failed run staged instead of extracting it again.

The copy is checked, not trusted: its row count must equal what the failed run recorded for the node. A
staging that is gone, a table that cannot be read, or a count that differs falls back to a normal extraction
with a note saying why, so a retry never fails because of the reuse. A load that failed part-way resumes past
the partitions that fully landed (see `partitions.load_partitions`).
"""

from __future__ import annotations

from pipelinez.compile.nodes import SourceLoadNode
from pipelinez.core import failpoints
from pipelinez.core.sqlnames import quote_ident
from pipelinez.core.vocabulary import Provenance
from pipelinez.engine.nodes.landing import NodeContext, NodeOutput, capture_watermark, drop_quietly
from pipelinez.engine.nodes.node_runners import run_source_load
from pipelinez.engine.staging.staging_store import Reuse, ReuseUnavailable
from pipelinez.plan.planner import PlannedNode


def run_reused_source_load(ctx: NodeContext, planned: PlannedNode, attempt: int, reuse: Reuse) -> NodeOutput:
    node = planned.node
    assert isinstance(node, SourceLoadNode)
    if not reuse.whole:
        return run_source_load(ctx, planned, attempt, reuse)
    staged = reuse.staged
    cur = ctx.cursor()
    try:
        try:
            failpoints.hit("reuse.copy", node.name)
            rows = reuse.store.copy(cur, staged.run_id, staged.table, node.table)
        except ReuseUnavailable as exc:
            rows, why = None, str(exc)
        except Exception as exc:  # a retry never fails because of the reuse: whatever broke, extract
            rows, why = None, f"the copy failed ({type(exc).__name__}: {exc})"
        if rows == staged.rows:
            # the failed run staged it with the same bounds (same node id), already trimmed: its watermark is
            # captured again from the copy, the same rows
            capture = capture_watermark(ctx, cur, node.table, node.work.request)
            return NodeOutput(
                rows=rows,
                tier=planned.tier,
                provenance=Provenance.REUSED,
                reused_from=staged.run_id,
                watermark=capture,
            )
        if rows is not None:
            drop_quietly(cur, quote_ident(node.table))
            why = f"the copy has {rows} rows, the run recorded {staged.rows}"
    finally:
        ctx.release(cur)
    ctx.note(f"cannot reuse staged data for {node.name} from run {staged.run_id}: {why}; extracting it again")
    return run_source_load(ctx, planned, attempt)
