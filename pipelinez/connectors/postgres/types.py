"""PostgreSQL <-> DuckDB/Arrow type mapping of the postgres connector.

Source side. Every column of a dataset gets one canonical DuckDB type (`Canon`), decided from the catalog
(type OID, typmod, declared array dimensions, domains resolved to their base type). Both tiers land exactly
that type with exactly the same values:

| PostgreSQL                          | DuckDB staging type       | how                                   |
| ----------------------------------- | ------------------------- | ------------------------------------- |
| boolean                             | BOOLEAN                   | binary                                |
| smallint / integer / bigint         | SMALLINT/INTEGER/BIGINT   | binary                                |
| real / double precision             | FLOAT / DOUBLE            | binary (NaN, +-Infinity kept)         |
| numeric(p,s), 0 <= s <= p <= 38     | DECIMAL(p,s)              | exact; NaN refused (DECIMAL has none) |
| numeric(p,s), s < 0 or s > p        | DECIMAL(p-s,0) / (s,s)    | exact, via text (when <= 38 digits)   |
| numeric (no typmod), numeric(p>38)  | VARCHAR                   | exact text (`1.50`, `NaN`, `Infinity`)|
| money                               | VARCHAR                   | `money::numeric::text` (no locale)    |
| text, varchar(n), name, "char"      | VARCHAR                   | as stored                             |
| char(n) (bpchar)                    | VARCHAR                   | trailing blanks removed (as ::text)   |
| bytea                               | BLOB                      | binary                                |
| date                                | DATE                      | +-infinity kept, BC dates kept        |
| time / timetz                       | TIME / TIME WITH TIME ZONE| 24:00:00 and +-15:59 offsets kept     |
| timestamp / timestamptz             | TIMESTAMP / ... TIME ZONE | microseconds; +-infinity kept         |
| interval                            | INTERVAL                  | months, days, microseconds            |
| uuid                                | UUID                      | binary                                |
| json, jsonb                         | JSON                      | the text PostgreSQL renders           |
| oid                                 | UINTEGER                  | binary                                |
| enum types                          | VARCHAR                   | the label                             |
| 1-D arrays of the types above       | <element type>[]          | element rules apply; NULL elements    |
|  (not bytea/money/wide numeric)     |                           | kept; a 2-D value is refused          |
| 1-D arrays of other types (bytea,   | VARCHAR[]                 | `::text[]` (bytea elements as         |
|  inet, wide numeric, ...)           |                           |  `\\x00ff` text)                       |
| arrays declared [][] (2+ dims)      | VARCHAR                   | array text, e.g. `{{1,2},{3,4}}`      |
| domains                             | as their base type        | cast to the base type server-side     |
| anything else: inet, cidr, macaddr, | VARCHAR                   | `::text` as PostgreSQL renders it     |
|  bit, varbit, xml, ranges, geometric|                           |                                       |
|  composite, tsvector, hstore, ...   |                           |                                       |

Limits: PostgreSQL timestamps after 294247-01-10 (DuckDB's maximum) fail the read (PZ0518; see
`out_of_range` and `refuse_wrapped_ts`); a one-dimensional array
column holding a multi-dimensional value fails the read in both tiers (declare it [][], or cast it in a
query:); a query's arrays count as one-dimensional (a result description carries no dimensions).

Native tier: an unpartitioned table whose columns all decode exactly in DuckDB's postgres extension is read
with the extension's own (parallel, binary) table scan and only cast in DuckDB (`attach_ok`); anything else
(queries, partitions, columns that need server-side rendering) is read with `postgres_query` and the
per-column server expression `native_expr`. The extension decodes numeric NaN as 0, so a table scan with
numeric(p<=38) columns double-checks the server when a zero was staged (see nan_guard.py).

Universal tier: ADBC runs `universal_expr` per column and `convert_column` (arrow_convert.py) converts
the Arrow batches to the Arrow types that DuckDB ingests as the canonical types (decimal strings cast, the
driver's wrapped +-infinity sentinels of date/timestamp turned into DuckDB's, oid reinterpreted as uint32,
timetz built server-side as DuckDB's TIME WITH TIME ZONE bit layout).

Sink side (sink_types.py): `pg_type_for_duckdb` and `pg_type_for_arrow` give the PostgreSQL column type a
staged column is written as when the sink creates a table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelinez.core.sqlnames import quote_literal

if TYPE_CHECKING:
    import pyarrow as pa

# PostgreSQL type OIDs (stable across versions)
BOOL, BYTEA, CHAR, NAME, INT8, INT2, INT4, TEXT, OID = 16, 17, 18, 19, 20, 21, 23, 25, 26
JSON, FLOAT4, FLOAT8, MONEY, BPCHAR, VARCHAR = 114, 700, 701, 790, 1042, 1043
DATE, TIME, TIMESTAMP, TIMESTAMPTZ, INTERVAL, TIMETZ = 1082, 1083, 1114, 1184, 1186, 1266
NUMERIC, UUID, JSONB = 1700, 2950, 3802

# Arrow sentinels of +-infinity as ADBC's driver produces them: PostgreSQL's INT_MAX/INT_MIN sentinels
# shifted from the 2000-01-01 epoch to 1970-01-01 with wrap-around. No finite PostgreSQL value maps there.
_DATE_SHIFT = 10_957
_TS_SHIFT = 946_684_800_000_000


def _wrap(value: int, bits: int) -> int:
    half: int = 2 ** (bits - 1)
    return ((value + half) % (2 * half)) - half


ADBC_DATE_POS_INF = _wrap(2**31 - 1 + _DATE_SHIFT, 32)
ADBC_DATE_NEG_INF = _wrap(-(2**31) + _DATE_SHIFT, 32)
ADBC_TS_POS_INF = _wrap(2**63 - 1 + _TS_SHIFT, 64)
ADBC_TS_NEG_INF = _wrap(-(2**63) + _TS_SHIFT, 64)
# DuckDB's own +-infinity of DATE and TIMESTAMP[TZ]
DUCK_DATE_POS_INF, DUCK_DATE_NEG_INF = 2**31 - 1, -(2**31 - 1)
DUCK_TS_POS_INF, DUCK_TS_NEG_INF = 2**63 - 1, -(2**63 - 1)
# PostgreSQL's earliest timestamp is 4713 BC. A finite timestamp staged before 4714 BC can only be a value
# after DuckDB's latest (294247-01-10; PostgreSQL goes to 294276 AD) that wrapped around in the conversion
# from PostgreSQL's 2000-based microseconds to DuckDB's 1970-based ones (both tiers wrap the same way).
EARLIEST_PG_TS_US = -210895056000000000  # epoch_us(TIMESTAMP '4714-01-01 (BC)')
# DuckDB TIME WITH TIME ZONE: (micros << 24) | (MAX_OFFSET - offset_seconds_east)
TIMETZ_MAX_OFFSET = 16 * 60 * 60 - 1

_SCALAR_DUCK = {
    "bool": "BOOLEAN",
    "int2": "SMALLINT",
    "int4": "INTEGER",
    "int8": "BIGINT",
    "float4": "FLOAT",
    "float8": "DOUBLE",
    "varchar": "VARCHAR",
    "blob": "BLOB",
    "date": "DATE",
    "time": "TIME",
    "timetz": "TIME WITH TIME ZONE",
    "timestamp": "TIMESTAMP",
    "timestamptz": "TIMESTAMP WITH TIME ZONE",
    "interval": "INTERVAL",
    "uuid": "UUID",
    "json": "JSON",
    "uint32": "UINTEGER",
}


@dataclass(frozen=True)
class Canon:
    """A canonical staging type: a scalar kind (with precision/scale for decimals), maybe a list of it."""

    kind: str
    precision: int = 0
    scale: int = 0
    is_list: bool = False

    def duck(self) -> str:
        base = (
            f"DECIMAL({self.precision},{self.scale})" if self.kind == "decimal" else _SCALAR_DUCK[self.kind]
        )
        return base + "[]" if self.is_list else base

    def arrow(self) -> pa.DataType:
        import pyarrow as pa

        scalar: pa.DataType
        if self.kind == "decimal":
            scalar = pa.decimal128(self.precision, self.scale)
        else:
            scalar = {
                "bool": pa.bool_,
                "int2": pa.int16,
                "int4": pa.int32,
                "int8": pa.int64,
                "float4": pa.float32,
                "float8": pa.float64,
                "varchar": pa.string,
                "blob": pa.binary,
                "date": pa.date32,
                "time": lambda: pa.time64("us"),
                "timetz": timetz_arrow_type,
                "timestamp": lambda: pa.timestamp("us"),
                "timestamptz": lambda: pa.timestamp("us", tz="UTC"),
                "interval": pa.month_day_nano_interval,
                "uuid": pa.uuid,
                "json": pa.json_,
                "uint32": pa.uint32,
            }[self.kind]()
        return pa.list_(scalar) if self.is_list else scalar


def timetz_arrow_type() -> pa.DataType:
    import pyarrow as pa

    return pa.opaque(pa.binary(8), "time_tz", "DuckDB")


@dataclass(frozen=True)
class PgType:
    oid: int
    name: str
    typtype: str  # b base, d domain, e enum, c composite, r range, m multirange, p pseudo
    category: str  # A array, N numeric, S string, ...
    elem: int
    basetype: int
    typmod: int  # a domain's typmod
    ndims: int  # a domain's declared array dimensions


@dataclass(frozen=True)
class PgColumn:
    """A column as the catalog or a result description tells it."""

    name: str
    type_oid: int
    typmod: int = -1
    ndims: int = 0  # declared array dimensions (pg_attribute.attndims); 0 when unknown
    not_null: bool = False  # a NOT NULL column of a table (pg_attribute.attnotnull); False when unknown


@dataclass(frozen=True)
class ColumnPlan:
    """How one column is read in each tier. Expressions are templates over `{c}` (the quoted column)."""

    name: str
    canon: Canon
    attach_ok: bool  # the extension's table scan decodes it exactly (after a DuckDB CAST)
    native_expr: str  # server-side expression in the native query path
    universal_expr: str  # server-side expression of the universal tier
    fix: str = ""  # Arrow conversion of the universal tier: decimal, date, ts, uint32, timetz
    nan_guard: bool = False  # numeric(p<=38): NaN decodes as 0 in the extension's scan

    @property
    def duck(self) -> str:
        return self.canon.duck()

    def native_sql(self, ref: str) -> str:
        return self.native_expr.format(c=ref)

    def universal_sql(self, ref: str) -> str:
        return self.universal_expr.format(c=ref)


def _numeric(typmod: int) -> Canon | None:
    """DECIMAL for numeric(p,s) that fits DuckDB's 38 digits; None for numeric without typmod or wider."""
    if typmod < 4:
        return None
    mod = typmod - 4
    precision = (mod >> 16) & 0xFFFF
    scale = ((mod & 0x7FF) ^ 1024) - 1024
    if scale < 0:
        precision, scale = precision - scale, 0
    elif scale > precision:
        precision = scale
    if not 1 <= precision <= 38:
        return None
    return Canon("decimal", precision, scale)


def _is_plain_numeric(typmod: int) -> bool:
    """numeric(p,s) with 0 <= s <= p <= 38: decoded exactly by the extension's binary reader."""
    if typmod < 4:
        return False
    mod = typmod - 4
    precision = (mod >> 16) & 0xFFFF
    scale = ((mod & 0x7FF) ^ 1024) - 1024
    return 0 <= scale <= precision <= 38 and precision >= 1


_SIMPLE: dict[int, str] = {
    BOOL: "bool",
    INT2: "int2",
    INT4: "int4",
    INT8: "int8",
    FLOAT4: "float4",
    FLOAT8: "float8",
    TEXT: "varchar",
    VARCHAR: "varchar",
    NAME: "varchar",
    BYTEA: "blob",
    DATE: "date",
    TIME: "time",
    TIMETZ: "timetz",
    TIMESTAMP: "timestamp",
    TIMESTAMPTZ: "timestamptz",
    INTERVAL: "interval",
    UUID: "uuid",
    JSON: "json",
    JSONB: "json",
    OID: "uint32",
}
_FIX = {"date": "date", "timestamp": "ts", "timestamptz": "ts", "uint32": "uint32"}
_TIMETZ_BITS = (
    "(((EXTRACT(EPOCH FROM ({c})::time) * 1000000)::int8 << 24) | "
    f"({TIMETZ_MAX_OFFSET} - EXTRACT(TIMEZONE FROM {{c}})::int8))"
)


def plan_column(col: PgColumn, types: dict[int, PgType], type_sql: Callable[[int, int], str]) -> ColumnPlan:
    """The plan of one column. `types` holds the pg_type rows of the column's type, its element and base
    types; `type_sql(oid, typmod)` renders a type as SQL (format_type)."""
    oid, typmod, ndims = col.type_oid, col.typmod, col.ndims
    info = types.get(oid)
    domain_cast = ""
    while info is not None and info.typtype == "d":
        if info.typmod != -1:
            typmod = info.typmod
        ndims = max(ndims, info.ndims)
        oid = info.basetype
        info = types.get(oid)
        domain_cast = type_sql(oid, typmod)
    name = col.name
    if info is not None and info.category == "A" and info.elem:
        plan = _plan_array(name, info.elem, typmod, ndims, types, oid, type_sql)
    else:
        plan = _plan_scalar(name, oid, typmod, info)
    if domain_cast:
        # the extension decodes domains as text: read the base type through the query path
        cast = f"(({{c}})::{domain_cast})"
        plan = ColumnPlan(
            plan.name,
            plan.canon,
            False,
            plan.native_expr.replace("{c}", cast),
            plan.universal_expr.replace("{c}", cast),
            plan.fix,
        )
    return plan


def _plan_scalar(name: str, oid: int, typmod: int, info: PgType | None) -> ColumnPlan:
    kind = _SIMPLE.get(oid)
    if kind == "timetz":
        return ColumnPlan(name, Canon("timetz"), True, "{c}", _TIMETZ_BITS, "timetz")
    if kind is not None:
        return ColumnPlan(name, Canon(kind), True, "{c}", "{c}", _FIX.get(kind, ""))
    if oid == NUMERIC:
        canon = _numeric(typmod)
        if canon is None:
            return ColumnPlan(name, Canon("varchar"), False, "({c})::text", "({c})::text")
        plain = _is_plain_numeric(typmod)
        return ColumnPlan(name, canon, plain, "({c})::text", "({c})::text", "decimal", nan_guard=plain)
    if oid == MONEY:
        return ColumnPlan(name, Canon("varchar"), False, "({c})::numeric::text", "({c})::numeric::text")
    if oid == BPCHAR:
        return ColumnPlan(name, Canon("varchar"), True, "({c})::text", "({c})::text")
    if info is not None and info.typtype == "e":
        return ColumnPlan(name, Canon("varchar"), True, "({c})::text", "({c})::text")
    return ColumnPlan(name, Canon("varchar"), False, "({c})::text", "({c})::text")


# element kinds a one-dimensional array keeps as a typed LIST
_LIST_ELEMENTS = {
    BOOL,
    INT2,
    INT4,
    INT8,
    FLOAT4,
    FLOAT8,
    TEXT,
    VARCHAR,
    NAME,
    BPCHAR,
    DATE,
    TIME,
    TIMESTAMP,
    TIMESTAMPTZ,
    INTERVAL,
    UUID,
    JSON,
    JSONB,
}


def _plan_array(
    name: str,
    elem: int,
    typmod: int,
    ndims: int,
    types: dict[int, PgType],
    array_oid: int,
    type_sql: Callable[[int, int], str],
) -> ColumnPlan:
    if ndims > 1:
        return ColumnPlan(name, Canon("varchar"), False, "({c})::text", "({c})::text")
    einfo = types.get(elem)
    is_enum = einfo is not None and einfo.typtype == "e"
    array_sql = type_sql(array_oid, typmod)
    if elem == NUMERIC and _is_plain_numeric(typmod):
        canon = _numeric(typmod)
        assert canon is not None
        lst = Canon(canon.kind, canon.precision, canon.scale, is_list=True)
        return ColumnPlan(
            name,
            lst,
            True,
            "({c})::text[]",
            _guard_1d("({c})::text[]", "text[]", name),
            "decimal",
            nan_guard=True,
        )
    if elem in _LIST_ELEMENTS or is_enum:
        kind = "varchar" if is_enum else _SIMPLE.get(elem, "varchar")
        lst = Canon(kind, is_list=True)
        if elem == BPCHAR or is_enum:
            return ColumnPlan(name, lst, True, "({c})::text[]", _guard_1d("({c})::text[]", "text[]", name))
        return ColumnPlan(name, lst, True, "{c}", _guard_1d("{c}", array_sql, name), _FIX.get(kind, ""))
    return ColumnPlan(
        name,
        Canon("varchar", is_list=True),
        False,
        "({c})::text[]",
        _guard_1d("({c})::text[]", "text[]", name),
    )


def _guard_1d(expr: str, sql_type: str, name: str) -> str:
    """`expr`, failing the statement (with a message `summary` extracts) on a value with more than one
    dimension: ADBC's driver would silently flatten it, the extension refuses it."""
    message = quote_literal(
        f"pz-guard: column {name} holds a multi-dimensional array value but is declared one-dimensional; "
        "declare it with [][] or read it with a query: that casts it to text, dimensions: "
    )
    # the failing cast depends on the row, so PostgreSQL cannot fold it at plan time
    fail = f"CAST(CAST(CAST({message} || array_ndims({{c}}) AS integer) AS text) AS {sql_type})"
    return f"(CASE WHEN array_ndims({{c}}) > 1 THEN {fail} ELSE {expr} END)"


def fetch_types(cur: Any, oids: set[int]) -> dict[int, PgType]:
    """pg_type rows of `oids` and, transitively, their element and base types (psycopg cursor)."""
    found: dict[int, PgType] = {}
    pending = set(oids)
    while pending:
        cur.execute(
            "SELECT oid::int8, typname, typtype, typcategory, typelem::int8, typbasetype::int8, typtypmod, "
            "typndims FROM pg_catalog.pg_type WHERE oid = ANY(%s::oid[])",
            [list(pending)],
        )
        rows = cur.fetchall()
        pending = set()
        for row in rows:
            info = PgType(
                int(row[0]),
                str(row[1]),
                str(row[2]),
                str(row[3]),
                int(row[4]),
                int(row[5]),
                int(row[6]),
                int(row[7]),
            )
            found[info.oid] = info
            for nxt in (info.elem, info.basetype):
                if nxt and nxt not in found:
                    pending.add(nxt)
    return found
