"""Reading a postgres dataset: describing it, splitting it into partitions, and the two tiers.

A dataset is a `table` (`orders`, `public.orders`; resolved through the catalog, so an unqualified name
follows the connection's search_path) or a `query` (run as a subquery). Its columns are planned once from
the catalog (see `types.py`); a `columns:` contract selects those columns.

Native tier (`extract_native`): the extension is LOADed from the file the PyPI package ships (no network),
the database is ATTACHed READ_ONLY under a unique alias with the password in a temporary DuckDB secret, the
rows land with CREATE TABLE ... AS / INSERT INTO ... BY NAME, and the alias and secret are dropped again.
- an unpartitioned table whose columns the extension decodes exactly: its parallel binary table scan;
- anything else: `postgres_query` with a server-side projection (and the partition's range).
Universal tier (`extract_batches`): ADBC's PostgreSQL driver (COPY BINARY into Arrow record batches) runs
the server-side projection; batches are converted column by column with pyarrow kernels, never per row.

Partitions (`partitions: {column, count}`): MIN/MAX of the column once (integers, numeric, date,
timestamp[tz]); `count` contiguous ranges, the first open below (and holding the column's NULLs), the last
open above, so every row lands in exactly one partition even when rows arrive after the bounds were read.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.postgres.settings import Settings, TableRef, lead
from pipelinez.connectors.postgres.types import (
    DATE,
    EARLIEST_PG_TS_US,
    INT2,
    INT4,
    INT8,
    NUMERIC,
    TEXT,
    TIMESTAMP,
    TIMESTAMPTZ,
    UUID,
    VARCHAR,
    ColumnPlan,
    PgColumn,
    PgType,
    arrow_schema,
    convert_batch,
    fetch_types,
    out_of_range,
    plan_column,
)
from pipelinez.connectors.sdk import DatasetRequest, Partition, ReadBounds, bounds_predicate
from pipelinez.connectors.sdk_sql import create_staging_table
from pipelinez.core import duck_catalog
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.duck_types import parse_type
from pipelinez.core.sqlnames import quote_ident, quote_literal

if TYPE_CHECKING:
    import duckdb
    import psycopg
    import pyarrow as pa

_SRC = "pz_src"
_INTEGER_TYPES = (INT2, INT4, INT8)
_PARTITION_TYPES = (*_INTEGER_TYPES, NUMERIC, DATE, TIMESTAMP, TIMESTAMPTZ)
# key columns the NaN guard's lookup can compare exactly with their staged values, and the array type
# their values are sent as
_GUARD_KEY_TYPES = {INT2: "int8", INT4: "int8", INT8: "int8", TEXT: "text", VARCHAR: "text", UUID: "uuid"}
# at most this many staged zero rows are looked up by key; more, and the server scans the table
GUARD_KEY_LIMIT = 10_000


@dataclass(frozen=True)
class PartitionColumn:
    name: str
    base_oid: int
    type_sql: str


@dataclass(frozen=True)
class Relation:
    """A described dataset: where its rows come from and how each selected column is read."""

    schema: str | None  # table datasets: resolved schema and name
    table: str | None
    query: str | None
    plans: list[ColumnPlan]  # the selected columns (the contract's, in its order, or all)
    all_columns: dict[str, PartitionColumn]
    contract: dict[str, str] | None  # canonical DuckDB types of the contract

    def from_sql(self) -> str:
        if self.table is not None:
            assert self.schema is not None
            return f"{quote_ident(self.schema)}.{quote_ident(self.table)} AS {_SRC}"
        return f"(\n{self.query}\n) AS {_SRC}"

    def select_sql(self, universal: bool, where: str) -> str:
        """The server-side SELECT of a tier (native query path or universal)."""
        items = []
        for plan in self.plans:
            ref = f"{_SRC}.{quote_ident(plan.name)}"
            expr = plan.universal_sql(ref) if universal else plan.native_sql(ref)
            items.append(f"{expr} AS {quote_ident(plan.name)}")
        sql = f"SELECT {', '.join(items) or 'NULL'} FROM {self.from_sql()}"
        return f"{sql} WHERE {where}" if where else sql

    def duck_projection(self) -> str:
        """The DuckDB-side casts to the canonical types (then to the contract's types)."""
        items = []
        for plan in self.plans:
            expr = f"CAST({quote_ident(plan.name)} AS {plan.duck})"
            if self.contract and self.contract.get(plan.name, plan.duck) != plan.duck:
                expr = f"CAST({expr} AS {self.contract[plan.name]})"
            items.append(f"{expr} AS {quote_ident(plan.name)}")
        return ", ".join(items)

    def attach_scan_ok(self, partition: Partition, bounds: ReadBounds | None = None) -> bool:
        """Whether the extension's own table scan reads this exactly (see types.py). A bounded (incremental)
        read always goes through postgres_query, so the server applies the bounds."""
        if self.table is None or partition.spec or (bounds is not None and bounds.incremental):
            return False
        for plan in self.plans:
            if not plan.attach_ok:
                return False
            if plan.nan_guard and self.contract and self.contract.get(plan.name, plan.duck) != plan.duck:
                return False
        return True


# -- describing ----------------------------------------------------------------------------------------
def describe(conn: psycopg.Connection[Any], dataset: DatasetRequest, where: str, code: str) -> Relation:
    """Describe the dataset through the catalog (tables) or a LIMIT 0 run (queries)."""
    options = dataset.options
    has_table, has_query = bool(options.get("table")), bool(options.get("query"))
    if has_table == has_query:
        raise PzConnectorError(
            f"{lead(where)}a postgres dataset needs exactly one of table: or query:", code="PZ0302"
        )
    cur = conn.cursor()
    schema = table = query = None
    if has_table:
        schema, table, columns = _table_columns(cur, str(options["table"]), where, code)
    else:
        query = str(options["query"]).strip().rstrip(";").strip()
        columns = _query_columns(cur, query, where)
    _refuse_case_clashes(columns, where, code)
    types = fetch_types(cur, {c.type_oid for c in columns})
    type_sql = _type_renderer(cur, columns, types)
    plans = [plan_column(col, types, type_sql) for col in columns]
    all_columns = {}
    for col in columns:
        base, typmod = _base(col, types)
        all_columns[col.name] = PartitionColumn(col.name, base, type_sql(base, typmod))
    contract = canonical_contract(dataset.columns, where)
    if contract:
        by_name = {p.name: p for p in plans}
        missing = [name for name in contract if name not in by_name]
        if missing:
            raise PzConnectorError(
                f"{lead(where)}contract column(s) {', '.join(missing)} not found in the source (it has: "
                f"{', '.join(by_name)})",
                code=code,
            )
        plans = [by_name[name] for name in contract]
    return Relation(schema, table, query, plans, all_columns, contract)


def _table_columns(
    cur: psycopg.Cursor[Any], table_option: str, where: str, code: str
) -> tuple[str, str, list[PgColumn]]:
    """The table's schema, name and columns, from the catalog (`code` when it does not exist)."""
    try:
        ref = TableRef.parse(table_option)
    except ValueError as exc:
        raise PzConnectorError(f"{lead(where)}table: {exc}", code="PZ0302") from exc
    cur.execute(
        "SELECT c.oid::int8, n.nspname, c.relname FROM pg_catalog.pg_class c "
        "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass(%s)",
        [ref.sql()],
    )
    row = cur.fetchone()
    if row is None:
        raise PzConnectorError(
            f"{lead(where)}table {ref} does not exist (or is not visible to this user)",
            code=code,
        )
    relid, schema, table = int(row[0]), str(row[1]), str(row[2])
    cur.execute(
        "SELECT attname, atttypid::int8, atttypmod, attndims FROM pg_catalog.pg_attribute "
        "WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
        [relid],
    )
    columns = [PgColumn(str(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in cur.fetchall()]
    return schema, table, columns


def _query_columns(cur: psycopg.Cursor[Any], query: str, where: str) -> list[PgColumn]:
    """The columns of the query's result, from a LIMIT 0 run."""
    cur.execute(f"SELECT * FROM (\n{query}\n) AS {_SRC} LIMIT 0")
    if cur.description is None or cur.pgresult is None:
        raise PzConnectorError(f"{lead(where)}query: returns no result set", code="PZ0302")
    return [
        PgColumn(d.name, int(d.type_code), int(cur.pgresult.fmod(i)), 0)
        for i, d in enumerate(cur.description)
    ]


def _refuse_case_clashes(columns: list[PgColumn], where: str, code: str) -> None:
    """Refuse two columns whose names differ only in case: one name to DuckDB."""
    seen: dict[str, str] = {}
    for col in columns:
        other = seen.get(col.name.lower())
        if other is not None:
            raise PzConnectorError(
                f"{lead(where)}the dataset has columns {other!r} and {col.name!r}, one name to DuckDB (names "
                "are case-insensitive there); rename one in a query:",
                code=code,
            )
        seen[col.name.lower()] = col.name


def _type_renderer(
    cur: psycopg.Cursor[Any], columns: list[PgColumn], types: dict[int, PgType]
) -> Callable[[int, int], str]:
    """PostgreSQL's own spelling of a type (format_type) by (OID, typmod): the columns' types and their
    domains' base types are rendered in one query up front, any other on first use."""
    rendered: dict[tuple[int, int], str] = {}
    pairs = sorted({(c.type_oid, c.typmod) for c in columns} | {(_base(c, types)) for c in columns})
    cur.execute(
        "SELECT o::int8, m, format_type(o, m) FROM unnest(%s::oid[], %s::int4[]) AS u(o, m)",
        [[o for o, _ in pairs], [m for _, m in pairs]],
    )
    for oid, typmod, text in cur.fetchall():
        rendered[(int(oid), int(typmod))] = str(text)

    def type_sql(oid: int, typmod: int) -> str:
        if (oid, typmod) not in rendered:
            cur.execute("SELECT format_type(%s::oid, %s)", [oid, typmod])
            found = cur.fetchone()
            assert found is not None
            rendered[(oid, typmod)] = str(found[0])
        return rendered[(oid, typmod)]

    return type_sql


def _base(col: PgColumn, types: dict[int, PgType]) -> tuple[int, int]:
    """The column's type with domains resolved: (base type OID, typmod)."""
    base, typmod = col.type_oid, col.typmod
    info = types.get(base)
    while info is not None and info.typtype == "d":
        typmod = info.typmod if info.typmod != -1 else typmod
        base = info.basetype
        info = types.get(base)
    return base, typmod


def canonical_contract(columns: dict[str, str] | None, where: str) -> dict[str, str] | None:
    """The contract's types as DuckDB spells them (parsed by DuckDB, so safe to place in SQL)."""
    if not columns:
        return None
    result: dict[str, str] = {}
    for name, typ in columns.items():
        try:
            result[str(name)] = parse_type(str(typ))
        except ValueError as exc:
            raise PzConnectorError(
                f"{lead(where)}contract column '{name}' has type '{typ}' that DuckDB does not know",
                code="PZ0505",
            ) from exc
    return result


# -- partitions ----------------------------------------------------------------------------------------
def make_partitions(
    conn: psycopg.Connection[Any],
    relation: Relation,
    spec: dict[str, Any],
    where: str,
    bounds: ReadBounds | None = None,
) -> list[Partition]:
    """`count` ranges of the column; an incremental read splits only the rows inside its bounds."""
    column = str(spec.get("column", ""))
    try:
        count = int(spec.get("count", 1))
    except (TypeError, ValueError) as exc:
        raise PzConnectorError(
            f"{lead(where)}partitions.count must be a whole number", code="PZ0302"
        ) from exc
    info = relation.all_columns.get(column)
    if info is None:
        raise PzConnectorError(
            f"{lead(where)}partitions.column '{column}' is not a column of the dataset", code="PZ0302"
        )
    if info.base_oid not in _PARTITION_TYPES:
        raise PzConnectorError(
            f"{lead(where)}partitions.column '{column}' has type {info.type_sql}; partitions need an "
            "integer, numeric, date or timestamp column",
            code="PZ0302",
        )
    if count <= 1:
        return [Partition(0, "all")]
    edges_found = _bounds(conn, relation, info, count, bounds_where(relation, bounds or ReadBounds()))
    if not edges_found:
        return [Partition(0, "all")]
    parts: list[Partition] = []
    edges: list[str | None] = [None, *edges_found, None]
    for index in range(len(edges) - 1):
        lower, upper = edges[index], edges[index + 1]
        if lower is None:
            text = f"{column} < {upper} (and NULL)"
        elif upper is None:
            text = f"{column} >= {lower}"
        else:
            text = f"{lower} <= {column} < {upper}"
        parts.append(Partition(index, text, {"column": column, "lower": lower, "upper": upper}))
    return parts


def _bounds(
    conn: psycopg.Connection[Any], relation: Relation, info: PartitionColumn, count: int, read: str = ""
) -> list[str]:
    ref = f"{_SRC}.{quote_ident(info.name)}"
    also = f" AND ({read})" if read else ""
    cur = conn.cursor()
    if info.base_oid in (*_INTEGER_TYPES, NUMERIC):
        finite = f" WHERE ({read})" if read else ""
        if info.base_oid == NUMERIC:
            finite = f" WHERE {ref} NOT IN ('NaN'::numeric, 'Infinity'::numeric, '-Infinity'::numeric){also}"
        cur.execute(f"SELECT min({ref})::text, max({ref})::text FROM {relation.from_sql()}{finite}")
        row = cur.fetchone()
        if row is None or row[0] is None:
            return []
        low, high = Decimal(str(row[0])), Decimal(str(row[1]))
        values: list[str] = []
        for i in range(1, count):
            if info.base_oid in _INTEGER_TYPES:
                edge = str(int(low) + ((int(high) - int(low) + 1) * i) // count)
            else:
                edge = str(low + (high - low) * i / count)
            if (not values or edge != values[-1]) and Decimal(edge) > low:
                values.append(edge)
        return values
    if info.base_oid == DATE:
        step = f"lo + (((hi - lo)::int8 * g) / {count})::int4"
    else:
        step = f"lo + (hi - lo) * (g::float8 / {count})"
    cur.execute(
        f"WITH b AS (SELECT min({ref}) AS lo, max({ref}) AS hi FROM {relation.from_sql()} "
        f"WHERE isfinite({ref}){also}) SELECT DISTINCT ({step})::text, g "
        f"FROM b, generate_series(1, {count - 1}) AS g "
        "WHERE lo IS NOT NULL AND lo < hi ORDER BY g"
    )
    out: list[str] = []
    for text, _g in cur.fetchall():
        if text not in out:
            out.append(str(text))
    return out


def read_where(relation: Relation, partition: Partition, bounds: ReadBounds) -> str:
    """The server-side predicate of one read: the partition's range AND the incremental bounds."""
    parts = [p for p in (partition_where(relation, partition), bounds_where(relation, bounds)) if p]
    return " AND ".join(f"({p})" for p in parts) if len(parts) > 1 else "".join(parts)


def bounds_where(relation: Relation, bounds: ReadBounds) -> str:
    """`cursor > lower AND cursor <= upper` (or NULL), each literal cast to the cursor's catalog type."""
    if not bounds.incremental:
        return ""
    info = relation.all_columns.get(str(bounds.cursor))
    if info is None:
        raise PzConnectorError(
            f"the cursor column '{bounds.cursor}' is not a column of the dataset (it has: "
            f"{', '.join(relation.all_columns)})",
            code="PZ0505",
        )
    if info.base_oid not in _PARTITION_TYPES:
        raise PzConnectorError(
            f"the cursor column '{bounds.cursor}' has type {info.type_sql}; a cursor needs an integer, "
            "numeric, date or timestamp column",
            code="PZ0505",
        )
    ref = f"{_SRC}.{quote_ident(info.name)}"
    return bounds_predicate(ref, bounds, lambda text: f"CAST({quote_literal(text)} AS {info.type_sql})")


def partition_where(relation: Relation, partition: Partition) -> str:
    """The server-side predicate of a partition (bounds re-typed from the catalog, never from the spec)."""
    spec = partition.spec
    if not spec:
        return ""
    info = relation.all_columns.get(str(spec.get("column")))
    if info is None:
        raise PzConnectorError(
            f"partition column {spec.get('column')!r} is not a column of the dataset", code="PZ0505"
        )
    ref = f"{_SRC}.{quote_ident(info.name)}"

    def literal(value: Any) -> str:
        return f"CAST({quote_literal(str(value))} AS {info.type_sql})"

    lower, upper = spec.get("lower"), spec.get("upper")
    parts = []
    if lower is not None:
        parts.append(f"{ref} >= {literal(lower)}")
    if upper is not None:
        parts.append(f"{ref} < {literal(upper)}")
    clause = " AND ".join(parts)
    if lower is None and clause:
        clause = f"({clause} OR {ref} IS NULL)"
    return clause


# -- native tier --------------------------------------------------------------------------------------
def extension_path() -> str:
    """The postgres_scanner extension file shipped by the `duckdb-extension-postgres-scanner` package."""
    import duckdb
    import duckdb_extension_postgres_scanner as package

    folder = os.path.join(os.path.dirname(package.__file__), "extensions")
    wanted = os.path.join(folder, f"v{duckdb.__version__}", "postgres_scanner.duckdb_extension")
    if os.path.isfile(wanted):
        return wanted
    found = sorted(glob.glob(os.path.join(folder, "*", "postgres_scanner.duckdb_extension")))
    if not found:
        raise PzConnectorError(
            "the duckdb-extension-postgres-scanner package ships no extension file; reinstall pipelinez",
            code="PZ0505",
        )
    return found[-1]


@contextlib.contextmanager
def attached(con: duckdb.DuckDBPyConnection, settings: Settings, *, read_only: bool) -> Iterator[str]:
    """ATTACH the database to `con`'s DuckDB instance under a fresh alias for the block.

    ATTACH/DETACH and the secret run on a sibling cursor (they belong to the database instance; a DETACH on
    the caller's connection would fail inside its transaction). The password goes through a temporary
    secret: the ATTACH string, which DuckDB quotes in its errors, never holds it."""
    attachment = Attachment(settings, read_only=read_only)
    try:
        yield attachment.alias_in(con)
    finally:
        attachment.drop()


class Attachment:
    """The database ATTACHed to one staging DuckDB instance under a unique alias, kept across reads.

    A connector keeps one for its source reads (one connector per partition worker): the ATTACH and the
    extension's catalog load are paid once per worker, not once per partition. After a read through it
    failed, `drop()` it: the next read ATTACHes afresh, so a connection the failure may have broken is
    never reused. `alias_in` re-ATTACHes when the alias is gone from `con`'s instance (another staging
    database, or DETACHed meanwhile)."""

    def __init__(self, settings: Settings, *, read_only: bool):
        self._settings = settings
        self._read_only = read_only
        self._aux: duckdb.DuckDBPyConnection | None = None
        self._alias: str | None = None
        self._secret: str | None = None
        self._home: duckdb.DuckDBPyConnection | None = None  # the connection alias_in last answered
        self.attaches = 0  # how many ATTACHes this attachment made (tests, benchmarks)

    def alias_in(self, con: duckdb.DuckDBPyConnection) -> str:
        """The alias of the database in `con`'s instance, ATTACHing it first when needed. Asked again with
        the connection it last answered (a partition worker's cursor), it answers without a query."""
        if self._alias is not None and con is self._home:
            return self._alias
        if self._alias is not None:
            found = con.execute(
                "SELECT count(*) FROM duckdb_databases() WHERE database_name = ?", [self._alias]
            ).fetchone()
            if found and found[0]:
                self._home = con
                return self._alias
            self.drop()
        self._attach(con)
        assert self._alias is not None
        self._home = con
        return self._alias

    def _attach(self, con: duckdb.DuckDBPyConnection) -> None:
        settings = self._settings
        token = secrets.token_hex(6)
        alias, secret = f"__pz_pg_{token}", f"__pz_pg_secret_{token}"
        aux = con.cursor()
        try:
            aux.execute(f"LOAD {quote_literal(extension_path())}")
            options = f"TYPE postgres{', READ_ONLY' if self._read_only else ''}"
            if settings.password:
                aux.execute(
                    f"CREATE TEMPORARY SECRET {quote_ident(secret)} "
                    f"(TYPE postgres, PASSWORD {quote_literal(settings.password)})"
                )
                self._secret = secret
                options += f", SECRET {quote_ident(secret)}"
            self._aux = aux
            aux.execute(
                f"ATTACH {quote_literal(settings.libpq(with_password=False))} AS {quote_ident(alias)} "
                f"({options})"
            )
        except BaseException:
            self._aux = aux
            self.drop()
            raise
        self._alias = alias
        self.attaches += 1

    def drop(self) -> None:
        """DETACH (closing the extension's connections to the server) and forget the secret; quiet."""
        aux, alias, secret = self._aux, self._alias, self._secret
        self._aux = self._alias = self._secret = self._home = None
        if aux is None:
            return
        try:
            if alias is not None:
                with contextlib.suppress(Exception):
                    aux.execute(f"DETACH {quote_ident(alias)}")
            if secret is not None:
                with contextlib.suppress(Exception):
                    aux.execute(f"DROP TEMPORARY SECRET IF EXISTS {quote_ident(secret)}")
        finally:
            with contextlib.suppress(Exception):
                aux.close()


def extract_native(
    con: duckdb.DuckDBPyConnection,
    conn: psycopg.Connection[Any],
    settings: Settings,
    relation: Relation,
    partition: Partition,
    target: str,
    where: str,
    bounds: ReadBounds | None = None,
    attachment: Attachment | None = None,
    compression: str = "auto",
) -> None:
    """Land the partition's rows in `target` through `attachment` (kept by the caller across reads, and
    dropped here when the read fails), or through an ATTACH of its own for this read."""
    import duckdb

    bounds = bounds or ReadBounds()
    own = attachment is None
    through = attachment or Attachment(settings, read_only=True)
    try:
        alias = through.alias_in(con)
        if relation.attach_scan_ok(partition, bounds):
            assert relation.schema is not None and relation.table is not None
            source = f"{quote_ident(alias)}.{quote_ident(relation.schema)}.{quote_ident(relation.table)}"
        else:
            pg_sql = relation.select_sql(False, read_where(relation, partition, bounds))
            source = f"postgres_query({quote_literal(alias)}, {quote_literal(pg_sql)})"
        land(con, target, f"SELECT {relation.duck_projection() or '*'} FROM {source}", compression)
    except duckdb.Error as exc:
        through.drop()
        raise settings.error(exc, where, "PZ0505") from exc
    except BaseException:
        through.drop()
        raise
    finally:
        if own:
            through.drop()
    _range_guard(con, relation, target)
    if relation.attach_scan_ok(partition, bounds):
        _nan_guard(con, conn, settings, relation, target, where)


def _range_guard(con: duckdb.DuckDBPyConnection, relation: Relation, target: str) -> None:
    """PZ0518 when a staged timestamp wrapped around (a PostgreSQL value past DuckDB's latest): one
    aggregate over the staged timestamp columns, nothing when the dataset has none."""
    guarded = [p for p in relation.plans if p.canon.kind in ("timestamp", "timestamptz")]
    if not guarded:
        return
    tests = []
    for plan in guarded:
        col = quote_ident(plan.name)
        wrapped = f"isfinite({{v}}) AND epoch_us({{v}}) < {EARLIEST_PG_TS_US}"
        if plan.canon.is_list:
            tests.append(f"count_if(list_bool_or(list_transform({col}, x -> {wrapped.format(v='x')})))")
        else:
            tests.append(f"count_if({wrapped.format(v=col)})")
    row = con.execute(f"SELECT {', '.join(tests)} FROM {target}").fetchone()
    for plan, hits in zip(guarded, row or (), strict=False):
        if hits:
            raise out_of_range(plan.name)


def _nan_guard(
    con: duckdb.DuckDBPyConnection,
    conn: psycopg.Connection[Any],
    settings: Settings,
    relation: Relation,
    target: str,
    where: str,
) -> None:
    """The extension's binary reader decodes numeric NaN as 0. When a numeric(p<=38) column was staged
    with a zero, ask the server whether that zero was a NaN (which DECIMAL cannot hold), and refuse.

    The question covers the staged zero rows only when the table has a primary key (or unique index) that
    was staged exactly and there are at most GUARD_KEY_LIMIT such rows: they are looked up by key, and the
    answer counts only when every key is still found (one row each). Otherwise the server scans the table
    for NaN in those columns."""
    guarded = [p for p in relation.plans if p.nan_guard]
    if not guarded:
        return
    zeros = [_staged_zero(plan) for plan in guarded]
    row = con.execute(f"SELECT {', '.join(f'count_if({z})' for z in zeros)} FROM {target}").fetchone()
    counts = [int(n or 0) for n in row or ()]
    suspects = [plan for plan, n in zip(guarded, counts, strict=False) if n]
    if not suspects:
        return
    try:
        found = None
        if sum(counts) <= GUARD_KEY_LIMIT:  # the sum bounds the number of zero rows to look up
            found = _nan_by_key(con, conn, relation, target, suspects)
        if found is None:
            found = _nan_by_scan(conn, relation, suspects)
    except Exception as exc:
        raise settings.error(exc, where, "PZ0505") from exc
    bad = [plan.name for plan, hit in zip(suspects, found, strict=False) if hit]
    if bad:
        raise PzConnectorError(
            f"{lead(where)}column(s) {', '.join(bad)} hold NaN, which DECIMAL cannot hold; read the "
            "dataset with a query: that maps it (e.g. NULLIF(col, 'NaN'))",
            code="PZ0505",
        )


def _staged_zero(plan: ColumnPlan) -> str:
    """DuckDB predicate: the staged value of a guarded column is (or, for a list, holds) a zero."""
    col = quote_ident(plan.name)
    if plan.canon.is_list:
        return f"list_contains({col}, CAST(0 AS {plan.canon.duck().removesuffix('[]')}))"
    return f"{col} = 0"


def _server_nan(plan: ColumnPlan) -> str:
    """PostgreSQL predicate: the column's value is (or, for an array, holds) NaN."""
    ref = f"{_SRC}.{quote_ident(plan.name)}"
    return f"'NaN'::numeric = ANY({ref})" if plan.canon.is_list else f"{ref} = 'NaN'::numeric"


def _nan_by_scan(conn: psycopg.Connection[Any], relation: Relation, suspects: list[ColumnPlan]) -> list[bool]:
    """Whether each suspect column holds NaN anywhere in the table: one scan for all of them."""
    conditions = [_server_nan(plan) for plan in suspects]
    cur = conn.cursor()
    cur.execute(
        f"SELECT {', '.join(f'bool_or({c})' for c in conditions)} FROM {relation.from_sql()} "
        f"WHERE {' OR '.join(conditions)}"
    )
    found = cur.fetchone()
    return [bool(hit) for hit in found or ()]


def _nan_by_key(
    con: duckdb.DuckDBPyConnection,
    conn: psycopg.Connection[Any],
    relation: Relation,
    target: str,
    suspects: list[ColumnPlan],
) -> list[bool] | None:
    """Whether each suspect column holds NaN in the rows staged with a zero there, looked up by key; None
    when that cannot answer for every such row (no usable key, too many rows, a NULL key, or a key that
    no longer finds exactly one row on the server)."""
    key = _guard_key(conn, relation)
    if key is None:
        return None
    cols = ", ".join(quote_ident(name) for name, _ in key)
    rows = con.execute(
        f"SELECT DISTINCT {cols} FROM {target} WHERE {' OR '.join(_staged_zero(p) for p in suspects)} "
        f"ORDER BY ALL LIMIT {GUARD_KEY_LIMIT + 1}"
    ).fetchall()
    if not rows or len(rows) > GUARD_KEY_LIMIT or any(value is None for r in rows for value in r):
        return None
    columns = ", ".join(f"k{i}" for i in range(len(key)))
    arrays = ", ".join(f"%s::{typ}[]" for _, typ in key)
    on = " AND ".join(f"{_SRC}.{quote_ident(name)} = pz_key.k{i}" for i, (name, _) in enumerate(key))
    checks = ", ".join(f"bool_or({_server_nan(plan)})" for plan in suspects)
    cur = conn.cursor()
    cur.execute(
        f"SELECT count(*), {checks} FROM {relation.from_sql()} "
        f"JOIN unnest({arrays}) AS pz_key({columns}) ON {on}",
        [[r[i] for r in rows] for i in range(len(key))],
    )
    found = cur.fetchone()
    if found is None or found[0] != len(rows):
        return None
    return [bool(hit) for hit in found[1:]]


def _guard_key(conn: psycopg.Connection[Any], relation: Relation) -> list[tuple[str, str]] | None:
    """The (column, array type) pairs of the table's primary key, else of its narrowest unique index, whose
    columns were all staged exactly (selected, not cast by the contract, of a type in _GUARD_KEY_TYPES);
    None when the table has no such key."""
    assert relation.schema is not None and relation.table is not None
    by_name = {plan.name: plan for plan in relation.plans}
    cur = conn.cursor()
    cur.execute(
        "SELECT array_agg(a.attname::text ORDER BY k.ord) FROM pg_catalog.pg_index i "
        "CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord) "
        "JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
        "WHERE i.indrelid = to_regclass(%s) AND i.indisunique AND i.indisvalid AND i.indpred IS NULL "
        "AND i.indexprs IS NULL AND k.ord <= i.indnkeyatts "
        "GROUP BY i.indexrelid, i.indisprimary ORDER BY i.indisprimary DESC, count(*), i.indexrelid",
        [f"{quote_ident(relation.schema)}.{quote_ident(relation.table)}"],
    )
    for (names,) in cur.fetchall():
        key: list[tuple[str, str]] = []
        for name in names:
            plan, info = by_name.get(name), relation.all_columns.get(name)
            typ = _GUARD_KEY_TYPES.get(info.base_oid) if info is not None else None
            if plan is None or typ is None or not plan.attach_ok or plan.canon.is_list:
                break
            if relation.contract and relation.contract.get(name, plan.duck) != plan.duck:
                break
            key.append((name, typ))
        else:
            return key
    return None


def land(con: duckdb.DuckDBPyConnection, target: str, select: str, compression: str = "auto") -> None:
    """Create `target` from `select` (compressed as `create_staging_table` says), or insert into it by
    column name when it exists already."""
    if table_exists(con, target):
        con.execute(f"INSERT INTO {target} BY NAME {select}")
    elif create_staging_table(con, target, select, compression):
        con.execute(f"INSERT INTO {target} {select}")
    else:
        con.execute(f"CREATE TABLE {target} AS {select}")


def table_exists(con: duckdb.DuckDBPyConnection, quoted: str) -> bool:
    """Whether the staging table `quoted` (quoted, maybe qualified) exists: one lookup, never an enumeration
    of the instance's catalogs (see `pipelinez.core.duck_catalog`)."""
    return duck_catalog.table_exists(con, quoted)


# -- universal tier ---------------------------------------------------------------------------------
class ReaderConnection:
    """The ADBC connection a connector's universal-tier reads share (autocommit: each read is one COPY
    statement, no transaction left open between reads). Opening one costs a handshake and the driver's type
    catalog load (about 0.3 s), so a partition worker opens it once for all its partitions.

    A read takes the connection out (`acquire`) and gives it back (`release`) only when it finished cleanly;
    a read that failed, or was abandoned mid-stream, closes its connection instead, so the next read connects
    afresh and a connection that may be broken or mid-COPY is never reused."""

    def __init__(self, settings: Settings):
        self._settings = settings
        self._idle: Any = None
        self._lock = threading.Lock()  # an abandoned read may be finalized on another thread
        self.opened = 0  # connections opened (tests, benchmarks)

    def acquire(self) -> Any:
        with self._lock:
            conn, self._idle = self._idle, None
        if conn is None:
            conn = self._settings.adbc("PZ0505", autocommit=True)
            self.opened += 1
        return conn

    def release(self, conn: Any, *, reusable: bool) -> None:
        with self._lock:
            if reusable and self._idle is None:
                self._idle = conn
                return
        with contextlib.suppress(Exception):
            conn.close()

    def close(self) -> None:
        with self._lock:
            conn, self._idle = self._idle, None
        if conn is not None:
            self.release(conn, reusable=False)


def extract_batches(
    settings: Settings,
    relation: Relation,
    partition: Partition,
    where: str,
    bounds: ReadBounds | None = None,
    reader_connection: ReaderConnection | None = None,
) -> Iterator[pa.RecordBatch]:
    """The partition's rows as Arrow batches, read through `reader_connection` (kept by the caller across
    reads) or through a connection of its own."""
    import pyarrow as pa

    sql = relation.select_sql(True, read_where(relation, partition, bounds or ReadBounds()))
    schema = arrow_schema(relation.plans)
    through = reader_connection or ReaderConnection(settings)
    finished = False
    conn = through.acquire()
    try:
        cur = conn.cursor()
        try:
            try:
                cur.execute(sql)
                reader = cur.fetch_record_batch()
            except Exception as exc:
                raise settings.error(exc, where, "PZ0505") from exc
            produced = False
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    break
                except Exception as exc:
                    raise settings.error(exc, where, "PZ0505") from exc
                produced = True
                try:
                    yield convert_batch(batch, relation.plans, schema)
                except PzConnectorError as exc:
                    raise PzConnectorError(
                        f"{lead(where)}{settings.scrub(exc.message)}", code=exc.code or "PZ0505"
                    ) from exc
            finished = True
            if not produced:
                yield pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)
        finally:
            with contextlib.suppress(Exception):
                cur.close()
    finally:
        through.release(conn, reusable=finished and reader_connection is not None)
