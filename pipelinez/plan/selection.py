"""Node selection: names, source:<name>, sink:<name>, tag:<t>, with + for ancestors/descendants.

A pipeline name selects the pipeline, its checks and its sink writes (everything its file defines).
After --exclude, the ancestors every selected node needs are always added back: staging is per run.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipelinez.compile.dag import CompiledDag
from pipelinez.compile.graph import ancestors, descendants
from pipelinez.compile.nodes import CheckNode, Node, PipelineNode, SinkWriteNode, SourceLoadNode
from pipelinez.config.suggest import did_you_mean
from pipelinez.core.diagnostics import Diagnostic, error


def _base_matches(term: str, nodes: dict[str, Node]) -> set[str]:
    if term.startswith("source:"):
        name = term.split(":", 1)[1]
        return {n for n, node in nodes.items() if isinstance(node, SourceLoadNode) and node.source == name}
    if term.startswith("sink:"):
        name = term.split(":", 1)[1]
        return {n for n, node in nodes.items() if isinstance(node, SinkWriteNode) and node.sink == name}
    if term.startswith("tag:"):
        tag = term.split(":", 1)[1]
        return {n for n, node in nodes.items() if tag in node.tags}
    found = {term} if term in nodes else set()
    if isinstance(nodes.get(term), PipelineNode):
        found |= {
            n
            for n, node in nodes.items()
            if (isinstance(node, SinkWriteNode) and node.pipeline == term)
            or (isinstance(node, CheckNode) and node.target == term)
        }
    return found


def resolve_selector(selector: str, dag: CompiledDag) -> tuple[set[str], Diagnostic | None]:
    term = selector.strip()
    up, down = term.startswith("+"), term.endswith("+")
    term = term.strip("+")
    base = _base_matches(term, dag.nodes)
    if not base:
        names = list(dag.nodes)
        return set(), error(
            "PZ0221", f"selector '{selector}' matches no node{did_you_mean(term, names)}", file="command line"
        )
    result = set(base)
    if up:
        result |= ancestors(dag.edges, sorted(base))
    if down:
        result |= descendants(dag.edges, sorted(base))
    return result, None


def select_nodes(
    dag: CompiledDag, select: Sequence[str], exclude: Sequence[str]
) -> tuple[list[str], list[Diagnostic]]:
    """The node names to run, in dependency order, and any selector errors."""
    diags: list[Diagnostic] = []
    chosen: set[str] = set()
    terms = [t for s in select for t in s.split() if t != "--all"]
    if not terms:
        chosen = set(dag.nodes)
    for term in terms:
        found, diag = resolve_selector(term, dag)
        chosen |= found
        if diag:
            diags.append(diag)
    for term in (t for s in exclude for t in s.split()):
        found, diag = resolve_selector(term, dag)
        chosen -= found
        if diag:
            diags.append(diag)
    chosen |= ancestors(dag.edges, sorted(chosen))
    if not chosen and not diags:
        diags.append(error("PZ0221", "the selection leaves no node to run", file="command line"))
    return [n for n in dag.nodes if n in chosen], diags
