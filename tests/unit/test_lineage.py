"""Column lineage over a corpus of tricky SQL: each pipeline column's upstream columns, as sqlglot traces them
with the column types DuckDB binds (as tier 4 does), and what cannot be traced said so, never guessed."""

from __future__ import annotations

import duckdb
import pytest

from pipelinez.compile.described import Described
from pipelinez.compile.lineage import PIPELINE, SOURCE, ColumnRef, ProjectLineage, project_lineage

TABLES = {
    "src_shop__orders": "id BIGINT, customer_id BIGINT, amount DECIMAL(10,2), status VARCHAR, "
    "placed TIMESTAMP",
    "src_shop__customers": "id BIGINT, name VARCHAR, country VARCHAR, "
    "address STRUCT(city VARCHAR, zip VARCHAR)",
}
STAGING = {"src_shop__orders": "shop.orders", "src_shop__customers": "shop.customers"}


def lineage_of(pipelines: dict[str, str]) -> ProjectLineage:
    """Bind the sources and then each pipeline (in order) in DuckDB, describe them, trace with sqlglot."""
    con = duckdb.connect()
    for table, columns in TABLES.items():
        con.execute(f"CREATE TABLE {table} ({columns})")
    for name, sql in pipelines.items():
        con.execute(f'CREATE TABLE "{name}" AS {sql} WITH NO DATA')
    columns = {
        table: tuple((str(r[0]), str(r[1])) for r in con.execute(f'DESCRIBE "{table}"').fetchall())
        for table in [*TABLES, *pipelines]
    }
    return project_lineage(Described(columns, dict(pipelines)), STAGING)


def up(lineage: ProjectLineage, pipeline: str, column: str) -> set[str]:
    line = lineage.of(pipeline, column)
    assert line is not None, f"{pipeline}.{column} has no lineage"
    assert line.unresolved is None, line.unresolved
    return {str(ref) for ref in line.upstream}


CORPUS = [
    pytest.param(
        "WITH paid AS (SELECT customer_id, sum(amount) AS total FROM src_shop__orders WHERE status = 'paid' "
        "GROUP BY customer_id), named AS (SELECT c.name, p.total FROM paid p JOIN src_shop__customers c "
        "ON c.id = p.customer_id) SELECT name AS customer, total FROM named",
        {"customer": {"shop.customers.name"}, "total": {"shop.orders.amount"}},
        id="ctes-join-aggregate",
    ),
    pytest.param(
        "SELECT * EXCLUDE (status, placed) REPLACE (amount * 100 AS amount) FROM src_shop__orders",
        {
            "id": {"shop.orders.id"},
            "customer_id": {"shop.orders.customer_id"},
            "amount": {"shop.orders.amount"},
        },
        id="star-exclude-replace",
    ),
    pytest.param(
        "SELECT o.*, c.name FROM src_shop__orders o JOIN src_shop__customers c ON c.id = o.customer_id",
        {"status": {"shop.orders.status"}, "name": {"shop.customers.name"}, "placed": {"shop.orders.placed"}},
        id="qualified-star-join",
    ),
    pytest.param(
        "SELECT id, name, amount FROM src_shop__orders JOIN src_shop__customers USING (id)",
        {"id": {"shop.orders.id", "shop.customers.id"}, "name": {"shop.customers.name"}},
        id="using-join",
    ),
    pytest.param(
        "SELECT id, row_number() OVER (PARTITION BY customer_id ORDER BY placed) AS nth, "
        "sum(amount) OVER (ORDER BY placed ROWS UNBOUNDED PRECEDING) AS running FROM src_shop__orders",
        {
            "nth": {"shop.orders.customer_id", "shop.orders.placed"},
            "running": {"shop.orders.amount", "shop.orders.placed"},
        },
        id="window-functions",
    ),
    pytest.param(
        "SELECT id, status AS label FROM src_shop__orders UNION ALL SELECT id, name FROM src_shop__customers",
        {
            "id": {"shop.orders.id", "shop.customers.id"},
            "label": {"shop.orders.status", "shop.customers.name"},
        },
        id="union-all",
    ),
    pytest.param(
        "SELECT address.city AS city, c.address['zip'] AS zip FROM src_shop__customers c",
        {"city": {"shop.customers.address"}, "zip": {"shop.customers.address"}},
        id="struct-fields",
    ),
    pytest.param(
        "SELECT amount * 2 AS doubled, doubled + customer_id AS lateral_sum FROM src_shop__orders",
        {"doubled": {"shop.orders.amount"}, "lateral_sum": {"shop.orders.amount", "shop.orders.customer_id"}},
        id="lateral-column-alias",
    ),
    pytest.param(
        "SELECT x.c AS country, count(*) AS n, 42 AS answer "
        "FROM (SELECT country AS c FROM src_shop__customers) AS x GROUP BY ALL",
        {"country": {"shop.customers.country"}, "n": set(), "answer": set()},
        id="subquery-count-star-constant",
    ),
    pytest.param(
        "SELECT id, CASE WHEN amount > 100 THEN 'big' ELSE status END AS size FROM src_shop__orders "
        "QUALIFY row_number() OVER (PARTITION BY id) = 1",
        {"size": {"shop.orders.amount", "shop.orders.status"}},
        id="case-qualify",
    ),
]


@pytest.mark.parametrize(("sql", "expected"), CORPUS)
def test_each_column_traces_to_exactly_its_upstream_columns(sql: str, expected: dict[str, set[str]]) -> None:
    lineage = lineage_of({"p": sql})
    for column, upstream in expected.items():
        assert up(lineage, "p", column) == upstream, column


def test_lineage_goes_from_pipeline_to_pipeline_back_to_the_source_datasets() -> None:
    lineage = lineage_of(
        {
            "enriched": "SELECT o.id AS order_id, o.amount, c.name AS customer FROM src_shop__orders o "
            "JOIN src_shop__customers c ON c.id = o.customer_id",
            "Revenue": 'SELECT customer, sum(amount) AS lifetime_value FROM "enriched" GROUP BY customer',
        }
    )
    assert up(lineage, "Revenue", "lifetime_value") == {"enriched.amount"}
    steps = [(depth, str(ref)) for depth, ref, _ in lineage.walk_up("revenue", "LIFETIME_VALUE")]
    assert steps == [(1, "enriched.amount"), (2, "shop.orders.amount")]
    assert lineage.source_columns("Revenue", "lifetime_value") == [ColumnRef(SOURCE, "shop.orders", "amount")]
    assert [line.column for line in lineage.downstream(ColumnRef(PIPELINE, "enriched", "customer"))] == [
        "customer"
    ]


def test_a_column_sqlglot_cannot_place_is_unresolved_with_a_reason() -> None:
    lineage = lineage_of({"p": "SELECT COLUMNS('^(id|name)$') FROM src_shop__customers"})
    for column in ("id", "name"):
        line = lineage.of("p", column)
        assert line is not None and line.upstream == ()
        assert line.unresolved and "COLUMNS()" in line.unresolved


def test_a_query_sqlglot_cannot_parse_leaves_every_column_unresolved() -> None:
    described = Described(
        {"p": (("a", "INTEGER"), ("b", "INTEGER"))}, {"p": "SELECT a, b FROM (((src_shop__orders"}
    )
    lineage = project_lineage(described, STAGING)
    for column in ("a", "b"):
        line = lineage.of("p", column)
        assert line is not None and line.unresolved and "cannot read" in line.unresolved
