"""`pz ls` and `pz compile`: the nodes a selection matches, and the rendered SQL of its pipelines. Both
read the validated graph only; nothing connects, runs or is written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelinez.compile.nodes import PipelineNode
from pipelinez.core.diagnostics import Diagnostic, PzUsageError, PzValidationError, error
from pipelinez.core.json_types import JsonObject
from pipelinez.core.vocabulary import NodeKind
from pipelinez.engine.inspect.preview import compiled
from pipelinez.plan.selection import match_nodes, nothing_selected
from pipelinez.plan.selectors import RESOURCE_TYPES


@dataclass(frozen=True)
class ListedNode:
    """One node of `pz ls`. `resource_type`: source, pipeline, check or sink (as in `resource_type:`)."""

    name: str
    kind: NodeKind
    tags: tuple[str, ...]
    path: str | None
    depends_on: tuple[str, ...]

    @property
    def resource_type(self) -> str:
        return next(t for t, kind in RESOURCE_TYPES.items() if kind == self.kind)

    def to_dict(self) -> JsonObject:
        return {
            "name": self.name,
            "kind": str(self.kind),
            "resource_type": self.resource_type,
            "tags": list(self.tags),
            "path": self.path,
            "depends_on": list(self.depends_on),
        }


@dataclass(frozen=True)
class Listing:
    nodes: tuple[ListedNode, ...]
    warnings: tuple[Diagnostic, ...] = ()


@dataclass(frozen=True)
class CompiledPipeline:
    """One pipeline of `pz compile`: its query as it runs, refs resolved, secrets masked."""

    name: str
    path: str | None
    sql: str


@dataclass(frozen=True)
class Compiled:
    pipelines: tuple[CompiledPipeline, ...]
    warnings: tuple[Diagnostic, ...] = ()


def _resource_types(types: Sequence[str]) -> set[NodeKind]:
    bad = [t for t in types if t not in RESOURCE_TYPES]
    if bad:
        raise PzUsageError(
            [
                error(
                    "PZ0513",
                    f"--resource-type {bad[0]} is no resource type",
                    next_step=f"use one of {', '.join(RESOURCE_TYPES)}",
                    file="command line",
                )
            ]
        )
    return {RESOURCE_TYPES[t] for t in types}


def _matched(
    root: Path,
    select: Sequence[str],
    exclude: Sequence[str],
    overrides: Mapping[str, str] | None,
    environ: Mapping[str, str] | None,
) -> tuple[Any, set[str], list[Diagnostic]]:
    dag, warnings = compiled(root, overrides, environ)
    chosen, diags = match_nodes(dag, select, exclude)
    errors = [d for d in diags if d.is_error]
    if errors:
        raise PzValidationError([*errors, *warnings])
    return dag, chosen, [*warnings, *diags]


def list_nodes(
    root: Path,
    select: Sequence[str] = (),
    exclude: Sequence[str] = (),
    resource_types: Sequence[str] = (),
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Listing:
    """The nodes the selection matches (no ancestors added back), in dependency order."""
    kinds = _resource_types(resource_types)
    dag, chosen, warnings = _matched(root, select, exclude, overrides, environ)
    listed = tuple(
        ListedNode(name, node.kind, node.tags, node.place.file, node.deps)
        for name, node in dag.nodes.items()
        if name in chosen and (not kinds or node.kind in kinds)
    )
    if not listed:
        warnings.append(nothing_selected())
    return Listing(listed, tuple(warnings))


def compile_sql(
    root: Path,
    select: Sequence[str] = (),
    exclude: Sequence[str] = (),
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Compiled:
    """The rendered query of every selected pipeline (all of them without a selection)."""
    dag, chosen, warnings = _matched(root, select, exclude, overrides, environ)
    pipelines = tuple(
        CompiledPipeline(name, node.place.file, node.display_sql or dag.redactor(node.sql))
        for name, node in dag.nodes.items()
        if name in chosen and isinstance(node, PipelineNode)
    )
    if not pipelines:
        warnings.append(nothing_selected())
    return Compiled(pipelines, tuple(warnings))
