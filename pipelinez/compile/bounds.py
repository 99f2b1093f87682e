"""The read bounds of an incremental dataset for one run, from its spec and its committed watermark.

- lower: the committed watermark minus `lag` (a re-read overlap for late-committing rows); before the first
  commit, `start`; without either, no lower bound (every row).
- upper: windowed reads only: (the committed watermark, else `start`) plus `window`, inclusive.
- the YAML route reads `cursor > lower`; the SQL route keeps the comparison its pipeline wrote (`>` or `>=`).

Nothing here reads a clock, so the bounds, and with them the load node's content-hash id, change only when a
watermark is committed: a retry of a failed run computes the same bounds as the run it finishes.
"""

from __future__ import annotations

import datetime as dt

from pipelinez.compile.incremental import IncrementalSpec
from pipelinez.compile.watermark_bounds import LowerBound
from pipelinez.connectors.sdk import ReadBounds

_DAY = 86400.0


def read_bounds(
    spec: IncrementalSpec, committed: str | None, sql_lower: LowerBound | None = None
) -> ReadBounds:
    """The bounds of the next read of `spec`'s dataset; `committed` is its watermark (None: none yet, or a
    full refresh). `sql_lower`: the SQL route's lower bound, what its comparisons' value sides evaluate to."""
    start = None if spec.start is None else str(spec.start)
    base = committed if committed is not None else start
    lower, inclusive = base, spec.inclusive
    if committed is not None and spec.lag_seconds:
        lower = shift(committed, -spec.lag_seconds, spec.cursor_type)
    if sql_lower is not None:
        lower, inclusive = sql_lower.value, sql_lower.inclusive
    upper = None
    if spec.window_seconds and base is not None:
        upper = shift(base, spec.window_seconds, spec.cursor_type)
    return ReadBounds(
        cursor=spec.cursor,
        cursor_type=spec.cursor_type,
        lower=lower,
        lower_inclusive=inclusive,
        upper=upper,
        committed=committed,
    )


def shift(value: str, seconds: float, cursor_type: str | None) -> str:
    """`value` (a date or timestamp literal's text) moved by `seconds`, in the same text form DuckDB prints.
    Timestamps keep their microseconds (and their offset, for a zoned timestamp)."""
    if cursor_type == "DATE":
        day = dt.date.fromisoformat(value[:10])
        return (day + dt.timedelta(days=round(seconds / _DAY))).isoformat()
    moment = dt.datetime.fromisoformat(value) + dt.timedelta(seconds=seconds)
    return moment.isoformat(sep=" ")
