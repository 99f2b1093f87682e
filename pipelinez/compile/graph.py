"""Graph helpers: topological order and cycle finding over name -> dependency names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def find_cycle(edges: Mapping[str, Sequence[str]]) -> list[str] | None:
    """One cycle as a path [a, b, ..., a], or None. Deterministic: names visited in sorted order."""
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(edges, white)
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        color[node] = grey
        stack.append(node)
        for dep in sorted(edges.get(node, ())):
            if dep not in color:
                continue
            if color[dep] == grey:
                return [*stack[stack.index(dep) :], dep]
            if color[dep] == white:
                found = visit(dep)
                if found:
                    return found
        stack.pop()
        color[node] = black
        return None

    for name in sorted(edges):
        if color[name] == white:
            cycle = visit(name)
            if cycle:
                return cycle
    return None


def topological_order(edges: Mapping[str, Sequence[str]]) -> list[str]:
    """Dependencies before dependents; ties broken by name so the order is stable. Assumes no cycle."""
    remaining = {n: {d for d in deps if d in edges} for n, deps in edges.items()}
    order: list[str] = []
    ready = sorted(n for n, deps in remaining.items() if not deps)
    dependents: dict[str, list[str]] = {n: [] for n in edges}
    for n, deps in remaining.items():
        for d in deps:
            dependents[d].append(n)
    while ready:
        node = ready.pop(0)
        order.append(node)
        for child in dependents[node]:
            remaining[child].discard(node)
            if not remaining[child]:
                ready.append(child)
        ready.sort()
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
