"""Which delivery checkpoints of a failed run a retry of it hands to its sink writes.

A sink write with checkpointed delivery records every batch its destination acknowledged (run_results.json,
node key `checkpoint`). When `pz retry` runs the same node again (same id: same SQL, connection and
options), its first attempt gets that checkpoint as `OutputRequest.resume_from`; the connector skips the
acknowledged batches only when what it would send now still has the same fingerprints.
"""

from __future__ import annotations

from pipelinez.connectors.sdk_delivery import DeliveryCheckpoint
from pipelinez.core.vocabulary import NodeKind, NodeStatus
from pipelinez.engine.state.run_results import RunResults
from pipelinez.plan.planner import Plan


def checkpoints_from(failed: RunResults, plan: Plan) -> dict[str, DeliveryCheckpoint]:
    """Node name -> the checkpoint the failed run recorded for the same node (matched by id), for every
    planned sink write that failed there after some batches were acknowledged."""
    by_id = {
        n.id: n.checkpoint
        for n in failed.nodes
        if n.kind == NodeKind.SINK_WRITE
        and n.status == NodeStatus.FAILED
        and n.checkpoint is not None
        and n.checkpoint.batches
    }
    return {p.node.name: by_id[p.node.id] for p in plan.nodes if p.node.id in by_id}
