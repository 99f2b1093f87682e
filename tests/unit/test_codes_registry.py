"""The error registry is split into one data module per tier: each holds only its tier's codes, and the
registry is their concatenation, in the order docs/errors.md lists them."""

from __future__ import annotations

from pipelinez.core import codes
from pipelinez.core.codes import connectivity, connectors, host, runtime, semantic, shape, sql


def test_each_tier_module_holds_its_tier_only() -> None:
    modules = [shape, semantic, connectors, sql, runtime, connectivity, host]
    for tier, module in enumerate(modules, start=1):
        found = [c.code for c in module.CODES]
        assert found and all(code.startswith(f"PZ0{tier}") for code in found), module.__name__
    assert tuple(c for m in modules for c in m.CODES) == codes.REGISTRY
    assert len(codes.BY_CODE) == len(codes.REGISTRY)
    assert all(codes.CODE_PATTERN.match(c.code) for c in codes.REGISTRY)
