"""The plan: the selected nodes in order, each with its data-plane tier, strategy, effective retry policy
and the capabilities that limit its delivery guarantee. Tier conflicts (PZ0312, PZ0313) were refused by
validation already (`compile.tier_gates`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from pipelinez.compile.dag import CompiledDag
from pipelinez.compile.descriptions import node_descriptions
from pipelinez.compile.nodes import CheckNode, Node, PipelineNode, SinkWriteNode, SourceLoadNode
from pipelinez.compile.policy import BreakerPolicy, RetryPolicy, breaker_policy
from pipelinez.connectors.sdk import Capabilities, ReadBounds
from pipelinez.core.diagnostics import Diagnostic
from pipelinez.core.vocabulary import Strategy, Tier
from pipelinez.plan.selection import select_nodes
from pipelinez.plan.streaming import consumers_of, storage


@dataclass(frozen=True)
class PlannedNode:
    node: Node
    tier: Tier | None  # for source loads and sink writes
    strategy: Strategy | None
    retry: RetryPolicy
    declares_retry: bool
    max_concurrency: int | None
    guarantee: str | None  # what a sink write's delivery guarantee is, honestly
    connector: str | None = None
    note: str | None = None  # what the plan can already tell about this node's run
    stream_into: str | None = None  # a pipeline streamed into this sink write, not stored in staging
    streamed_from: str | None = None  # a sink write reading a streamed pipeline: "pipeline 'x' (file)"
    bounds: ReadBounds | None = None  # an incremental load's read bounds for this run


@dataclass
class Plan:
    dag: CompiledDag
    nodes: list[PlannedNode] = field(default_factory=list)
    selection: list[str] = field(default_factory=list)
    breaker: BreakerPolicy | None = None  # engine.breaker: one breaker per source/sink instance
    descriptions: dict[str, str] = field(
        default_factory=dict
    )  # node name -> its description (doc() rendered)

    @property
    def names(self) -> list[str]:
        return [p.node.name for p in self.nodes]

    def get(self, name: str) -> PlannedNode:
        return next(p for p in self.nodes if p.node.name == name)


def _guarantee(strategy: Strategy, caps: Capabilities) -> str:
    if strategy == Strategy.VIEW:
        return "effectively-once (the view is created or replaced; no rows move)"
    if strategy == Strategy.REPLACE:
        return (
            "effectively-once (atomic swap)"
            if caps.atomic_replace
            else "effectively-once on success; a failed write may leave a partial target"
        )
    if strategy == Strategy.MERGE:
        return "effectively-once (upsert on keys" + (
            ", one transaction)" if caps.transactional_merge else ")"
        )
    return "at-least-once (append)" + ("; checkpointed delivery" if caps.checkpointed_delivery else "")


def plan_node(node: Node) -> PlannedNode:
    """The node as it will run."""
    if isinstance(node, SourceLoadNode):
        work = node.work
        point = work.endpoint
        caps = point.capabilities()
        note = None
        fmt = str(work.request.options.get("format", ""))
        if point.force_universal and fmt in caps.native_only_formats:
            note = (
                f"format {fmt} is native-only: with force_universal this load fails with PZ0312 "
                "when it starts"
            )
        return PlannedNode(
            node,
            work.tier,
            None,
            work.retry,
            work.declares_retry,
            point.max_concurrency,
            None,
            point.connector,
            note,
            bounds=work.request.bounds if work.request.bounds.incremental else None,
        )
    if isinstance(node, SinkWriteNode):
        sink = node.work
        point = sink.endpoint
        caps = point.capabilities()
        return PlannedNode(
            node,
            sink.tier,
            sink.strategy,
            sink.retry,
            sink.declares_retry,
            point.max_concurrency,
            _guarantee(sink.strategy, caps),
            point.connector,
        )
    assert isinstance(node, PipelineNode | CheckNode)
    return PlannedNode(node, None, None, node.work.retry, False, None, None)


def build_plan(
    dag: CompiledDag, select: Sequence[str] = (), exclude: Sequence[str] = ()
) -> tuple[Plan, list[Diagnostic]]:
    names, diags = select_nodes(dag, select, exclude)
    plan = Plan(
        dag,
        selection=[*select, *(f"--exclude {e}" for e in exclude)] or ["--all"],
        breaker=breaker_policy(dag.project.engine.breaker),
    )
    plan.nodes = [plan_node(dag.nodes[name]) for name in names]
    _decide_storage(plan, names)
    plan.descriptions = node_descriptions(dag.project, {n: dag.nodes[n] for n in names})
    return plan, diags


def plan_named(dag: CompiledDag, names: Sequence[str], selection: Sequence[str]) -> Plan:
    """A plan of exactly `names` (a retry's selection, already closed over ancestors), in dag order."""
    wanted = set(names)
    plan = Plan(dag, selection=list(selection), breaker=breaker_policy(dag.project.engine.breaker))
    plan.nodes = [plan_node(node) for name, node in dag.nodes.items() if name in wanted]
    _decide_storage(plan, wanted)
    plan.descriptions = node_descriptions(dag.project, {n: d for n, d in dag.nodes.items() if n in wanted})
    return plan


def _decide_storage(plan: Plan, planned: Collection[str]) -> None:
    """Every pipeline's storage (streamed into its one replace, or stored, with the reason as its note),
    and each such write told which pipeline it reads as it is computed."""
    readers = consumers_of(plan.dag.nodes)
    streamed: dict[str, str] = {}
    for i, p in enumerate(plan.nodes):
        if isinstance(p.node, PipelineNode):
            kept = storage(p.node, readers[p.node.name], set(planned))
            plan.nodes[i] = dataclasses.replace(p, note=kept.why, stream_into=kept.into)
            if kept.into:
                streamed[kept.into] = f"pipeline '{p.node.name}' ({p.node.place.file})"
    for i, p in enumerate(plan.nodes):
        if p.node.name in streamed:
            plan.nodes[i] = dataclasses.replace(p, streamed_from=streamed[p.node.name])
