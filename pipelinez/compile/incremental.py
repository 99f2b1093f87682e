"""Which datasets are read incrementally, and how: the one record both routes (YAML `sync:` and SQL
`watermark()`) resolve to, so the engine never needs to know which route declared a dataset.

The YAML route is built from each dataset's `sync:` block; the SQL route from the watermark() comparisons the
inference finds in pipelines. A dataset has at most one spec (two routes for one dataset are PZ0225).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class IncrementalRoute(StrEnum):
    YAML = "yaml"  # sync: { mode: incremental, cursor, start, window, lag }
    SQL = "sql"  # <cursor> > / >= {{ watermark(src, ds) }} in a pipeline that source()s the dataset


@dataclass(frozen=True)
class IncrementalSpec:
    """One incremental dataset: its cursor and the declared bounds policy. Values are as declared; the engine
    turns them into typed literals with the cursor's type."""

    source: str
    dataset: str
    route: IncrementalRoute
    cursor: str  # the cursor column, as named in the dataset's columns
    cursor_type: str | None  # the contract's DuckDB type for the cursor, when declared
    inclusive: bool = False  # the lower bound admits rows equal to the watermark (`>=`)
    start: str | int | float | None = None  # the watermark before the first commit; None admits every row
    window_seconds: float | None = None  # windowed backfill (YAML only): at most this much per run
    lag_seconds: float | None = None  # re-read this trailing overlap below the watermark
    declared_by: tuple[str, ...] = ()  # SQL route: the pipelines whose watermark() declared it

    @property
    def key(self) -> tuple[str, str]:
        return (self.source, self.dataset)
