"""The guards after a native-tier read landed in staging: a PostgreSQL timestamp past DuckDB's range wraps
around (`range_guard`), and the extension's binary table scan stages a NaN of numeric as 0 (`nan_guard`,
which asks the server about the staged zeros: by key when it can, else by a scan)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipelinez.connectors.postgres.arrow_convert import out_of_range
from pipelinez.connectors.postgres.settings import Settings, lead
from pipelinez.connectors.postgres.source import SRC_ALIAS, Relation
from pipelinez.connectors.postgres.types import (
    EARLIEST_PG_TS_US,
    INT2,
    INT4,
    INT8,
    TEXT,
    UUID,
    VARCHAR,
    ColumnPlan,
)
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident

if TYPE_CHECKING:
    import duckdb
    import psycopg

# key columns the NaN guard's lookup can compare exactly with their staged values, and the array type
# their values are sent as
_GUARD_KEY_TYPES = {INT2: "int8", INT4: "int8", INT8: "int8", TEXT: "text", VARCHAR: "text", UUID: "uuid"}
# at most this many staged zero rows are looked up by key; more, and the server scans the table
GUARD_KEY_LIMIT = 10_000


def range_guard(con: duckdb.DuckDBPyConnection, relation: Relation, target: str) -> None:
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


def nan_guard(
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
    ref = f"{SRC_ALIAS}.{quote_ident(plan.name)}"
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
    on = " AND ".join(f"{SRC_ALIAS}.{quote_ident(name)} = pz_key.k{i}" for i, (name, _) in enumerate(key))
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
