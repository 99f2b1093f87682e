"""Graph helpers: topological order and cycle finding over name -> dependency names."""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence


def find_cycle(edges: Mapping[str, Sequence[str]]) -> list[str] | None:
    """One cycle as a path [a, b, ..., a], or None. Deterministic: names visited in sorted order.
    Iterative (an explicit stack), so a chain of any depth is walked without recursion."""
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(edges, white)
    for root in sorted(edges):
        if color[root] != white:
            continue
        color[root] = grey
        path = [root]
        pending = [iter(sorted(edges.get(root, ())))]
        while pending:
            dep = next(pending[-1], None)
            if dep is None:
                color[path.pop()] = black
                pending.pop()
            elif color.get(dep, black) == grey:
                return [*path[path.index(dep) :], dep]
            elif color.get(dep, black) == white:
                color[dep] = grey
                path.append(dep)
                pending.append(iter(sorted(edges.get(dep, ()))))
    return None


class Unordered(ValueError):
    """Some names could not be ordered: they sit on a cycle or depend on one. Never dropped silently."""

    def __init__(self, left: list[str], cycle: list[str] | None):
        self.left, self.cycle = left, cycle
        shown = " -> ".join(cycle) if cycle else "none found"
        super().__init__(f"{len(left)} node(s) could not be ordered: {', '.join(left)} (cycle: {shown})")


def ordered_and_left(edges: Mapping[str, Sequence[str]]) -> tuple[list[str], list[str]]:
    """(dependencies before dependents, the names left out because they sit on or behind a cycle). Ties
    broken by name so the order is stable. O((nodes + edges) log nodes): the ready names wait in a heap.
    For callers that report the cycle themselves; `topological_order` raises instead."""
    remaining = {n: {d for d in deps if d in edges} for n, deps in edges.items()}
    dependents: dict[str, list[str]] = {n: [] for n in edges}
    for n, deps in remaining.items():
        for d in deps:
            dependents[d].append(n)
    ready = [n for n, deps in remaining.items() if not deps]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        for child in dependents[node]:
            remaining[child].discard(node)
            if not remaining[child]:
                heapq.heappush(ready, child)
    placed = set(order)
    return order, sorted(n for n in edges if n not in placed)


def topological_order(edges: Mapping[str, Sequence[str]]) -> list[str]:
    """Every name, dependencies before dependents, ties broken by name. Raises `Unordered` (with the names
    left and one cycle) when a cycle keeps some names from being ordered: a node is never dropped."""
    order, left = ordered_and_left(edges)
    if left:
        raise Unordered(left, find_cycle({n: edges[n] for n in left}))
    return order


def descendants(edges: Mapping[str, Sequence[str]], roots: Sequence[str]) -> set[str]:
    children: dict[str, list[str]] = {n: [] for n in edges}
    for n, deps in edges.items():
        for d in deps:
            children.setdefault(d, []).append(n)
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen


def ancestors(edges: Mapping[str, Sequence[str]], roots: Sequence[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        for dep in edges.get(todo.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen
