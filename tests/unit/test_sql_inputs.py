"""The guard on what a query reads: the text scan never lets a table function past, and the run refuses
what validate could not see (a secret's value, masked there)."""

from __future__ import annotations

import duckdb
import pytest

from pipelinez.compile.sql_inputs import may_read_outside, outside_reads
from pipelinez.engine.nodes.node_runners import refuse_outside_reads
from pipelinez.engine.run.failures import NodeFailure

TABLE_FUNCTIONS = ["read_csv", "read_text", "read_blob", "query", "duckdb_settings", "glob", "parquet_scan"]


@pytest.mark.parametrize("name", TABLE_FUNCTIONS)
@pytest.mark.parametrize(
    "shape",
    ["SELECT * FROM {f}('x')", "SELECT * FROM \"{F}\"('x')", "SELECT * FROM t, {f} /* c */ -- d\n ('x')"],
)
def test_every_table_function_call_reaches_the_parse_tree(name: str, shape: str) -> None:
    sql = shape.format(f=name, F=name.upper())
    assert may_read_outside(sql)
    con = duckdb.connect()
    assert [r.what for r in outside_reads(con, sql)] == [f"table function {name}()"]


def test_plain_queries_skip_the_parser() -> None:
    sql = "SELECT a, count(*) AS n, CAST(sum(b) AS decimal(18, 2)) FROM t WHERE a IN (1, 2) GROUP BY a"
    assert not may_read_outside(sql)


def test_the_run_refuses_an_outside_read_unless_allowed() -> None:
    con = duckdb.connect()
    sql = "SELECT * FROM read_text('/etc/hostname')"
    with pytest.raises(NodeFailure) as caught:
        refuse_outside_reads(con, sql, False, "pipeline 'p'")
    assert caught.value.code == "PZ0413" and "read_text()" in caught.value.message
    refuse_outside_reads(con, sql, True, "pipeline 'p'")  # engine.external_access: true


def test_the_run_refuses_a_qualified_table_the_scan_lets_by() -> None:
    """No call, no catalog view: tier 4's scan skips the parse (the name does not bind there), but the run
    parses every query, so a table of an attached database (a DuckDB sink's) is refused there."""
    con = duckdb.connect()
    sql = "SELECT * FROM wh.main.orders"
    assert not may_read_outside(sql)
    with pytest.raises(NodeFailure) as caught:
        refuse_outside_reads(con, sql, False, "pipeline 'p'")
    assert caught.value.code == "PZ0413" and "wh.main.orders" in caught.value.message


def test_no_name_the_scan_lets_by_is_a_table_function() -> None:
    """The text scan skips the parser only for names that are never a table function in this DuckDB."""
    from pipelinez.compile import sql_inputs

    con = duckdb.connect()
    rows = con.execute(
        "SELECT DISTINCT lower(function_name) FROM duckdb_functions() "
        "WHERE function_type IN ('table', 'table_macro')"
    ).fetchall()
    tables = {str(r[0]) for r in rows}
    assert tables & sql_inputs._NEVER_TABLE <= sql_inputs.ALLOWED_TABLE_FUNCTIONS


def test_every_catalog_view_a_query_can_name_is_known() -> None:
    from pipelinez.compile import sql_inputs

    rows = (
        duckdb.connect()
        .execute(
            "SELECT DISTINCT lower(view_name) FROM duckdb_views() "
            "WHERE internal AND schema_name IN ('main', 'pg_catalog')"
        )
        .fetchall()
    )
    assert {str(r[0]) for r in rows} <= sql_inputs.CATALOG_VIEWS


@pytest.mark.parametrize(
    ("sql", "what"),
    [
        ("SELECT * FROM duckdb_databases", "the catalog view duckdb_databases"),
        ("SELECT * FROM t JOIN pg_settings ON true", "the catalog view pg_settings"),
        (
            "SELECT * FROM information_schema.tables",
            "table information_schema.tables of another database or schema",
        ),
    ],
)
def test_catalog_views_are_outside_reads(sql: str, what: str) -> None:
    con = duckdb.connect()
    assert may_read_outside(sql)
    assert [r.what for r in outside_reads(con, sql)] == [what]


def test_a_pivot_is_judged_by_the_names_it_calls() -> None:
    """DuckDB does not serialize a PIVOT's statements: its table functions and catalog views are named."""
    con = duckdb.connect()
    sql = "SELECT * FROM (PIVOT (SELECT * FROM read_text('x'), duckdb_tables) ON a USING count(*))"
    assert sorted(r.what for r in outside_reads(con, sql)) == [
        "table function read_text()",
        "the catalog view duckdb_tables",
    ]


def test_every_catalog_hint_starts_with_a_stem() -> None:
    from pipelinez.compile import sql_inputs

    assert all(hint.startswith(sql_inputs._CATALOG_STEMS) for hint in sql_inputs._CATALOG_HINTS)
