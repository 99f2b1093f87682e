"""The plan: the selected nodes in order, each with its data-plane tier, strategy, effective retry policy
and the capabilities that limit its delivery guarantee. Plan-time tier conflicts are PZ0312."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pipelinez.compile.dag import CompiledDag
from pipelinez.compile.nodes import Node, SinkWriteNode, SourceLoadNode
from pipelinez.config.model import RetrySpec
from pipelinez.connectors import registry
from pipelinez.connectors.sdk import NATIVE, UNIVERSAL, Capabilities
from pipelinez.core.diagnostics import ConnectorHostError, Diagnostic, error
from pipelinez.core.vocabulary import DEFAULT_STRATEGY, Strategy, Tier
from pipelinez.plan.policy import RetryPolicy, declares_retry, effective_policy
from pipelinez.plan.selection import select_nodes


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


@dataclass
class Plan:
    dag: CompiledDag
    nodes: list[PlannedNode] = field(default_factory=list)
    selection: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [p.node.name for p in self.nodes]

    def get(self, name: str) -> PlannedNode:
        return next(p for p in self.nodes if p.node.name == name)


def _guarantee(strategy: str, caps: Capabilities) -> str:
    if strategy == "replace":
        return (
            "effectively-once (atomic swap)"
            if caps.atomic_replace
            else "effectively-once on success; a failed write may leave a partial target"
        )
    if strategy == "merge":
        return "effectively-once (upsert on keys" + (
            ", one transaction)" if caps.transactional_merge else ")"
        )
    return "at-least-once (append)" + ("; checkpointed delivery" if caps.checkpointed_delivery else "")


def _tier(caps_tiers: tuple[str, ...], force: bool) -> Tier:
    if force and UNIVERSAL in caps_tiers:
        return UNIVERSAL
    return NATIVE if NATIVE in caps_tiers else UNIVERSAL


def build_plan(
    dag: CompiledDag, select: Sequence[str] = (), exclude: Sequence[str] = ()
) -> tuple[Plan, list[Diagnostic]]:
    names, diags = select_nodes(dag, select, exclude)
    project = dag.project
    engine_retry: RetrySpec = project.engine.retry
    plan = Plan(dag, selection=[*select, *(f"--exclude {e}" for e in exclude)] or ["--all"])
    for name in names:
        node = dag.nodes[name]
        tier = strategy = guarantee = connector = note = None
        max_conc = None
        levels: tuple[RetrySpec | None, ...] = (engine_retry,)
        if isinstance(node, SourceLoadNode | SinkWriteNode):
            spec = (
                project.sources[node.source] if isinstance(node, SourceLoadNode) else project.sinks[node.sink]
            )
            connector = spec.connector
            force = bool(project.engine.force_universal or spec.force_universal)
            try:
                caps = registry.manifest_of(spec.connector).capabilities
            except ConnectorHostError as exc:
                diags += exc.diagnostics
                continue
            levels = (engine_retry, *node.retry)
            max_conc = spec.max_concurrency
            if isinstance(node, SourceLoadNode):
                if force and caps.native_only_source:
                    diags.append(
                        error(
                            "PZ0312",
                            f"source '{node.source}': engine.force_universal needs the "
                            f"universal tier, but connector '{spec.connector}' is "
                            "native-only",
                            file=spec.file,
                            node=name,
                        )
                    )
                tier = _tier(caps.source_tiers, force)
                fmt = str(dag.sources[node.source].blocks.get(node.dataset, {}).get("format", ""))
                if force and fmt in caps.native_only_formats:
                    tier = NATIVE
                    note = (
                        f"format {fmt} is native-only: with force_universal this load fails with PZ0312 "
                        "when it starts"
                    )
            else:
                if force and caps.native_only_sink:
                    diags.append(
                        error(
                            "PZ0312",
                            f"sink '{node.sink}': engine.force_universal needs the "
                            f"universal tier, but connector '{spec.connector}' is "
                            "native-only",
                            file=spec.file,
                            node=name,
                        )
                    )
                out = project.sinks[node.sink].outputs.get(node.output)
                strategy = Strategy(out.strategy) if out else DEFAULT_STRATEGY
                tier = _tier(caps.sink_tiers, force)
                guarantee = _guarantee(strategy, caps)
        plan.nodes.append(
            PlannedNode(
                node,
                tier,
                strategy,
                effective_policy(levels),
                declares_retry(levels[1:]),
                max_conc,
                guarantee,
                connector,
                note,
            )
        )
    return plan, diags
