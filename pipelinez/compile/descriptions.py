"""Each node's description as the artifacts carry it (plan JSON, run_results.json), `{{ doc() }}` rendered.

A source load has its dataset's `description:`, a pipeline its sidecar's, a sink write its output's (else
its pipeline's), a check its column's description when it is a dbt-style column test; singular tests and
other checks have none. The docs site shows the same texts, with the column descriptions beside them.
"""

from __future__ import annotations

from collections.abc import Mapping

from pipelinez.compile.nodes import CheckNode, Node, PipelineNode, SinkWriteNode, SourceLoadNode
from pipelinez.config.doc_blocks import DocBlock, collect_doc_blocks, render_description
from pipelinez.config.model import Project


def node_descriptions(project: Project, nodes: Mapping[str, Node]) -> dict[str, str]:
    """name -> description of every node that has one."""
    blocks = collect_doc_blocks(project.doc_files)[0] if project.doc_files else {}
    found: dict[str, str] = {}
    for name, node in nodes.items():
        text = _raw(project, node, nodes)
        if text is not None:
            found[name] = _rendered(text, blocks)
    return found


def _rendered(text: str, blocks: Mapping[str, DocBlock]) -> str:
    return render_description(text, blocks).strip()


def _raw(project: Project, node: Node, nodes: Mapping[str, Node]) -> str | None:
    if isinstance(node, SourceLoadNode):
        source = project.sources.get(node.source)
        dataset = source.datasets.get(node.dataset) if source else None
        return dataset.description if dataset else None
    if isinstance(node, PipelineNode):
        return _pipeline(project, node.name)
    if isinstance(node, SinkWriteNode):
        sink = project.sinks.get(node.sink)
        output = sink.outputs.get(node.output) if sink else None
        if output is not None and output.description is not None:
            return output.description
        return _pipeline(project, node.pipeline)
    if isinstance(node, CheckNode) and node.check.column is not None:
        return _column(project, node, nodes)
    return None


def _pipeline(project: Project, name: str) -> str | None:
    pipeline = project.pipelines.get(name)
    return pipeline.sidecar.description if pipeline and pipeline.sidecar else None


def _column(project: Project, node: CheckNode, nodes: Mapping[str, Node]) -> str | None:
    column = str(node.check.column)
    target = nodes.get(node.target)
    if isinstance(target, SourceLoadNode):
        source = project.sources.get(target.source)
        dataset = source.datasets.get(target.dataset) if source else None
        return dataset.column_docs.get(column) if dataset else None
    pipeline = project.pipelines.get(node.target)
    sidecar = pipeline.sidecar if pipeline else None
    return sidecar.column_docs.get(column) if sidecar else None
