"""The postgres sink's column types: the PostgreSQL type a staged column is written as when the sink
creates a table, from its DuckDB type (native tier, `pg_type_for_duckdb`) or its Arrow type (universal
tier, `pg_type_for_arrow`, with the conversion ADBC's binary COPY needs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

from pipelinez.connectors.postgres.arrow_convert import map_list
from pipelinez.connectors.postgres.types import (
    ADBC_DATE_NEG_INF,
    ADBC_DATE_POS_INF,
    DUCK_DATE_NEG_INF,
    DUCK_DATE_POS_INF,
    DUCK_TS_NEG_INF,
    DUCK_TS_POS_INF,
)
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa
    from duckdb.sqltypes import DuckDBPyType

    Conversion: TypeAlias = Callable[[pa.Array], pa.Array]
    Written: TypeAlias = tuple[str, Conversion | None]  # (PostgreSQL type, conversion or None)

_DUCK_TO_PG = {
    "BOOLEAN": "boolean",
    "TINYINT": "smallint",
    "SMALLINT": "smallint",
    "INTEGER": "integer",
    "BIGINT": "bigint",
    "UTINYINT": "smallint",
    "USMALLINT": "integer",
    "UINTEGER": "bigint",
    "FLOAT": "real",
    "DOUBLE": "double precision",
    "VARCHAR": "text",
    "BLOB": "bytea",
    "DATE": "date",
    "TIME": "time",
    "TIME WITH TIME ZONE": "timetz",
    "TIMESTAMP": "timestamp",
    "TIMESTAMP WITH TIME ZONE": "timestamptz",
    "INTERVAL": "interval",
    "UUID": "uuid",
    "JSON": "json",
}
# DuckDB types written through a DuckDB-side cast first: (pg type, DuckDB cast target)
_DUCK_CAST = {
    "HUGEINT": ("numeric(38,0)", "DECIMAL(38,0)"),
    "UHUGEINT": ("numeric(38,0)", "DECIMAL(38,0)"),
    "UBIGINT": ("numeric(20,0)", "DECIMAL(20,0)"),
    "TIMESTAMP_S": ("timestamp", "TIMESTAMP"),
    "TIMESTAMP_MS": ("timestamp", "TIMESTAMP"),
    "TIMESTAMP_NS": ("timestamp", "TIMESTAMP"),
    "TIME_NS": ("time", "TIME"),
    "BIT": ("text", "VARCHAR"),
    "BIGNUM": ("text", "VARCHAR"),
    "VARINT": ("text", "VARCHAR"),
    '"NULL"': ("text", "VARCHAR"),
    "NULL": ("text", "VARCHAR"),
}


def pg_type_for_duckdb(typ: DuckDBPyType) -> tuple[str, str | None]:
    """(PostgreSQL type, DuckDB expression template over `{c}` or None) to write a staged column of
    DuckDB type `typ`: scalars map one to one, lists of scalars to arrays, nested values to json."""
    scalar = _duck_scalar(typ)
    if scalar is not None:
        pg, target = scalar
        return pg, None if target is None else f"CAST({{c}} AS {target})"
    if typ.id in ("list", "array"):
        from duckdb.sqltypes import DuckDBPyType as RuntimeType

        child = dict(typ.children)["child"]
        elem = _duck_scalar(child) if isinstance(child, RuntimeType) else None
        if elem is not None:
            pg, target = elem
            if target is None and typ.id == "list":
                return f"{pg}[]", None
            return f"{pg}[]", f"CAST({{c}} AS {target or str(child)}[])"
    return "json", "to_json({c})"


def _duck_scalar(typ: DuckDBPyType) -> tuple[str, str | None] | None:
    """(PostgreSQL type, DuckDB cast target or None) of a scalar DuckDB type; None for nested types."""
    text = str(typ)
    if text in _DUCK_TO_PG:
        return _DUCK_TO_PG[text], None
    if text in _DUCK_CAST:
        return _DUCK_CAST[text]
    if typ.id == "decimal":
        children = dict(typ.children)
        return f"numeric({children['precision']},{children['scale']})", None
    if typ.id == "enum":
        return "text", "VARCHAR"
    if typ.id in ("list", "array", "struct", "map", "union"):
        return None
    return "text", "VARCHAR"


def pg_type_for_arrow(typ: pa.DataType) -> Written:
    """(PostgreSQL type, conversion or None) to write an Arrow column through ADBC's binary COPY: the
    PostgreSQL type is one whose binary format ADBC writes for the (converted) Arrow type. PzConnectorError
    for types the universal tier cannot write."""
    import pyarrow as pa

    if isinstance(typ, pa.BaseExtensionType):
        return _arrow_extension(typ)
    if pa.types.is_dictionary(typ):
        return _arrow_dictionary(typ)
    found = _arrow_number(typ) or _arrow_text_or_time(typ) or _arrow_list(typ)
    if found is None:
        raise _unwritable(str(typ))
    return found


def _cast_to(target: pa.DataType) -> Conversion:
    return lambda arr: arr.cast(target)


def _arrow_extension(typ: pa.BaseExtensionType) -> Written:
    import pyarrow as pa
    import pyarrow.compute as pc

    name = typ.extension_name
    if name == "arrow.uuid":
        return "uuid", None
    if name == "arrow.json":
        return "json", lambda arr: arr.storage
    if name == "arrow.bool8":
        return "boolean", lambda arr: pc.not_equal(arr.storage, pa.scalar(0, pa.int8()))
    if isinstance(typ, pa.OpaqueType) and typ.vendor_name == "DuckDB" and typ.type_name == "hugeint":
        return "numeric(38,0)", _hugeint_to_decimal
    raise _unwritable(str(typ))


def _arrow_dictionary(typ: pa.DictionaryType) -> Written:
    value_pg, value_conv = pg_type_for_arrow(typ.value_type)

    def decode(arr: pa.Array) -> pa.Array:
        plain = arr.dictionary_decode()
        return value_conv(plain) if value_conv else plain

    return value_pg, decode


def _arrow_number(typ: pa.DataType) -> Written | None:
    """Booleans, integers, floats and decimals; None for any other type."""
    import pyarrow as pa

    if pa.types.is_boolean(typ):
        return "boolean", None
    if pa.types.is_int8(typ) or pa.types.is_uint8(typ):
        return "smallint", _cast_to(pa.int16())
    if pa.types.is_int16(typ):
        return "smallint", None
    if pa.types.is_uint16(typ):
        return "integer", _cast_to(pa.int32())
    if pa.types.is_int32(typ):
        return "integer", None
    if pa.types.is_uint32(typ):
        return "bigint", _cast_to(pa.int64())
    if pa.types.is_int64(typ):
        return "bigint", None
    if pa.types.is_uint64(typ):
        return "numeric(20,0)", _cast_to(pa.decimal128(20, 0))
    if pa.types.is_float16(typ):
        return "real", _cast_to(pa.float32())
    if pa.types.is_float32(typ):
        return "real", None
    if pa.types.is_float64(typ):
        return "double precision", None
    if pa.types.is_decimal128(typ):
        return f"numeric({typ.precision},{max(typ.scale, 0)})", None
    if pa.types.is_decimal256(typ) and typ.precision <= 38:
        return f"numeric({typ.precision},{max(typ.scale, 0)})", _cast_to(
            pa.decimal128(typ.precision, typ.scale)
        )
    return None


def _arrow_text_or_time(typ: pa.DataType) -> Written | None:
    """Strings, binaries, dates, times, timestamps, durations and intervals; None for any other type."""
    import pyarrow as pa

    if pa.types.is_string(typ):
        return "text", None
    if pa.types.is_large_string(typ) or pa.types.is_string_view(typ):
        return "text", _cast_to(pa.string())
    if pa.types.is_binary(typ):
        return "bytea", None
    if pa.types.is_large_binary(typ) or pa.types.is_fixed_size_binary(typ) or pa.types.is_binary_view(typ):
        return "bytea", _cast_to(pa.binary())
    if pa.types.is_date32(typ):
        return "date", _date_to_adbc
    if pa.types.is_date64(typ):
        return "date", lambda arr: _date_to_adbc(arr.cast(pa.date32()))
    if pa.types.is_time(typ):
        return "time", None if typ == pa.time64("us") else _cast_to(pa.time64("us"))
    if pa.types.is_timestamp(typ):
        pg = "timestamptz" if typ.tz else "timestamp"
        target = pa.timestamp("us", tz=typ.tz)
        return pg, lambda arr: _refuse_infinite_ts(arr if arr.type == target else arr.cast(target))
    if pa.types.is_duration(typ) or pa.types.is_interval(typ):
        return "interval", None
    return None


def _arrow_list(typ: pa.DataType) -> Written | None:
    """A list of a scalar type as a PostgreSQL array; None for any other type."""
    import pyarrow as pa

    if not (pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ)):
        return None
    value = typ.value_type
    # ADBC writes no array of an extension type (uuid[], json[]): refused, never written as text[]
    extension = isinstance(value, pa.BaseExtensionType)
    if pa.types.is_nested(value) or pa.types.is_dictionary(value) or extension:
        return None
    elem, conv = pg_type_for_arrow(value)

    def convert_list(arr: pa.Array) -> pa.Array:
        plain = arr.cast(pa.list_(value)) if not pa.types.is_list(arr.type) else arr
        if conv is None:
            return plain
        return map_list(plain, conv)

    return f"{elem}[]", convert_list


def _unwritable(typ: str) -> PzConnectorError:
    return PzConnectorError(
        f"the universal tier cannot write Arrow type {typ} to PostgreSQL; cast the column in the pipeline "
        "(e.g. to VARCHAR or JSON) or write through the native tier",
        code="PZ0501",
    )


def _hugeint_to_decimal(arr: pa.Array) -> pa.Array:
    import pyarrow as pa

    storage = arr.storage  # little-endian int128, the layout of decimal128
    return pa.Array.from_buffers(
        pa.decimal128(38, 0),
        len(storage),
        storage.buffers()[:2],
        null_count=storage.null_count,
        offset=storage.offset,
    )


def _date_to_adbc(arr: pa.Array) -> pa.Array:
    """DuckDB's +-infinity dates as the values ADBC's driver turns into PostgreSQL's infinity."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ints = arr.view(pa.int32())
    high = pc.max(ints).as_py()
    low = pc.min(ints).as_py()
    if high is None or (high < DUCK_DATE_POS_INF and low > DUCK_DATE_NEG_INF):
        return arr
    typ = pa.int32()
    fixed = pc.if_else(
        pc.equal(ints, pa.scalar(DUCK_DATE_POS_INF, typ)), pa.scalar(ADBC_DATE_POS_INF, typ), ints
    )
    fixed = pc.if_else(
        pc.equal(fixed, pa.scalar(DUCK_DATE_NEG_INF, typ)), pa.scalar(ADBC_DATE_NEG_INF, typ), fixed
    )
    return fixed.view(pa.date32())


def _refuse_infinite_ts(arr: pa.Array) -> pa.Array:
    import pyarrow as pa
    import pyarrow.compute as pc

    ints = arr.view(pa.int64())
    high, low = pc.max(ints).as_py(), pc.min(ints).as_py()
    if high is not None and (high >= DUCK_TS_POS_INF or low <= DUCK_TS_NEG_INF):
        raise PzConnectorError(
            "a timestamp column holds +-infinity, which the universal tier cannot write (ADBC's driver "
            "refuses it); write through the native tier or map it in the pipeline",
            code="PZ0501",
        )
    return arr


def column_list(names: list[str]) -> str:
    return ", ".join(quote_ident(n) for n in names)


def describe_types(con: duckdb.DuckDBPyConnection, relation: str) -> list[tuple[str, DuckDBPyType]]:
    """Column names and DuckDB types of a staging relation, without reading it."""
    rel = con.sql(f"SELECT * FROM {relation}")
    return list(zip(rel.columns, rel.types, strict=True))
