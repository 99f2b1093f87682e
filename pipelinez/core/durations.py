"""Durations as written in project files: 500ms, 2s, 5m, 1h, 1d."""

from __future__ import annotations

import re

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")
_FACTORS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
DURATION_PATTERN = r"^\s*\d+(\.\d+)?\s*(ms|s|m|h|d)\s*$"


def parse_duration(text: str) -> float:
    """Seconds in `text`; raises ValueError when it is not a duration."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"'{text}' is not a duration (write e.g. 500ms, 2s, 5m, 1h, 1d)")
    return float(match.group(1)) * _FACTORS[match.group(2)]


def format_duration(seconds: float) -> str:
    for unit in ("d", "h", "m", "s"):
        factor = _FACTORS[unit]
        if seconds >= factor and (seconds / factor).is_integer():
            return f"{int(seconds / factor)}{unit}"
    return f"{round(seconds * 1000)}ms"
