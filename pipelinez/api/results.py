"""The typed results of the facade's validate and plan: `ValidationReport`, `RunPlan` and its `PlanNode`s
(read-only views of the plan's `PlannedNode`s, no copies)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipelinez.compile.policy import BreakerPolicy, RetryPolicy
from pipelinez.connectors.sdk import ReadBounds
from pipelinez.core.diagnostics import Diagnostic
from pipelinez.core.json_types import JsonObject
from pipelinez.core.vocabulary import NodeKind, Strategy, Tier

if TYPE_CHECKING:  # the planner: not imported by `pz validate`, whose report is defined here too
    from pipelinez.plan.planner import PlannedNode


@dataclass(frozen=True)
class ValidationReport:
    """A valid project: how many nodes it compiles to, and its warnings."""

    nodes: int
    warnings: tuple[Diagnostic, ...] = ()


@dataclass(frozen=True)
class PlanNode:
    """One node of a plan, in run order: a read-only view of the plan's own node (nothing copied)."""

    planned: PlannedNode
    guarded: bool = False  # engine.breaker is set: the node's instance has a circuit breaker
    description: str | None = None  # its dataset's, pipeline's, output's or column's `description:`

    @staticmethod
    def of(planned: PlannedNode, breaker: bool = False, description: str | None = None) -> PlanNode:
        return PlanNode(planned, breaker, description)

    @property
    def name(self) -> str:
        return self.planned.node.name

    @property
    def id(self) -> str:
        return self.planned.node.id

    @property
    def kind(self) -> NodeKind:
        return NodeKind(self.planned.node.kind)

    @property
    def deps(self) -> tuple[str, ...]:
        return tuple(self.planned.node.deps)

    @property
    def tier(self) -> Tier | None:
        """Source loads and sink writes: native | universal."""
        return self.planned.tier

    @property
    def strategy(self) -> Strategy | None:
        """Sink writes."""
        return self.planned.strategy

    @property
    def connector(self) -> str | None:
        return self.planned.connector

    @property
    def delivery(self) -> str | None:
        """A sink write's delivery guarantee."""
        return self.planned.guarantee

    @property
    def retry(self) -> RetryPolicy | None:
        """The effective policy, for a node whose config declares one."""
        return self.planned.retry if self.planned.declares_retry else None

    @property
    def note(self) -> str | None:
        return self.planned.note

    @property
    def breaker(self) -> str | None:
        """The instance whose circuit breaker guards this node (engine.breaker set)."""
        return self.planned.node.instance if self.guarded else None

    @property
    def incremental(self) -> JsonObject | None:
        """An incremental load: cursor, watermark, next read's bounds."""
        return _incremental(self.planned.bounds)

    def to_dict(self) -> JsonObject:
        """The fields of a `plan_node` line under `--log-format json`."""
        return {
            "name": self.name,
            "id": self.id,
            "kind": self.kind,
            "tier": self.tier,
            "strategy": self.strategy,
            "deps": list(self.deps),
            "delivery": self.delivery,
            "retry": self.retry.to_dict() if self.retry else None,
            "breaker": self.breaker,
            "incremental": self.incremental,
            "description": self.description,
        }


def _incremental(bounds: ReadBounds | None) -> JsonObject | None:
    if bounds is None:
        return None
    return {
        "cursor": bounds.cursor,
        "watermark": bounds.committed,
        "lower": bounds.lower,
        "lower_inclusive": bounds.lower_inclusive,
        "upper": bounds.upper,
        "reads": bounds.describe(),
    }


@dataclass(frozen=True)
class RunPlan:
    """A plan as the facade gives it: the nodes in order, the selection and warnings."""

    nodes: tuple[PlanNode, ...]
    selection: tuple[str, ...]
    warnings: tuple[Diagnostic, ...] = ()
    engine_retry: RetryPolicy | None = None  # project.yml's engine.retry, effective, when it declares one
    breaker: BreakerPolicy | None = None  # engine.breaker, effective, when it declares one

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]
