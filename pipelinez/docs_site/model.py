"""The one document the docs page shows: the compiled project as the plan sees it (every source dataset,
pipeline, ephemeral pipeline, check and sink output as a graph node with its panel), column lineage, the run
history and each check's outcomes over time. Built from the plan, tier 4's described tables and the run
artifacts; redacted with the project's secrets before it leaves (the same `Redactor` as every artifact).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import NotRequired, TypedDict

from pipelinez import __version__
from pipelinez.compile.dag import CompiledDag
from pipelinez.compile.described import Described
from pipelinez.compile.lineage import ProjectLineage
from pipelinez.compile.nodes import CheckNode, Node, PipelineNode, SinkWriteNode, SourceLoadNode
from pipelinez.config.doc_blocks import DocBlock, collect_doc_blocks, render_description
from pipelinez.config.model import Project
from pipelinez.core.json_types import JsonObject
from pipelinez.core.state.backend import StateBackendError
from pipelinez.docs_site.history import Timeline, check_history, run_history
from pipelinez.docs_site.layout import layered_layout
from pipelinez.engine.events import utc_now
from pipelinez.engine.run.failures import DEBUG_LOG
from pipelinez.engine.state.shared import backend_for, hydrate
from pipelinez.plan.planner import Plan, PlannedNode

SOURCE, PIPELINE, CHECK, SINK = "source", "pipeline", "check", "sink"


class Column(TypedDict):
    name: str
    type: str
    description: str | None


class Incremental(TypedDict):
    cursor: str
    watermark: str | None
    reads: str


class SourcePanel(TypedDict):
    title: str
    description: str | None
    file: str
    connector: str
    options: JsonObject  # the dataset's connector-owned keys, raw
    columns: list[Column]
    contract: bool
    tier: str | None
    incremental: Incremental | None
    retry: dict[str, object] | None
    staging_table: str


class PipelinePanel(TypedDict):
    title: str
    description: str | None
    file: str
    materialized: str
    sql: str
    sinks: list[str]
    columns: list[Column]
    lineage: JsonObject


class CheckPanel(TypedDict):
    title: str
    description: str | None
    target: str
    type: str
    column: str | None  # a column test's column
    options: JsonObject  # the check's options as written
    severity: str
    where: str | None  # config: the rows checked
    warn_if: str  # config: failure-count thresholds
    error_if: str
    file: str | None
    sql: str


class SinkPanel(TypedDict):
    title: str
    description: str | None
    file: str
    connector: str
    options: JsonObject  # the output's connector-owned keys, raw
    strategy: str
    keys: list[str]
    duplicates: str | None
    guarantee: str | None
    tier: str
    retry: dict[str, object] | None
    pipeline: str
    columns: list[Column]


Panel = SourcePanel | PipelinePanel | CheckPanel | SinkPanel


class GraphNode(TypedDict):
    """One node of the page's graph, with the panel its click opens."""

    id: str
    kind: str  # source | pipeline | check | sink
    label: str
    deps: list[str]
    tags: list[str]
    panel: Panel
    status: NotRequired[str | None]  # in the newest run that recorded it
    layer: NotRequired[int]
    row: NotRequired[int]


@dataclass
class DocsInputs:
    plan: Plan
    described: Described
    lineage: ProjectLineage
    runs: int  # how many runs of the history the page shows

    @cached_property
    def lineage_by_pipeline(self) -> dict[str, JsonObject]:
        return self.lineage.to_dict()

    @cached_property
    def doc_blocks(self) -> dict[str, DocBlock]:
        """The docs/ blocks descriptions' `{{ doc('name') }}` render (tier 2 refused any problem)."""
        return collect_doc_blocks(self.plan.dag.project.doc_files)[0]

    def describe(self, description: str | None) -> str | None:
        """A description as the page shows it: each `{{ doc('name') }}` rendered."""
        return None if description is None else render_description(description, self.doc_blocks)


def _columns(columns: Sequence[tuple[str, str]], docs: Mapping[str, str], inputs: DocsInputs) -> list[Column]:
    return [{"name": c, "type": t, "description": inputs.describe(docs.get(c))} for c, t in columns]


def _retry(planned: PlannedNode | None) -> dict[str, object] | None:
    return planned.retry.to_dict() if planned is not None else None


def _source_panel(node: SourceLoadNode, planned: PlannedNode | None, inputs: DocsInputs) -> SourcePanel:
    project = inputs.plan.dag.project
    source = project.sources[node.source]
    spec = source.datasets[node.dataset]
    bounds = planned.bounds if planned is not None else None
    return {
        "title": f"{node.source}.{node.dataset}",
        "description": inputs.describe(spec.description),
        "file": source.file,
        "connector": source.connector,
        "options": spec.options,
        "columns": _columns(inputs.described.columns.get(node.table, ()), spec.column_docs, inputs),
        "contract": spec.columns is not None,
        "tier": None if planned is None or planned.tier is None else str(planned.tier),
        "incremental": None
        if bounds is None or bounds.cursor is None
        else {"cursor": bounds.cursor, "watermark": bounds.committed, "reads": bounds.describe()},
        "retry": _retry(planned),
        "staging_table": node.table,
    }


def _pipeline_panel(name: str, node: PipelineNode | None, inputs: DocsInputs) -> PipelinePanel:
    project = inputs.plan.dag.project
    source = project.pipelines[name]
    sidecar = source.sidecar
    columns = inputs.described.columns.get(name, ())
    docs = sidecar.column_docs if sidecar is not None else {}
    lineage = inputs.lineage_by_pipeline.get(name, {})
    return {
        "title": name,
        "description": inputs.describe(sidecar.description if sidecar else None),
        "file": source.file,
        "materialized": source.materialized,
        "sql": inputs.described.queries.get(name, "").strip("\n"),  # the lines its sink clauses held
        "sinks": [f"{s}.{o}" for s, o in node.sinks] if node is not None else [],
        "columns": _columns(columns, docs, inputs),
        "lineage": lineage,
    }


def _check_panel(node: CheckNode, inputs: DocsInputs) -> CheckPanel:
    check = node.check
    return {
        "title": node.name,
        "description": inputs.plan.descriptions.get(node.name),
        "target": node.target,
        "type": check.type,
        "column": check.column,
        "options": check.options,
        "severity": check.severity,
        "where": check.where,
        "warn_if": check.warn_if,
        "error_if": check.error_if,
        "file": check.place.file,
        "sql": node.sql,
    }


def _sink_panel(node: SinkWriteNode, planned: PlannedNode | None, inputs: DocsInputs) -> SinkPanel:
    project = inputs.plan.dag.project
    sink = project.sinks[node.sink]
    spec = sink.outputs.get(node.output)
    request = node.work.request
    return {
        "title": f"{node.sink}.{node.output}",
        "description": inputs.describe(spec.description if spec is not None else None),
        "file": sink.file,
        "connector": sink.connector,
        "options": spec.options if spec is not None else {},
        "strategy": str(request.strategy),
        "keys": list(request.keys),
        "duplicates": node.work.duplicates,
        "guarantee": planned.guarantee if planned is not None else None,
        "tier": str(node.work.tier),
        "retry": _retry(planned),
        "pipeline": node.pipeline,
        "columns": _columns(
            inputs.described.columns.get(node.pipeline, ()), _column_docs(project, node), inputs
        ),
    }


def _column_docs(project: Project, node: SinkWriteNode) -> Mapping[str, str]:
    """An output's columns are its pipeline's: their docs are the pipeline sidecar's `columns:`."""
    pipeline = project.pipelines.get(node.pipeline)
    return pipeline.sidecar.column_docs if pipeline is not None and pipeline.sidecar is not None else {}


def _graph_node(node: Node, planned: PlannedNode | None, inputs: DocsInputs) -> GraphNode:
    deps = list(node.deps)
    panel: Panel
    if isinstance(node, SourceLoadNode):
        kind, label, panel = SOURCE, f"{node.source}.{node.dataset}", _source_panel(node, planned, inputs)
    elif isinstance(node, PipelineNode):
        reads = list(inputs.described.reads.get(node.name, deps))
        deps = reads + [
            d for d in deps if d not in reads and isinstance(inputs.plan.dag.nodes.get(d), CheckNode)
        ]
        kind, label, panel = PIPELINE, node.name, _pipeline_panel(node.name, node, inputs)
    elif isinstance(node, CheckNode):
        kind, label, panel = CHECK, node.name, _check_panel(node, inputs)
    else:
        assert isinstance(node, SinkWriteNode)
        kind, label, panel = SINK, f"{node.sink}.{node.output}", _sink_panel(node, planned, inputs)
    return {
        "id": node.name,
        "kind": kind,
        "label": label,
        "deps": deps,
        "tags": list(node.tags),
        "panel": panel,
    }


def _ephemeral_node(name: str, inputs: DocsInputs) -> GraphNode:
    pipeline = inputs.plan.dag.project.pipelines[name]
    return {
        "id": name,
        "kind": PIPELINE,
        "label": name,
        "deps": list(inputs.described.reads.get(name, ())),
        "tags": list(pipeline.tags),
        "panel": _pipeline_panel(name, None, inputs),
    }


def _pull_runs(dag: CompiledDag) -> None:
    """The runs other workers recorded in a shared state backend, into .pz/runs (the timeline reads them);
    a backend that cannot be reached leaves the site with the runs made here."""
    if not dag.state:
        return
    backend = backend_for(dag.project, dag.state)
    try:
        hydrate(backend, dag.project.state_dir)
    except (StateBackendError, OSError) as exc:
        DEBUG_LOG.info("the docs site shows only local runs: %s", exc)
    finally:
        backend.close()


def docs_document(inputs: DocsInputs) -> JsonObject:
    dag = inputs.plan.dag
    planned = {p.node.name: p for p in inputs.plan.nodes}
    nodes = [_graph_node(node, planned.get(name), inputs) for name, node in dag.nodes.items()]
    nodes += [
        _ephemeral_node(name, inputs) for name in sorted(inputs.described.ephemeral) if name not in dag.nodes
    ]
    deps = {n["id"]: n["deps"] for n in nodes}
    _pull_runs(dag)
    runs = run_history(
        dag.project.state_dir, {name: node.deps for name, node in dag.nodes.items()}, inputs.runs
    )
    last = _last_status(runs)
    positions = layered_layout(deps)
    for node in nodes:
        node["status"] = last.get(node["id"])
        node["layer"], node["row"] = positions[node["id"]]
    document: JsonObject = dag.redactor.deep(
        {
            "project": _project(dag.project),
            "nodes": nodes,
            "runs": runs,
            "checks": check_history(runs),
        }
    )
    return document


def _project(project: Project) -> JsonObject:
    return {
        "name": project.name,
        "generated_at": utc_now(),
        "pz_version": __version__,
        "root": str(Path(project.root).name),
    }


def _last_status(runs: Sequence[Timeline]) -> dict[str, str]:
    """Each node's status in the newest run that recorded it."""
    last: dict[str, str] = {}
    for run in runs:  # newest first
        for node in run["nodes"]:
            last.setdefault(node["name"], node["status"])
    return last
