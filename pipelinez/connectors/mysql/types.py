"""How MySQL/MariaDB columns become Arrow columns (reads), and Arrow columns MySQL columns (writes).

Reads: ConnectorX's own MySQL->Arrow mapping is lossy or panics for several types (every DECIMAL becomes
decimal128(38, 10) and a different scale panics; a TIME outside 00:00-24:00 panics; BIT arrives as bytes).
So the connector describes the result first (a `LIMIT 0` query through PyMySQL: type, length, scale,
flags, charset of each column), selects each column through an expression ConnectorX reads exactly, and
converts the batches to the Arrow type below with vectorised pyarrow casts (no per-row Python).

| MySQL / MariaDB type               | selected as               | Arrow               | DuckDB staging      |
| ---------------------------------- | ------------------------- | ------------------- | ------------------- |
| TINYINT(1), BOOL, BOOLEAN          | column                    | bool (0/1 only)     | BOOLEAN             |
| TINY/SMALL/MEDIUM/INT/BIGINT       | column                    | int8/16/32/32/64    | TINYINT...BIGINT    |
| ... UNSIGNED                       | column                    | uint8/16/32/32/64   | UTINYINT...UBIGINT  |
| FLOAT / DOUBLE (REAL)              | column                    | float32 / float64   | FLOAT / DOUBLE      |
| DECIMAL(p,s), p <= 38              | CAST(c AS CHAR)           | decimal128(p, s)    | DECIMAL(p,s)        |
| DECIMAL(p,s), p > 38               | CAST(c AS CHAR)           | string (exact text) | VARCHAR             |
| DATE                               | column                    | date32              | DATE                |
| DATETIME(n)                        | column                    | timestamp[us]       | TIMESTAMP           |
| TIMESTAMP(n)                       | column (session UTC)      | timestamp[us, UTC]  | TIMESTAMPTZ         |
| TIME(n)                            | TIME_TO_SEC(c) * 10^6     | time64[us]          | TIME                |
| YEAR                               | column                    | int16               | SMALLINT            |
| BIT(1)                             | CAST(c AS UNSIGNED)       | bool                | BOOLEAN             |
| BIT(n), n > 1                      | CAST(c AS UNSIGNED)       | uint64              | UBIGINT             |
| CHAR/VARCHAR/TEXT/ENUM/SET         | column (utf8mb4)          | string              | VARCHAR             |
| JSON (MariaDB: LONGTEXT + check)   | column                    | string (JSON text)  | VARCHAR             |
| BINARY / VARBINARY / BLOB          | column                    | large_binary        | BLOB                |
| GEOMETRY and friends               | ST_AsBinary(c)            | large_binary (WKB)  | BLOB                |
| anything else, a NULL literal      | CAST(c AS CHAR)           | string              | VARCHAR             |

Contract overrides (the dataset's `columns:`): a TINYINT(1) declared as an integer type reads as int8
(TINYINT); a TIME declared `interval` reads as duration[us] (INTERVAL) and then keeps values outside a day.
Values a mapping cannot hold fail the extraction with a terminal error naming the column: a TINYINT(1)
holding something other than 0/1, a TIME outside 00:00:00-23:59:59.999999, a zero date ('0000-00-00';
PZ0518 naming the column, see `MySQLConnector._impossible_dates`).

Writes: see `mysql_column_type` and `encode_tsv`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.mysql.settings import quote_ident
from pipelinez.core.diagnostics import PzConnectorError

if TYPE_CHECKING:
    import pyarrow as pa

# protocol field types (pymysql.constants.FIELD_TYPE)
_DECIMAL, _TINY, _SHORT, _LONG, _FLOAT, _DOUBLE, _NULL, _TIMESTAMP, _LONGLONG, _INT24 = (
    0,
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    9,
)
_DATE, _TIME, _DATETIME, _YEAR, _NEWDATE, _VARCHAR, _BIT = 10, 11, 12, 13, 14, 15, 16
_TIMESTAMP2, _DATETIME2, _TIME2 = 17, 18, 19
_JSON, _NEWDECIMAL, _ENUM, _SET = 245, 246, 247, 248
_TINY_BLOB, _MEDIUM_BLOB, _LONG_BLOB, _BLOB, _VAR_STRING, _STRING, _GEOMETRY = (
    249,
    250,
    251,
    252,
    253,
    254,
    255,
)
_UNSIGNED_FLAG = 32
_BINARY_CHARSET = 63
_MICROS_PER_DAY = 86_400_000_000
_INTEGER_TYPES = {
    "TINYINT",
    "INT1",
    "SMALLINT",
    "INT2",
    "SHORT",
    "INTEGER",
    "INT",
    "INT4",
    "SIGNED",
    "BIGINT",
    "INT8",
    "LONG",
    "HUGEINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
    "UHUGEINT",
}

_INTS = {
    _TINY: ("int8", "TINYINT"),
    _SHORT: ("int16", "SMALLINT"),
    _INT24: ("int32", "INTEGER"),
    _LONG: ("int32", "INTEGER"),
    _LONGLONG: ("int64", "BIGINT"),
}
_UINTS = {
    _TINY: ("uint8", "UTINYINT"),
    _SHORT: ("uint16", "USMALLINT"),
    _INT24: ("uint32", "UINTEGER"),
    _LONG: ("uint32", "UINTEGER"),
    _LONGLONG: ("uint64", "UBIGINT"),
}


@dataclass(frozen=True)
class SourceField:
    """What the protocol tells about one result column (from a `LIMIT 0` query)."""

    name: str
    type_code: int
    length: int
    scale: int
    flags: int
    charsetnr: int


@dataclass(frozen=True)
class ColumnPlan:
    """How one source column is selected, converted and typed."""

    name: str
    select_sql: str  # expression in the SELECT list (aliased by the caller)
    convert: str  # native | decimal | bool01 | bit_bool | time | interval | text
    arrow: str  # documented Arrow type, as text (see `arrow_type`)
    duckdb: str  # DuckDB staging type
    precision: int = 0
    scale: int = 0


def _declared(contract: dict[str, str] | None, name: str) -> str | None:
    if not contract:
        return None
    for key, value in contract.items():
        if key.lower() == name.lower():
            return str(value).strip().upper()
    return None


def plan_column(field: SourceField, contract: dict[str, str] | None = None) -> ColumnPlan:
    """The plan of one source column (see the module table)."""
    name = field.name
    col = quote_ident(name)
    code = field.type_code
    unsigned = bool(field.flags & _UNSIGNED_FLAG)
    declared = _declared(contract, name)
    if code == _TINY and field.length == 1 and not unsigned:
        if declared and declared.split("(")[0] in _INTEGER_TYPES:
            return ColumnPlan(name, col, "native", "int8", "TINYINT")
        return ColumnPlan(name, col, "bool01", "bool", "BOOLEAN")
    if code in _INTS:
        arrow, duck = (_UINTS if unsigned else _INTS)[code]
        return ColumnPlan(name, col, "native", arrow, duck)
    if code == _FLOAT:
        return ColumnPlan(name, col, "native", "float32", "FLOAT")
    if code == _DOUBLE:
        return ColumnPlan(name, col, "native", "float64", "DOUBLE")
    if code in (_DECIMAL, _NEWDECIMAL):
        scale = max(0, min(field.scale, 38))
        precision = field.length - (1 if scale > 0 else 0) - (0 if unsigned else 1)
        precision = max(precision, scale, 1)
        if precision <= 38:
            return ColumnPlan(
                name,
                f"CAST({col} AS CHAR)",
                "decimal",
                f"decimal128({precision}, {scale})",
                f"DECIMAL({precision},{scale})",
                precision,
                scale,
            )
        return ColumnPlan(name, f"CAST({col} AS CHAR)", "text", "string", "VARCHAR")
    if code in (_DATE, _NEWDATE):
        return ColumnPlan(name, col, "native", "date32", "DATE")
    if code in (_DATETIME, _DATETIME2):
        return ColumnPlan(name, col, "native", "timestamp[us]", "TIMESTAMP")
    if code in (_TIMESTAMP, _TIMESTAMP2):
        return ColumnPlan(name, col, "native", "timestamp[us, UTC]", "TIMESTAMP WITH TIME ZONE")
    if code in (_TIME, _TIME2):
        micros = f"CAST(TIME_TO_SEC({col}) * 1000000 AS SIGNED)"
        if declared == "INTERVAL":
            return ColumnPlan(name, micros, "interval", "duration[us]", "INTERVAL")
        return ColumnPlan(name, micros, "time", "time64[us]", "TIME")
    if code == _YEAR:
        return ColumnPlan(name, col, "native", "int16", "SMALLINT")
    if code == _BIT:
        if field.length == 1:
            return ColumnPlan(name, f"CAST({col} AS UNSIGNED)", "bit_bool", "bool", "BOOLEAN")
        return ColumnPlan(name, f"CAST({col} AS UNSIGNED)", "native", "uint64", "UBIGINT")
    if code == _GEOMETRY:
        return ColumnPlan(name, f"ST_AsBinary({col})", "native", "large_binary", "BLOB")
    if code == _JSON:
        return ColumnPlan(name, col, "native", "string", "VARCHAR")
    if code in (_VARCHAR, _VAR_STRING, _STRING, _ENUM, _SET, _TINY_BLOB, _MEDIUM_BLOB, _LONG_BLOB, _BLOB):
        if field.charsetnr == _BINARY_CHARSET and code not in (_ENUM, _SET):
            return ColumnPlan(name, col, "native", "large_binary", "BLOB")
        return ColumnPlan(name, col, "native", "string", "VARCHAR")
    return ColumnPlan(name, f"CAST({col} AS CHAR)", "text", "string", "VARCHAR")


def arrow_type(text: str) -> pa.DataType:
    import pyarrow as pa

    simple: dict[str, pa.DataType] = {
        "bool": pa.bool_(),
        "int8": pa.int8(),
        "int16": pa.int16(),
        "int32": pa.int32(),
        "int64": pa.int64(),
        "uint8": pa.uint8(),
        "uint16": pa.uint16(),
        "uint32": pa.uint32(),
        "uint64": pa.uint64(),
        "float32": pa.float32(),
        "float64": pa.float64(),
        "string": pa.string(),
        "large_binary": pa.large_binary(),
        "date32": pa.date32(),
        "timestamp[us]": pa.timestamp("us"),
        "timestamp[us, UTC]": pa.timestamp("us", tz="UTC"),
        "time64[us]": pa.time64("us"),
        "duration[us]": pa.duration("us"),
    }
    if text in simple:
        return simple[text]
    if text.startswith("decimal128("):
        precision, scale = (int(part) for part in text[len("decimal128(") : -1].split(","))
        return pa.decimal128(precision, scale)
    raise ValueError(f"no Arrow type {text}")


def arrow_schema(plans: Sequence[ColumnPlan]) -> pa.Schema:
    import pyarrow as pa

    return pa.schema([pa.field(plan.name, arrow_type(plan.arrow)) for plan in plans])


def convert_batch(
    batch: pa.RecordBatch, plans: Sequence[ColumnPlan], schema: pa.Schema, where: str
) -> pa.RecordBatch:
    """Cast one ConnectorX batch to the documented Arrow types (vectorised). `where` names the dataset for
    messages."""
    import pyarrow as pa

    columns = [convert_column(batch.column(i), plan, where) for i, plan in enumerate(plans)]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _time_text(micros: int) -> str:
    sign = "-" if micros < 0 else ""
    seconds, fraction = divmod(abs(micros), 1_000_000)
    text = f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    return text + (f".{fraction:06d}" if fraction else "")


def _fail(where: str, plan: ColumnPlan, problem: str, next_step: str) -> PzConnectorError:
    return PzConnectorError(f"{where}: column '{plan.name}' {problem}; {next_step}", code="PZ0505")


def convert_column(array: Any, plan: ColumnPlan, where: str) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    target = arrow_type(plan.arrow)
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    try:
        if plan.convert == "bool01" or plan.convert == "bit_bool":
            bounds = pc.min_max(array)
            low, high = bounds["min"].as_py(), bounds["max"].as_py()
            if low is not None and (low < 0 or high > 1):
                bad = low if low < 0 else high
                raise _fail(
                    where,
                    plan,
                    f"is TINYINT(1) (read as BOOLEAN) but holds {bad}",
                    "declare it as tinyint under columns: to read it as an integer",
                )
            return pc.not_equal(array, pa.scalar(0, array.type))
        if plan.convert in ("time", "interval"):
            array = array.cast(pa.int64())
            if plan.convert == "time":
                bounds = pc.min_max(array)
                low, high = bounds["min"].as_py(), bounds["max"].as_py()
                if low is not None and (low < 0 or high >= _MICROS_PER_DAY):
                    bad = low if low < 0 else high
                    raise _fail(
                        where,
                        plan,
                        f"is TIME but holds {_time_text(bad)}, outside 00:00:00-23:59:59.999999",
                        "declare it as interval under columns: to read elapsed times",
                    )
            return array.cast(target)
        if plan.convert == "decimal":
            return pc.cast(array, target)
        if array.type == target:
            return array
        if plan.arrow == "timestamp[us, UTC]" and pa.types.is_timestamp(array.type) and array.type.tz is None:
            return array.cast(pa.timestamp("us")).cast(target)  # the session reads TIMESTAMP in UTC
        return pc.cast(array, target)
    except PzConnectorError:
        raise
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise _fail(
            where,
            plan,
            f"cannot be read as {plan.duckdb}: {exc}",
            "cast it in a query: dataset, or fix the source data",
        ) from exc


# -- writes -------------------------------------------------------------------------------------------
# | Arrow (from DuckDB staging)             | MySQL column created by the sink                    |
# | bool                                    | TINYINT(1)                                          |
# | int8/16/32/64, uint8/16/32/64           | TINYINT/SMALLINT/INT/BIGINT [UNSIGNED]              |
# | float16/32, float64                     | FLOAT, DOUBLE                                       |
# | decimal128/256(p, s), p <= 65           | DECIMAL(p, s)                                       |
# | string / large_string / string_view     | LONGTEXT (key columns: VARCHAR(n)), utf8mb4 binary  |
# | binary / large_binary / fixed_size      | LONGBLOB (key columns: VARBINARY(n))                |
# | date32/64                               | DATE                                                |
# | time32/64                               | TIME(6)                                             |
# | timestamp (naive)                       | DATETIME(6)                                         |
# | timestamp (with time zone)              | DATETIME(6) holding the UTC instant                 |
# | list / struct / map                     | JSON (the value as JSON text)                       |
# | anything else (interval, duration, …)   | LONGTEXT (the value's text)                         |
# | null                                    | LONGTEXT (all NULL)                                 |
KEY_BYTES = 3072  # InnoDB's index key limit with the DYNAMIC row format


def mysql_column_type(dtype: pa.DataType, *, key: bool = False, key_chars: int = 255) -> str:
    import pyarrow as pa

    t = pa.types
    if t.is_dictionary(dtype):
        return mysql_column_type(dtype.value_type, key=key, key_chars=key_chars)
    if t.is_boolean(dtype):
        return "TINYINT(1)"
    if t.is_integer(dtype):
        base = {8: "TINYINT", 16: "SMALLINT", 32: "INT", 64: "BIGINT"}[dtype.bit_width]
        return base + (" UNSIGNED" if t.is_unsigned_integer(dtype) else "")
    if t.is_float16(dtype) or t.is_float32(dtype):
        return "FLOAT"
    if t.is_float64(dtype):
        return "DOUBLE"
    if t.is_decimal(dtype):
        if dtype.precision > 65 or dtype.scale > 38:
            raise PzConnectorError(
                f"decimal({dtype.precision},{dtype.scale}) does not fit MySQL's DECIMAL "
                "(precision <= 65, scale <= 38)",
                code="PZ0501",
            )
        return f"DECIMAL({dtype.precision},{dtype.scale})"
    if t.is_string(dtype) or t.is_large_string(dtype) or _is_string_view(dtype):
        return f"VARCHAR({key_chars})" if key else "LONGTEXT"
    if (
        t.is_binary(dtype)
        or t.is_large_binary(dtype)
        or t.is_fixed_size_binary(dtype)
        or _is_binary_view(dtype)
    ):
        return f"VARBINARY({key_chars * 4})" if key else "LONGBLOB"
    if t.is_date(dtype):
        return "DATE"
    if t.is_time(dtype):
        return "TIME(6)"
    if t.is_timestamp(dtype):
        return "DATETIME(6)"
    if t.is_nested(dtype):
        return "JSON"
    return "LONGTEXT"


def _is_string_view(dtype: Any) -> bool:
    import pyarrow as pa

    check = getattr(pa.types, "is_string_view", None)
    return bool(check and check(dtype))


def _is_binary_view(dtype: Any) -> bool:
    import pyarrow as pa

    check = getattr(pa.types, "is_binary_view", None)
    return bool(check and check(dtype))


def is_binary_like(dtype: Any) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(dtype):
        return is_binary_like(dtype.value_type)
    t = pa.types
    return bool(
        t.is_binary(dtype)
        or t.is_large_binary(dtype)
        or t.is_fixed_size_binary(dtype)
        or _is_binary_view(dtype)
    )


_ESCAPES = ((b"\\", b"\\\\"), (b"\t", b"\\t"), (b"\n", b"\\n"), (b"\r", b"\\r"), (b"\x00", b"\\0"))


def _escape(array: Any) -> Any:
    import pyarrow.compute as pc

    for plain, escaped in _ESCAPES:
        array = pc.replace_substring(array, plain, escaped)
    return array


def encode_column(array: Any) -> Any:
    """One column as large_binary TSV fields in LOAD DATA's default format: NULL is `\\N`, backslash, tab,
    newline, CR and NUL escaped with a backslash. Vectorised, except nested and exotic types, which are
    rendered per value (JSON text / str)."""
    import json

    import pyarrow as pa
    import pyarrow.compute as pc

    t = pa.types
    dtype = array.type
    if t.is_dictionary(dtype):
        array = array.dictionary_decode()
        dtype = array.type
    if t.is_null(dtype):
        return pa.array([b"\\N"] * len(array), pa.large_binary())
    if t.is_boolean(dtype):
        text = pc.if_else(array, pa.scalar(b"1", pa.large_binary()), pa.scalar(b"0", pa.large_binary()))
    elif t.is_timestamp(dtype):
        if dtype.tz is not None:
            array = array.cast(pa.timestamp(dtype.unit))  # the UTC wall clock
        if dtype.unit == "ns":
            array = array.cast(pa.timestamp("us"))  # safe cast: refuses to drop nanoseconds
        text = pc.cast(array, pa.string()).cast(pa.large_binary())
    elif t.is_time(dtype) and dtype.unit == "ns":
        text = pc.cast(array.cast(pa.time64("us")), pa.string()).cast(pa.large_binary())
    elif t.is_string(dtype) or t.is_large_string(dtype) or _is_string_view(dtype):
        text = _escape(array.cast(pa.large_string()).cast(pa.large_binary()))
    elif is_binary_like(dtype):
        text = _escape(array.cast(pa.large_binary()))
    elif (
        t.is_integer(dtype)
        or t.is_floating(dtype)
        or t.is_decimal(dtype)
        or t.is_date(dtype)
        or t.is_time(dtype)
    ):
        text = pc.cast(array, pa.string()).cast(pa.large_binary())
    elif t.is_nested(dtype):
        values = [
            None if v is None else json.dumps(v, default=str, ensure_ascii=False) for v in array.to_pylist()
        ]
        text = _escape(pa.array(values, pa.large_string()).cast(pa.large_binary()))
    else:
        values = [None if v is None else str(v) for v in array.to_pylist()]
        text = _escape(pa.array(values, pa.large_string()).cast(pa.large_binary()))
    return pc.fill_null(text, pa.scalar(b"\\N", pa.large_binary()))


def encode_tsv(batch: pa.RecordBatch) -> Any:
    """The batch as LOAD DATA lines: a large_binary array with one `field\\tfield…\\n` line per row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    fields = [encode_column(batch.column(i)) for i in range(batch.num_columns)]
    tab = pa.scalar(b"\t", pa.large_binary())
    lines = pc.binary_join_element_wise(*fields, tab) if len(fields) > 1 else fields[0]
    newline = pa.scalar(b"\n", pa.large_binary())
    return pc.binary_join_element_wise(lines, pa.scalar(b"", pa.large_binary()), newline)


def write_lines(lines: Any, out: Any) -> int:
    """Write a large_binary array's values back to back (its data buffer slice); returns bytes written."""
    if len(lines) == 0:
        return 0
    offsets = lines.buffers()[1]
    data = lines.buffers()[2]
    start = int.from_bytes(offsets[lines.offset * 8 : (lines.offset + 1) * 8], "little", signed=True)
    end_at = (lines.offset + len(lines)) * 8
    end = int.from_bytes(offsets[end_at : end_at + 8], "little", signed=True)
    out.write(memoryview(data)[start:end])
    return end - start
