"""Node selection at dbt parity: the terms of `--select`/`--exclude` (grammar in `plan.selectors`).

Terms separated by spaces (or given to one flag, or the flag repeated) are a union; `a,b` is the
intersection of a and b. `--exclude` terms are taken away. A term that matches nothing is the warning PZ0250,
a selection that leaves nothing is PZ0251 (as dbt: nothing runs, exit 0); a term that can't be read is the
error PZ0252. For a run, the ancestors every selected node needs are always added back: staging is per run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pipelinez.compile.dag import CompiledDag
from pipelinez.compile.graph import ancestors
from pipelinez.config.suggest import did_you_mean
from pipelinez.core.diagnostics import Diagnostic, warning
from pipelinez.plan.selectors import ALL, Term, base_matches, parse_term


def _walk(links: Mapping[str, Sequence[str]], roots: set[str], depth: int | None) -> set[str]:
    """Everything `depth` steps along `links` from `roots` (ALL: every step)."""
    seen: set[str] = set()
    frontier = set(roots)
    step = 0
    while frontier and (depth == ALL or (depth is not None and step < depth)):
        frontier = {nxt for n in frontier for nxt in links.get(n, ()) if nxt not in seen}
        seen |= frontier
        step += 1
    return seen


def _children(edges: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    children: dict[str, list[str]] = {n: [] for n in edges}
    for name, deps in edges.items():
        for dep in deps:
            children.setdefault(dep, []).append(name)
    return children


def _term_nodes(term: Term, dag: CompiledDag) -> set[str]:
    edges = dag.edges
    base = base_matches(term, dag.nodes, dag.project.root)
    result = set(base)
    if term.at:
        below = base | _walk(_children(edges), base, ALL)
        return below | ancestors(edges, sorted(below))
    result |= _walk(edges, base, term.up)
    result |= _walk(_children(edges), base, term.down)
    return result


def _no_match(text: str, dag: CompiledDag) -> Diagnostic:
    bare = text.lstrip("@0123456789+").rstrip("0123456789+")
    hint = did_you_mean(bare, list(dag.nodes)) if ":" not in bare and "," not in bare else ""
    return warning(
        "PZ0250",
        f"selector '{text}' matches no node{hint}",
        next_step="check the name; `pz ls` lists every node",
        file="command line",
    )


def resolve_selector(selector: str, dag: CompiledDag) -> tuple[set[str], list[Diagnostic]]:
    """The nodes one term selects (`a,b`: the nodes both select), and its diagnostics."""
    parts = [parse_term(part) for part in selector.strip().split(",")]
    bad = [p for p in parts if isinstance(p, Diagnostic)]
    if bad:
        return set(), bad
    found: set[str] | None = None
    for part in parts:
        assert isinstance(part, Term)
        nodes = _term_nodes(part, dag)
        found = nodes if found is None else found & nodes
    if not found:
        return set(), [_no_match(selector.strip(), dag)]
    return found, []


def _terms(values: Sequence[str]) -> list[str]:
    return [t for value in values for t in value.split() if t != "--all"]


def match_nodes(
    dag: CompiledDag, select: Sequence[str], exclude: Sequence[str]
) -> tuple[set[str], list[Diagnostic]]:
    """The nodes the terms select, without the ancestors a run adds back (what `pz ls` lists)."""
    diags: list[Diagnostic] = []
    terms = _terms(select)
    chosen: set[str] = set() if terms else set(dag.nodes)
    for term in terms:
        found, found_diags = resolve_selector(term, dag)
        chosen |= found
        diags += found_diags
    for term in _terms(exclude):
        found, found_diags = resolve_selector(term, dag)
        chosen -= found
        diags += found_diags
    return chosen, diags


def nothing_selected() -> Diagnostic:
    return warning(
        "PZ0251",
        "the selection matches no node: nothing to do",
        next_step="check --select/--exclude; `pz ls` lists every node",
        file="command line",
    )


def select_nodes(
    dag: CompiledDag, select: Sequence[str], exclude: Sequence[str]
) -> tuple[list[str], list[Diagnostic]]:
    """The node names to run, in dependency order (ancestors added back), and the selectors' diagnostics."""
    chosen, diags = match_nodes(dag, select, exclude)
    chosen |= ancestors(dag.edges, sorted(chosen))
    if not chosen and not any(d.is_error for d in diags):
        diags.append(nothing_selected())
    return [n for n in dag.nodes if n in chosen], diags
