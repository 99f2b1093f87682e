"""Parts of a project file whose errors carry their own code: retry blocks (PZ0121), engine.breaker (PZ0120),
checks (PZ0113) and a sink output's removed `input:` (PZ0112)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pipelinez.config.positions import JsonPath
from pipelinez.core.json_types import JsonObject

REGION_CODES = {"retry": "PZ0121", "breaker": "PZ0120", "check": "PZ0113", "input": "PZ0112"}
_BLOCKS = {"source": "datasets", "sink": "outputs"}
TEST_KEYS = ("tests", "data_tests")  # dbt's spellings of a column's checks


@dataclass(frozen=True)
class Region:
    """A block of a YAML file whose errors are reported together (retry, breaker, check, input)."""

    kind: str  # retry | breaker | check | input
    base: JsonPath  # the retry/breaker block, the checks list, or the input key

    @property
    def code(self) -> str:
        return REGION_CODES[self.kind]


def region_of(kind: str, path: JsonPath) -> Region | None:
    """The region `path` of a `kind` file lies in, if any."""
    if kind == "project":
        if path[:2] in (("engine", "retry"), ("engine", "breaker")):
            return Region(str(path[1]), path[:2])
        return None
    if kind == "sidecar":
        if path[:1] in (("checks",), ("data_tests",)):
            return Region("check", path[:1])
        if len(path) >= 3 and path[0] == "columns" and path[2] in TEST_KEYS:
            return Region("check", path[:3])
        return None
    if kind in _BLOCKS:
        if path[:1] == ("retry",):
            return Region("retry", path[:1])
        if len(path) >= 3 and path[0] == _BLOCKS[kind]:
            inner = path[2]
            if inner == "retry":
                return Region("retry", path[:3])
            if kind == "source" and inner in ("checks", "data_tests"):
                return Region("check", path[:3])
            if kind == "source" and inner == "columns" and len(path) >= 5 and path[4] in TEST_KEYS:
                return Region("check", path[:5])
            if kind == "sink" and inner == "input":
                return Region("input", path[:3])
    return None


def retry_blocks(kind: str, data: JsonObject) -> Iterator[tuple[JsonPath, Any]]:
    """Every `retry:` block of a file, with its path."""
    if kind == "project":
        engine = data.get("engine")
        if isinstance(engine, dict) and "retry" in engine:
            yield ("engine", "retry"), engine["retry"]
        return
    if kind not in _BLOCKS:
        return
    if "retry" in data:
        yield ("retry",), data["retry"]
    yield from _per_entry(kind, data, "retry")


def check_lists(kind: str, data: JsonObject) -> Iterator[tuple[JsonPath, Any]]:
    """Every list of checks of a file, with its path: a sidecar's `checks:` and `data_tests:`, a source
    dataset's `checks:`, and the `tests:`/`data_tests:` of each column of either."""
    if kind == "sidecar":
        for key in ("checks", "data_tests"):
            if key in data:
                yield (key,), data[key]
        yield from column_test_lists((), data.get("columns"))
    elif kind == "source":
        yield from _per_entry(kind, data, "checks")
        yield from _per_entry(kind, data, "data_tests")
        entries = data.get("datasets")
        for name, entry in entries.items() if isinstance(entries, dict) else ():
            if isinstance(entry, dict):
                yield from column_test_lists(("datasets", name), entry.get("columns"))


def column_test_lists(base: JsonPath, columns: Any) -> Iterator[tuple[JsonPath, Any]]:
    """The `tests:`/`data_tests:` lists of each column entry of `columns` (at `base`), with their paths."""
    for column, entry in columns.items() if isinstance(columns, dict) else ():
        for key in TEST_KEYS:
            if isinstance(entry, dict) and key in entry:
                yield (*base, "columns", column, key), entry[key]


def _per_entry(kind: str, data: JsonObject, key: str) -> Iterator[tuple[JsonPath, Any]]:
    block = _BLOCKS[kind]
    entries = data.get(block)
    if not isinstance(entries, dict):
        return
    for name, entry in entries.items():
        if isinstance(entry, dict) and key in entry:
            yield (block, name, key), entry[key]
