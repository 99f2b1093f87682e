"""Write-audit-publish gates: which nodes wait for which `severity: error` checks, never making a cycle.

Whatever reads a checked table (a pipeline, through `ref()` or `source()`, also via an ephemeral pipeline)
and every sink write of a checked pipeline waits for that table's error-severity checks. A `relationships`
check also reads its `to:` table, and that table may itself be built from the checked one (a check on
`order_items` pointing at `orders`, which reads `order_items`). The check runs after both sides exist, so the
pipelines between them cannot wait for it: the gate moves past each of them to what it feeds (its sink writes
and the pipelines that read it), and so on. Bad data still reaches no sink and no pipeline outside that path
before the check passed, and no gate ever closes a cycle: a gate is added only where the check does not
already depend on the node it would hold back.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from pipelinez.compile.graph import ancestors


def gate_checks(
    deps: Mapping[str, Sequence[str]],
    gated: Collection[str],
    blocking: Mapping[str, Sequence[str]],
) -> dict[str, tuple[str, ...]]:
    """Every gated node's dependencies with the checks it waits for appended (nodes without any left out).

    `deps`: every node's own inputs (no check among them except as a check's own input); `gated`: the nodes
    a gate may hold back (pipelines and sink writes); `blocking`: a checked table -> its
    error-severity checks, in the order they were declared. A node's checks come in the order of its inputs,
    then of their checks, so a project without a check pointing downstream keeps the same dependencies (and
    ids) it always had; moved gates follow."""
    readers: dict[str, list[str]] = {}
    for name, inputs in deps.items():
        if name in gated:
            for dep in inputs:
                readers.setdefault(dep, []).append(name)
    waits: dict[str, set[str]] = {}
    graph = {name: list(inputs) for name, inputs in deps.items()}  # grows with each gate added
    for table, checks in blocking.items():
        for check in checks:
            # a check that reads only its table depends on nothing a reader of that table could be
            upstream = ancestors(graph, [check]) if any(d != table for d in deps[check]) else set()
            for node in _held_back(check, readers.get(table, []), readers, upstream):
                if check not in waits.setdefault(node, set()):
                    waits[node].add(check)
                    graph[node].append(check)
    result: dict[str, tuple[str, ...]] = {}
    for name, held in waits.items():
        first = [c for d in deps[name] for c in blocking.get(d, ()) if c in held]
        moved = sorted(held.difference(first))
        result[name] = tuple(dict.fromkeys([*deps[name], *first, *moved]))
    return result


def _held_back(
    check: str, nodes: Sequence[str], readers: Mapping[str, Sequence[str]], upstream: set[str]
) -> list[str]:
    """The nodes that wait for `check`: each of `nodes`, except one the check itself needs (in `upstream`),
    which hands the gate on to its readers instead. Adding these gates never closes a cycle, and adding them
    leaves the check's own `upstream` as it was."""
    held: list[str] = []
    todo, seen = list(nodes), set(nodes)
    while todo:
        node = todo.pop()
        if node not in upstream:
            held.append(node)
            continue
        for reader in readers.get(node, ()):
            if reader not in seen:
                seen.add(reader)
                todo.append(reader)
    return held
