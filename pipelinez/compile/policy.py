"""Retry policy cascade: engine default ← project engine.retry ← instance retry ← dataset/output retry.

Each field independently takes the nearest level that sets it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipelinez.config.model import RetrySpec
from pipelinez.core.durations import format_duration


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int
    base_delay: float
    max_delay: float

    def render(self) -> str:
        return (
            f"max_attempts {self.max_attempts}, base_delay {format_duration(self.base_delay)}, "
            f"max_delay {format_duration(self.max_delay)}"
        )


ENGINE_DEFAULT = RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=30.0)


def effective_policy(
    levels: Sequence[RetrySpec | None], default: RetryPolicy = ENGINE_DEFAULT
) -> RetryPolicy:
    """`levels` from outermost (project engine.retry) to nearest (dataset/output)."""
    attempts, base, cap = default.max_attempts, default.base_delay, default.max_delay
    for level in levels:
        if level is None:
            continue
        attempts = level.max_attempts if level.max_attempts is not None else attempts
        base = level.base_delay if level.base_delay is not None else base
        cap = level.max_delay if level.max_delay is not None else cap
    return RetryPolicy(attempts, base, cap)


def declares_retry(levels: Sequence[RetrySpec | None]) -> bool:
    return any(level is not None and level != RetrySpec() for level in levels)
