"""project.yml's engine.memory_limit against what a run needs: the process's one DuckDB memory budget
(core/memory_budget.py) is split between the database instances open at once, two at most in a run (staging
and a DuckDB file written in its own instance), and DuckDB needs 32MB for each."""

from __future__ import annotations

from pipelinez.config.model import EngineSpec
from pipelinez.config.positions import Positions
from pipelinez.core.diagnostics import Diagnostic, error
from pipelinez.core.memory_budget import MINIMUM_BYTES, size_bytes


def budget_problems(engine: EngineSpec, positions: Positions | None) -> list[Diagnostic]:
    """PZ0713 when engine.memory_limit is below the minimum budget (the shape check has its syntax)."""
    try:
        total = size_bytes(engine.memory_limit)
    except ValueError:
        return []  # not a size: the schema's pattern reports it (PZ0101)
    if total >= MINIMUM_BYTES:
        return []
    place = positions.place(("engine", "memory_limit"), at="value") if positions is not None else None
    return [
        error(
            "PZ0713",
            f"engine.memory_limit {engine.memory_limit} is below the {MINIMUM_BYTES // 1000**2}MB a run "
            "needs: it is the budget of every DuckDB instance of the process together, and a run may hold "
            "two at once (the staging database and a DuckDB file written in its own instance), 32MB each",
            place=place,
            file=None if place is not None else "project.yml",
            next_step=f"set engine.memory_limit to {MINIMUM_BYTES // 1000**2}MB or more in project.yml "
            "(leave it out for the default: 320MB, or a quarter of the machine's memory where that is less)",
        )
    ]
