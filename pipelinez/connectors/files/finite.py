"""JSON has no NaN and no Infinity: a JSON output refuses a result holding them (PZ0519) rather than emit a
file no JSON parser accepts (DuckDB's writer would print bare `NaN`/`Infinity`).

Only floating-point columns are looked at (FLOAT, DOUBLE, and lists/structs/maps holding them), so a result
without any costs nothing. Native: one aggregate over the staged result before the file is written.
Universal: each Arrow batch is checked with vectorised kernels as it streams into the (temp) file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

# a bare NaN/Infinity token in DuckDB's JSON rendering of a nested value (strings are quoted)
_NESTED_TOKEN = r"(^|[\[:,])-?(NaN|Infinity)"


def refusal(column: str) -> PzConnectorError:
    return PzConnectorError(
        f"column {column} holds NaN or Infinity, which JSON cannot represent; nothing was written. Map them "
        f"in the pipeline (e.g. CASE WHEN isnan({column}) OR isinf({column}) THEN NULL ELSE {column} END), "
        "or write the output as parquet",
        code="PZ0519",
    )


def check_staged(cur: duckdb.DuckDBPyConnection, source: str) -> None:
    """PZ0519 when a floating-point column of the staged relation `source` holds NaN or ±Infinity."""
    columns = [
        (str(r[0]), str(r[1]).upper()) for r in cur.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
    ]
    tests: list[tuple[str, str]] = []
    for name, typ in columns:
        col = quote_ident(name)
        if typ in ("FLOAT", "DOUBLE"):
            tests.append((name, f"count_if(isnan({col}) OR isinf({col}))"))
        elif "FLOAT" in typ or "DOUBLE" in typ:
            tests.append((name, f"count_if(regexp_matches(to_json({col})::VARCHAR, '{_NESTED_TOKEN}'))"))
    if not tests:
        return
    row = cur.execute(f"SELECT {', '.join(t for _, t in tests)} FROM {source}").fetchone()
    for (name, _), hits in zip(tests, row or (), strict=False):
        if hits:
            raise refusal(name)


def checked(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """`batches`, each checked for NaN/±Infinity in its floating-point columns (PZ0519 on the first)."""
    for batch in batches:
        for field, column in zip(batch.schema, batch.columns, strict=True):
            if _has_nonfinite(column):
                raise refusal(field.name)
        yield batch


def _has_nonfinite(array: pa.Array) -> bool:
    import pyarrow as pa
    import pyarrow.compute as pc

    typ = array.type
    if pa.types.is_floating(typ):
        return bool(pc.any(pc.invert(pc.is_finite(array))).as_py())
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        return _has_nonfinite(array.flatten())
    if pa.types.is_map(typ):
        return _has_nonfinite(array.keys) or _has_nonfinite(array.items)
    if pa.types.is_struct(typ):
        return any(_has_nonfinite(child) for child in array.flatten())
    return False
