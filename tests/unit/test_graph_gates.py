"""The node graph never drops a node: the topological sort raises with what it could not order, and the
write-audit-publish gates of checks (relationships checks pointing anywhere, downstream included) never
close a cycle while still holding every sink write back behind every error check upstream of it."""

from __future__ import annotations

import random

import pytest

from pipelinez.compile.gates import gate_checks
from pipelinez.compile.graph import Unordered, ancestors, find_cycle, ordered_and_left, topological_order


def test_the_topological_sort_raises_with_every_name_it_could_not_order() -> None:
    edges = {"a": [], "b": ["a", "c"], "c": ["b"], "d": ["c"], "e": ["a"]}
    with pytest.raises(Unordered) as err:
        topological_order(edges)
    assert err.value.left == ["b", "c", "d"] and err.value.cycle == ["b", "c", "b"]
    assert "b, c, d" in str(err.value)
    assert ordered_and_left(edges) == (["a", "e"], ["b", "c", "d"])


def test_a_check_pointing_downstream_runs_after_both_sides_and_gates_what_they_feed() -> None:
    """order_items -> orders -> customers; a relationships check on order_items points at orders."""
    deps: dict[str, tuple[str, ...]] = {
        "src": (),
        "order_items": ("src",),
        "orders": ("order_items",),
        "customers": ("orders",),
        "chk_items_to_orders": ("order_items", "orders"),
        "wh.order_items": ("order_items",),
        "wh.orders": ("orders",),
        "wh.customers": ("customers",),
    }
    gated = {"order_items", "orders", "customers", "wh.order_items", "wh.orders", "wh.customers"}
    waits = gate_checks(deps, gated, {"order_items": ["chk_items_to_orders"]})
    assert waits == {
        "wh.order_items": ("order_items", "chk_items_to_orders"),
        "wh.orders": ("orders", "chk_items_to_orders"),  # orders itself runs before the check
        "customers": ("orders", "chk_items_to_orders"),
    }


def _random_project(
    rng: random.Random,
) -> tuple[dict[str, tuple[str, ...]], set[str], dict[str, list[str]]]:
    """Source loads, pipelines reading earlier ones, a sink write per pipeline, and error checks on loads
    and pipelines, some of them relationships checks pointing at any pipeline (downstream ones too)."""
    loads = [f"src{i}" for i in range(rng.randint(1, 3))]
    pipes = [f"p{i}" for i in range(rng.randint(1, 10))]
    deps: dict[str, tuple[str, ...]] = {n: () for n in loads}
    for i, p in enumerate(pipes):
        inputs = loads + pipes[:i]
        deps[p] = tuple(rng.sample(inputs, rng.randint(1, min(3, len(inputs)))))
    gated = set(pipes)
    for p in pipes:
        if rng.random() < 0.7:
            deps[f"w.{p}"] = (p,)
            gated.add(f"w.{p}")
    blocking: dict[str, list[str]] = {}
    for n, table in enumerate(rng.choices(loads + pipes, k=rng.randint(0, 6))):
        check = f"chk{n}_{table}"
        to = rng.choice([table, *pipes])
        deps[check] = (table,) if to == table else (table, to)
        blocking.setdefault(table, []).append(check)
    return deps, gated, blocking


def test_gates_never_close_a_cycle_and_hold_every_sink_write_behind_the_checks_upstream() -> None:
    rng = random.Random(20)
    for _ in range(500):
        deps, gated, blocking = _random_project(rng)
        final = {**deps, **gate_checks(deps, gated, blocking)}
        assert find_cycle(final) is None
        assert sorted(topological_order(final)) == sorted(deps)  # every node ordered, none dropped
        for table, checks in blocking.items():
            for write in (n for n in deps if n.startswith("w.")):
                if table in ancestors(deps, [write]):  # the write's data is built from the checked table
                    assert set(checks) <= ancestors(final, [write]), (write, table, final)
