"""A layered left-to-right layout of the graph, computed once when the page is generated (so the browser
only draws): each node's layer is the longest path from a node with no inputs; within a layer nodes are
ordered by the mean row of their inputs (one barycentre pass), which keeps most edges short and straight.
Linear in nodes and edges: 2,000 pipelines lay out in well under a second.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def layered_layout(deps: Mapping[str, Sequence[str]]) -> dict[str, tuple[int, int]]:
    """node -> (layer, row). `deps` lists each node's inputs; inputs not in `deps` are ignored."""
    layer: dict[str, int] = {}
    for start in deps:
        if start in layer:
            continue
        stack: list[tuple[str, bool]] = [(start, False)]
        visiting: set[str] = set()
        while stack:
            name, done = stack.pop()
            if done:
                visiting.discard(name)
                inputs = [layer[d] for d in deps[name] if d in layer]
                layer[name] = max(inputs, default=-1) + 1
                continue
            if name in layer or name in visiting:
                continue  # a cycle cannot be compiled; never loop on one
            visiting.add(name)
            stack.append((name, True))
            stack.extend((d, False) for d in deps[name] if d in deps and d not in layer)
    by_layer: dict[int, list[str]] = {}
    for name in deps:  # the given order (topological) breaks ties
        by_layer.setdefault(layer[name], []).append(name)
    row: dict[str, int] = {}
    for index in sorted(by_layer):
        names = by_layer[index]
        order = {name: i for i, name in enumerate(names)}

        def centre(name: str, order: dict[str, int] = order) -> tuple[float, int]:
            rows = [row[d] for d in deps[name] if d in row]
            return (sum(rows) / len(rows) if rows else float(order[name]), order[name])

        for i, name in enumerate(sorted(names, key=centre)):
            row[name] = i
    return {name: (layer[name], row[name]) for name in deps}
