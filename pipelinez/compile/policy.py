"""Retry policy cascade: engine default ← project engine.retry ← instance retry ← dataset/output retry.

Each field independently takes the nearest level that sets it, and remembers which level that was (what
`pz plan` prints next to each field).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pipelinez.config.model import BreakerSpec, RetrySpec
from pipelinez.core.durations import format_duration

DEFAULT_ORIGIN = "engine default"
_COUNTS = frozenset({"max_attempts", "failure_threshold"})


def _render(fields: dict[str, int | float], origin: Sequence[str] | None) -> str:
    """`max_attempts 3 (engine default), base_delay 1s (...)`: counts as they are, the rest as durations."""
    values = [f"{k} {v if k in _COUNTS else format_duration(v)}" for k, v in fields.items()]
    if origin is not None:
        values = [f"{v} ({o})" for v, o in zip(values, origin, strict=True)]
    return ", ".join(values)


def _with_origins(fields: dict[str, int | float], origin: Sequence[str]) -> dict[str, object]:
    return {**fields, "from": dict(zip(fields, origin, strict=True))}


@dataclass(frozen=True)
class RetryPolicy:
    """How a node is retried: attempts and backoff delays, and where the policy was declared."""

    max_attempts: int
    base_delay: float
    max_delay: float
    # where each field came from (max_attempts, base_delay, max_delay): a level's label; not part of equality
    origin: tuple[str, str, str] = field(default=(DEFAULT_ORIGIN,) * 3, compare=False)

    def fields(self) -> dict[str, int | float]:
        return {"max_attempts": self.max_attempts, "base_delay": self.base_delay, "max_delay": self.max_delay}

    def render(self, origins: bool = False) -> str:
        return _render(self.fields(), self.origin if origins else None)

    def to_dict(self) -> dict[str, object]:
        """The policy with the origin of each field, as `pz plan --log-format json` prints it."""
        return _with_origins(self.fields(), self.origin)


ENGINE_DEFAULT = RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=30.0)

Level = RetrySpec | None | tuple[str, RetrySpec | None]  # a spec, optionally with its label


def effective_policy(levels: Sequence[Level], default: RetryPolicy = ENGINE_DEFAULT) -> RetryPolicy:
    """`levels` from outermost (project engine.retry) to nearest (dataset/output), each optionally labelled
    `(label, spec)` for the origin of the fields it sets."""
    values: list[float] = [default.max_attempts, default.base_delay, default.max_delay]
    origin = list(default.origin)
    for i, entry in enumerate(levels):
        label, level = entry if isinstance(entry, tuple) else (f"level {i + 1}", entry)
        if level is None:
            continue
        for j, value in enumerate((level.max_attempts, level.base_delay, level.max_delay)):
            if value is not None:
                values[j], origin[j] = value, label
    return RetryPolicy(int(values[0]), float(values[1]), float(values[2]), (origin[0], origin[1], origin[2]))


def declares_retry(levels: Sequence[Level]) -> bool:
    specs = (entry[1] if isinstance(entry, tuple) else entry for entry in levels)
    return any(level is not None and level != RetrySpec() for level in specs)


MAX_OPEN_CYCLES = 3  # cool-down cycles a node may wait through on an open breaker before PZ0506
BREAKER_LEVEL = "engine.breaker"


@dataclass(frozen=True)
class BreakerPolicy:
    """engine.breaker, effective: one breaker per source/sink instance follows it."""

    failure_threshold: int
    cool_down: float  # seconds
    max_cycles: int = MAX_OPEN_CYCLES
    origin: tuple[str, str] = field(default=(DEFAULT_ORIGIN,) * 2, compare=False)

    def fields(self) -> dict[str, int | float]:
        return {"failure_threshold": self.failure_threshold, "cool_down": self.cool_down}

    def render(self, origins: bool = False) -> str:
        return _render(self.fields(), self.origin if origins else None)

    def to_dict(self) -> dict[str, object]:
        """The policy with the origin of each field, as `pz plan --log-format json` prints it."""
        return _with_origins(self.fields(), self.origin)


def breaker_policy(spec: BreakerSpec | None) -> BreakerPolicy | None:
    """The effective breaker policy of engine.breaker; None when the project declares no breaker."""
    if spec is None:
        return None
    origin = tuple(
        BREAKER_LEVEL if k in spec.declared else DEFAULT_ORIGIN for k in ("failure_threshold", "cool_down")
    )
    return BreakerPolicy(spec.failure_threshold, spec.cool_down, origin=(origin[0], origin[1]))
