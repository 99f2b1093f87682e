"""Did-you-mean suggestions and short renderings of values for messages."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for the closest candidate, or '' when none is close."""
    pool = [c for c in candidates if c != word]
    match = difflib.get_close_matches(word, pool, n=1, cutoff=0.6)
    if not match:
        lowered = {c.lower(): c for c in pool}
        match = [lowered[word.lower()]] if word.lower() in lowered else []
    return f" (did you mean '{match[0]}'?)" if match else ""


def one_of(values: Iterable[Any]) -> str:
    return ", ".join(str(v) for v in values)


def show(value: Any, limit: int = 40) -> str:
    """A value as the user wrote it, shortened: strings quoted, mappings and lists named."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "empty (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def kind_of(value: Any) -> str:
    """'a string ('abc')', 'an integer (3)', 'a list', ... for type errors."""
    if isinstance(value, bool):
        return f"a boolean ({show(value)})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({show(value)})"
    if isinstance(value, str):
        return f"a string ({show(value)})"
    return show(value)


_TYPE_NAMES = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "true or false",
    "object": "a mapping (key: value)",
    "array": "a list",
    "null": "empty",
}


def expected_types(types: Any) -> str:
    names = [types] if isinstance(types, str) else list(types)
    return " or ".join(_TYPE_NAMES.get(str(t), str(t)) for t in names)
