"""The postgres connector's universal-tier conversion: Arrow batches as ADBC's driver reads them, converted
column by column (pyarrow kernels, never per row) to the Arrow types DuckDB ingests as each column's
canonical type (see `types.py`): decimal strings cast, the driver's wrapped +-infinity sentinels of
date/timestamp turned into DuckDB's, oid reinterpreted as uint32, a wrapped-around timestamp refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pipelinez.connectors.postgres.types import (
    ADBC_DATE_NEG_INF,
    ADBC_DATE_POS_INF,
    ADBC_TS_NEG_INF,
    ADBC_TS_POS_INF,
    DUCK_DATE_NEG_INF,
    DUCK_DATE_POS_INF,
    DUCK_TS_NEG_INF,
    DUCK_TS_POS_INF,
    EARLIEST_PG_TS_US,
    ColumnPlan,
    timetz_arrow_type,
)
from pipelinez.core.diagnostics import PzConnectorError

if TYPE_CHECKING:
    import pyarrow as pa


def convert_column(array: pa.Array, plan: ColumnPlan) -> pa.Array:
    """The ADBC array of one column as the Arrow type DuckDB ingests as the plan's canonical type."""
    import pyarrow as pa
    import pyarrow.compute as pc

    target = plan.canon.arrow()
    if plan.fix == "decimal":
        try:
            return pc.cast(_storage(array), target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise PzConnectorError(
                f"column {plan.name} holds a value {plan.duck} cannot hold (NaN?): {exc}; read it with a "
                "query: that maps it (e.g. NULLIF(col, 'NaN'))",
                code="PZ0505",
            ) from exc
    if plan.fix == "timetz":
        bits = array.cast(pa.int64())
        storage = pa.Array.from_buffers(
            pa.binary(8),
            len(bits),
            [bits.buffers()[0], bits.buffers()[1]],
            null_count=bits.null_count,
            offset=bits.offset,
        )
        return pa.ExtensionArray.from_storage(timetz_arrow_type(), storage)
    if plan.fix in ("date", "ts", "uint32"):
        if plan.canon.is_list:
            fixed = map_list(array, lambda values: _fix_scalar(values, plan.fix, target.value_type))
            if plan.fix == "ts":
                refuse_wrapped_ts(fixed.values, plan.name)
            return fixed
        fixed = _fix_scalar(array, plan.fix, target)
        if plan.fix == "ts":
            refuse_wrapped_ts(fixed, plan.name)
        return fixed
    if array.type == target:
        return array
    if plan.canon.kind == "json" and not plan.canon.is_list and pa.types.is_string(array.type):
        return pa.ExtensionArray.from_storage(target, array)
    return _storage(array).cast(target)


def out_of_range(column: str) -> PzConnectorError:
    return PzConnectorError(
        f"column {column} holds a timestamp after 294247-01-10, the latest the staging database (DuckDB) can "
        "hold (PostgreSQL allows up to 294276 AD); nothing was staged rather than a wrapped-around value. "
        "Read the dataset with a query: that filters those rows or caps the column "
        "(e.g. LEAST(col, '9999-12-31'))",
        code="PZ0518",
    )


def refuse_wrapped_ts(array: pa.Array, column: str) -> None:
    """PZ0518 when a converted timestamp array holds a finite value before PostgreSQL's earliest: a value
    past DuckDB's latest that wrapped around (vectorised: one min over the batch)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ints = array.view(pa.int64())
    finite = pc.if_else(pc.equal(ints, pa.scalar(DUCK_TS_NEG_INF, pa.int64())), None, ints)
    low = pc.min(finite).as_py()
    if low is not None and low < EARLIEST_PG_TS_US:
        raise out_of_range(column)


def _storage(array: pa.Array) -> pa.Array:
    """The storage of an extension array (ADBC's opaque numeric text), lists of them too."""
    import pyarrow as pa

    if isinstance(array, pa.ExtensionArray):
        return array.storage
    if isinstance(array.type, pa.ListType) and isinstance(array.type.value_type, pa.BaseExtensionType):
        return map_list(array, lambda values: values.storage)
    return array


def map_list(array: pa.Array, fn: Callable[[pa.Array], pa.Array]) -> pa.Array:
    import pyarrow as pa

    assert isinstance(array, pa.ListArray)
    values = fn(array.values)
    return pa.ListArray.from_arrays(array.offsets, values, type=pa.list_(values.type), mask=array.is_null())


def _fix_scalar(array: pa.Array, fix: str, target: pa.DataType) -> pa.Array:
    import pyarrow as pa
    import pyarrow.compute as pc

    if fix == "uint32":
        return array.view(pa.uint32())
    if fix == "date":
        ints, pos_in, neg_in, pos_out, neg_out = (
            array.view(pa.int32()),
            ADBC_DATE_POS_INF,
            ADBC_DATE_NEG_INF,
            DUCK_DATE_POS_INF,
            DUCK_DATE_NEG_INF,
        )
    else:
        ints, pos_in, neg_in, pos_out, neg_out = (
            array.view(pa.int64()),
            ADBC_TS_POS_INF,
            ADBC_TS_NEG_INF,
            DUCK_TS_POS_INF,
            DUCK_TS_NEG_INF,
        )
    low = pc.min(ints).as_py()
    if low is not None and low > max(pos_in, neg_in):
        return array if array.type == target else array.cast(target)
    typ = ints.type
    fixed = pc.if_else(pc.equal(ints, pa.scalar(pos_in, typ)), pa.scalar(pos_out, typ), ints)
    fixed = pc.if_else(pc.equal(fixed, pa.scalar(neg_in, typ)), pa.scalar(neg_out, typ), fixed)
    return fixed.view(target)


def convert_batch(batch: pa.RecordBatch, plans: list[ColumnPlan], schema: pa.Schema) -> pa.RecordBatch:
    import pyarrow as pa

    arrays = [convert_column(batch.column(i), plan) for i, plan in enumerate(plans)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def arrow_schema(plans: list[ColumnPlan]) -> pa.Schema:
    import pyarrow as pa

    return pa.schema([pa.field(p.name, p.canon.arrow()) for p in plans])
