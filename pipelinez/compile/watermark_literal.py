"""What `{{ watermark(src, ds) }}` renders: a typed DuckDB literal of the cursor column's type.

- the committed watermark when the run has one (`.pz/state.duckdb`, passed in by the caller as the value's
  raw text, DuckDB's `CAST(max(cursor) AS VARCHAR)`: `2024-01-02 03:04:05.123456`, `42`), quoted and cast to
  the cursor's type;
- else the dataset's `start`, cast to the cursor's type;
- else a literal that admits every row: `-infinity` of the cursor's type for date and timestamp cursors, and
  `-inf` as DOUBLE for int, bigint and decimal cursors (no integer or decimal value is below every other, and
  a type's minimum would lose a row equal to it under `>` and overflow under `watermark() - 10`).

Tier 4 binds the pipeline with the very literal the run executes, so both see the same types.
"""

from __future__ import annotations

from pipelinez.core.duck_types import parse_type
from pipelinez.core.sqlnames import quote_literal

# the cursor types "Validation and errors" names (PZ0227), and timestamptz
CURSOR_TYPES = ("int", "bigint", "decimal", "date", "timestamp", "timestamptz")
ZONED = "TIMESTAMP WITH TIME ZONE"  # compared in UTC; its watermark is stored with its zone (+00:00)
_TIME = frozenset({"DATE", "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS", ZONED})
_EXACT = frozenset({"INTEGER", "BIGINT", *_TIME})
ADMITS_EVERY_NUMBER = "CAST('-inf' AS DOUBLE)"


def cursor_type(declared: str) -> str | None:
    """DuckDB's spelling of a declared cursor type when it is one of int, bigint, decimal, date, timestamp
    (in any precision) or timestamptz; None otherwise."""
    try:
        normalized = parse_type(declared)
    except ValueError:
        return None
    if normalized in _EXACT or normalized.startswith("DECIMAL("):
        return normalized
    return None


def watermark_literal(
    duck_type: str | None, committed: str | None = None, start: str | int | float | None = None
) -> str:
    """The SQL text watermark() renders for a cursor of `duck_type` (a `cursor_type` result). An unknown
    type (the cursor is not declared: PZ0227 says so) renders NULL, which still binds."""
    if duck_type is None:
        return "NULL"
    if committed is not None:
        return f"CAST({quote_literal(committed)} AS {duck_type})"
    if start is not None:
        return f"CAST({quote_literal(str(start))} AS {duck_type})"
    if duck_type in _TIME:
        return f"CAST('-infinity' AS {duck_type})"
    return ADMITS_EVERY_NUMBER
