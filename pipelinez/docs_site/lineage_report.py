"""`pz lineage PIPELINE.COLUMN` and `Project.lineage`: one column's lineage as a report, from the project as
it compiles (tier 4's described tables and sqlglot's column lineage), up to the source datasets' columns and
down to the sink outputs it is written to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelinez.core.diagnostics import Diagnostic, PzError, error
from pipelinez.engine.run import prepare


@dataclass(frozen=True)
class LineageStep:
    """One upstream column of a lineage: how many steps up, the column, whether it traced."""

    depth: int
    column: str  # "<pipeline>.<column>" or "<source>.<dataset>.<column>"
    kind: str  # "pipeline" | "source"
    unresolved: str | None = None  # why this column's own upstream could not be traced


@dataclass(frozen=True)
class ColumnLineageReport:
    column: str  # "<pipeline>.<column>"
    type: str | None
    upstream: tuple[LineageStep, ...]  # depth first
    sources: tuple[str, ...]  # the source datasets' columns it is computed from, in the end
    sinks: tuple[str, ...]  # "<sink>.<output>.<column>": where the pipeline writes it
    unresolved: str | None  # why its own upstream could not be traced
    unresolved_upstream: tuple[str, ...] = ()  # the same, for columns further up


def _unknown_column(
    column: str, pipeline: str, tables: Mapping[str, Any], pipelines: Mapping[str, str]
) -> Diagnostic:
    known = tables.get(pipeline) or next(
        (v for k, v in tables.items() if k.lower() == pipeline.lower()), None
    )
    if "." not in column:
        why = "it is not of the form PIPELINE.COLUMN"
    elif known is None and pipeline.lower() in {p.lower() for p in pipelines}:
        why = (
            f"the columns of pipeline '{pipeline}' are unknown: a dataset it reads has no columns: contract "
            "and no cached schema (warning PZ0406), so tier 4 did not bind it"
        )
    elif known is None:
        why = f"there is no pipeline '{pipeline}'"
    else:
        why = f"pipeline '{pipeline}' has no such column (columns: {', '.join(c for c, _ in known)})"
    return error(
        "PZ0539",
        f"pz lineage '{column}': {why}",
        file="command line",
        next_step="name a pipeline and one of its result columns, e.g. pz lineage orders_enriched.customer",
    )


def column_lineage(
    root: Path, column: str, vars: Mapping[str, str] | None, environ: Mapping[str, str] | None
) -> ColumnLineageReport:
    """Where `column` ("<pipeline>.<column>") comes from; PZ0539 when the project has no such column."""
    from pipelinez.compile.lineage import project_lineage, staging_tables

    the_plan, described, _ = prepare.described_plan(root, overrides=vars, environ=environ, describe=True)
    assert described is not None
    lineage = project_lineage(described, staging_tables(the_plan.dag.nodes))
    pipeline, _, name = column.partition(".")
    found = lineage.of(pipeline, name)
    if found is None:
        raise PzError([_unknown_column(column, pipeline, described.columns, described.queries)])
    types = dict(described.columns.get(found.pipeline, ()))
    steps = tuple(
        LineageStep(depth, str(ref), ref.kind, inner.unresolved if inner else None)
        for depth, ref, inner in lineage.walk_up(found.pipeline, found.column)
    )
    node = the_plan.dag.nodes.get(found.pipeline)
    sinks = getattr(node, "sinks", ())
    return ColumnLineageReport(
        f"{found.pipeline}.{found.column}",
        types.get(found.column),
        steps,
        tuple(str(ref) for ref in lineage.source_columns(found.pipeline, found.column)),
        tuple(f"{sink}.{output}.{found.column}" for sink, output in sinks),
        found.unresolved,
        tuple(f"{s.column}: {s.unresolved}" for s in steps if s.unresolved),
    )
