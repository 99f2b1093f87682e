"""The plan: the selected nodes in order, each annotated with what the plan decided (its delivery guarantee,
notes, a pipeline's storage, whether a load may fan out); its tier, strategy and effective retry policy are
its work item's, read through `PlannedNode`, never copied. Tier conflicts (PZ0312, PZ0313) were refused by
validation already (`compile.tier_gates`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from pipelinez.compile.dag import CompiledDag
from pipelinez.compile.descriptions import node_descriptions
from pipelinez.compile.nodes import CheckNode, Node, PipelineNode, SinkWriteNode, SourceLoadNode
from pipelinez.compile.policy import BreakerPolicy, RetryPolicy, breaker_policy
from pipelinez.compile.work import SinkWriteWork, SourceLoadWork, WorkItem
from pipelinez.connectors.sdk import Capabilities, ReadBounds
from pipelinez.core.diagnostics import Diagnostic
from pipelinez.core.vocabulary import Strategy, Tier
from pipelinez.plan.selection import select_nodes
from pipelinez.plan.streaming import consumers_of, storage


@dataclass(frozen=True)
class PlannedNode:
    """A node as this plan runs it: the node itself (its frozen work item says what it does, read through
    the properties below, never copied) and what the plan decided about it (annotations)."""

    node: Node
    guarantee: str | None = None  # what a sink write's delivery guarantee is, honestly
    note: str | None = None  # what the plan can already tell about this node's run
    stream_into: str | None = None  # a pipeline streamed into this sink write, not stored in staging
    streamed_from: str | None = None  # a sink write reading a streamed pipeline: "pipeline 'x' (file)"
    # nodes of this node's instance at once when the backend caps it below the instance's max_concurrency
    # (Ray: a single-writer instance's nodes run one at a time)
    concurrency_cap: int | None = None
    fans_out: bool = False  # a partitioned load a distributed backend may split into one task per partition

    @property
    def tier(self) -> Tier | None:
        """A source load's or sink write's data-plane tier, decided at compile (`compile.work`)."""
        work = self.node.work if isinstance(self.node, SourceLoadNode | SinkWriteNode) else None
        return work.tier if work is not None else None

    @property
    def strategy(self) -> Strategy | None:
        return self.node.work.strategy if isinstance(self.node, SinkWriteNode) else None

    @property
    def work(self) -> WorkItem:
        """What the node does, resolved at compile (the node's own frozen work item)."""
        node = self.node
        assert isinstance(node, SourceLoadNode | PipelineNode | CheckNode | SinkWriteNode)
        return node.work

    @property
    def retry(self) -> RetryPolicy:
        return self.work.retry

    @property
    def declares_retry(self) -> bool:
        """Retry set below the engine level (a source/sink or dataset/output of its own)."""
        work = self.work
        return work.declares_retry if isinstance(work, SourceLoadWork | SinkWriteWork) else False

    @property
    def connector(self) -> str | None:
        point = self.node.endpoint
        return point.connector if point is not None else None

    @property
    def max_concurrency(self) -> int | None:
        """Nodes (and a partitioned load's reads) against this node's instance at once."""
        if self.concurrency_cap is not None:
            return self.concurrency_cap
        point = self.node.endpoint
        return point.max_concurrency if point is not None else None

    @property
    def bounds(self) -> ReadBounds | None:
        """An incremental load's read bounds for this run."""
        if not isinstance(self.node, SourceLoadNode):
            return None
        bounds = self.node.work.request.bounds
        return bounds if bounds.incremental else None


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
        caps = point.caps
        note = None
        fmt = str(work.request.options.get("format", ""))
        if point.force_universal and fmt in caps.native_only_formats:
            note = (
                f"format {fmt} is native-only: with force_universal this load fails with PZ0312 "
                "when it starts"
            )
        # an incremental load's trim and watermark need the whole table in one DuckDB: never split
        fans_out = caps.partitions and not work.request.bounds.incremental
        return PlannedNode(node, note=note, fans_out=fans_out)
    if isinstance(node, SinkWriteNode):
        return PlannedNode(node, guarantee=_guarantee(node.work.strategy, node.work.endpoint.caps))
    assert isinstance(node, PipelineNode | CheckNode)
    return PlannedNode(node)


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
