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

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.postgres.settings import TableRef, lead
from pipelinez.connectors.postgres.types import (
    DATE,
    INT2,
    INT4,
    INT8,
    NUMERIC,
    TIMESTAMP,
    TIMESTAMPTZ,
    ColumnPlan,
    PgColumn,
    PgType,
    fetch_types,
    plan_column,
)
from pipelinez.connectors.sdk import DatasetRequest, Partition, ReadBounds, bounds_predicate
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.duck_types import parse_type
from pipelinez.core.sqlnames import quote_ident, quote_literal

if TYPE_CHECKING:
    import psycopg

    from pipelinez.connectors.postgres.catalog import CatalogConnection, CatalogCursor

SRC_ALIAS = "pz_src"  # the alias of the dataset in every server-side SELECT
_INTEGER_TYPES = (INT2, INT4, INT8)
_PARTITION_TYPES = (*_INTEGER_TYPES, NUMERIC, DATE, TIMESTAMP, TIMESTAMPTZ)


@dataclass(frozen=True)
class PartitionColumn:
    name: str
    base_oid: int
    type_sql: str
    not_null: bool = False  # the table's column is NOT NULL (a query's columns: unknown, False)


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
            return f"{quote_ident(self.schema)}.{quote_ident(self.table)} AS {SRC_ALIAS}"
        return f"(\n{self.query}\n) AS {SRC_ALIAS}"

    def select_sql(self, universal: bool, where: str) -> str:
        """The server-side SELECT of a tier (native query path or universal)."""
        items = []
        for plan in self.plans:
            ref = f"{SRC_ALIAS}.{quote_ident(plan.name)}"
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
def describe(conn: CatalogConnection, dataset: DatasetRequest, where: str, code: str) -> Relation:
    """Describe the dataset through the catalog (tables) or a LIMIT 0 run (queries). `conn`: psycopg's, or
    the native read's attachment for a table (`catalog.ExtensionCatalog`); a query needs psycopg's."""
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
        all_columns[col.name] = PartitionColumn(col.name, base, type_sql(base, typmod), col.not_null)
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
    cur: CatalogCursor, table_option: str, where: str, code: str
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
        # NOT NULL only where PostgreSQL enforces it on every row the relation returns: a plain table with
        # no child (an inheritance child may drop it, a foreign table never checks it) and no NOT VALID
        # not-null constraint (PostgreSQL 18's contype 'n'; no such row before)
        "SELECT a.attname, a.atttypid::int8, a.atttypmod, a.attndims, a.attnotnull AND c.relkind = 'r' "
        "AND NOT c.relhassubclass AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint k "
        "WHERE k.conrelid = a.attrelid AND k.contype = 'n' AND NOT k.convalidated "
        "AND a.attnum = ANY (k.conkey)) "
        "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
        "WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
        [relid],
    )
    columns = [PgColumn(str(r[0]), int(r[1]), int(r[2]), int(r[3]), bool(r[4])) for r in cur.fetchall()]
    return schema, table, columns


def _query_columns(cur: psycopg.Cursor[Any], query: str, where: str) -> list[PgColumn]:
    """The columns of the query's result, from a LIMIT 0 run."""
    cur.execute(f"SELECT * FROM (\n{query}\n) AS {SRC_ALIAS} LIMIT 0")
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
    cur: CatalogCursor, columns: list[PgColumn], types: dict[int, PgType]
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
    ref = f"{SRC_ALIAS}.{quote_ident(info.name)}"
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
    ref = f"{SRC_ALIAS}.{quote_ident(info.name)}"
    # rows with a NULL cursor are read every time; a NOT NULL column has none, and without the `OR … IS
    # NULL` PostgreSQL (before 17) reads the window with a plain index scan, not a parallel, JIT-compiled
    # bitmap OR
    return bounds_predicate(
        ref,
        bounds,
        lambda text: f"CAST({quote_literal(text)} AS {info.type_sql})",
        nullable=not info.not_null,
    )


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
    ref = f"{SRC_ALIAS}.{quote_ident(info.name)}"

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
