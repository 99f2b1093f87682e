"""The selector term grammar: `[@][N+]body[+N]`, `method:value`, and what can't be read."""

from __future__ import annotations

import pytest

from pipelinez.core.diagnostics import Diagnostic
from pipelinez.plan.selectors import ALL, Term, parse_term


@pytest.mark.parametrize(
    ("text", "method", "value", "up", "down", "at"),
    [
        ("orders", "name", "orders", None, None, False),
        ("+orders", "name", "orders", ALL, None, False),
        ("orders+", "name", "orders", None, ALL, False),
        ("2+orders+3", "name", "orders", 2, 3, False),
        ("@orders", "name", "orders", None, None, True),
        ("stg_*", "name", "stg_*", None, None, False),
        ("v2", "name", "v2", None, None, False),  # a digit at the end is the name's, not a depth
        ("source:ecom.raw_orders+", "source", "ecom.raw_orders", None, ALL, False),
        ("path:pipelines/marts", "path", "pipelines/marts", None, None, False),
        ("resource_type:check", "resource_type", "check", None, None, False),
        ("1+tag:daily", "tag", "daily", 1, None, False),
    ],
)
def test_terms_parse(text: str, method: str, value: str, up: int | None, down: int | None, at: bool) -> None:
    assert parse_term(text) == Term(text, method, value, up, down, at)


@pytest.mark.parametrize("text", ["+", "@", "color:red", "tag:", "resource_type:model", "@2+x"])
def test_unreadable_terms_are_pz0252(text: str) -> None:
    found = parse_term(text)
    assert isinstance(found, Diagnostic) and found.code == "PZ0252" and found.is_error
