"""The column types check binds read: one statement for every table, each table's the same as DESCRIBE
gives; what that statement cannot answer alike (a view, a temporary table shadowing one) is DESCRIBEd."""

from __future__ import annotations

import duckdb

from pipelinez.compile.check_types import TypeLookups, column_types


def test_every_tables_types_come_from_one_statement_as_describe_gives_them() -> None:
    con = duckdb.connect()
    con.execute('CREATE TABLE a (id BIGINT, amount DECIMAL(18,2), "Odd Name" STRUCT(x INT, "y z" VARCHAR))')
    con.execute("CREATE TABLE b (seen TIMESTAMP WITH TIME ZONE, tags VARCHAR[], m MAP(VARCHAR, INT[]))")
    con.execute("CREATE TABLE c (e ENUM('x', 'y'), u UNION(n INT, s VARCHAR))")
    lookups = TypeLookups(con)
    for table in ("a", "b", "c"):
        assert lookups.column_types(table) == column_types(con, table)
    assert lookups.queries == 1


def test_a_view_or_a_shadowed_table_is_described() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id BIGINT)")
    con.execute("CREATE TEMPORARY TABLE t (name VARCHAR)")  # DESCRIBE t finds this one
    con.execute("CREATE VIEW v AS SELECT NULL AS nothing, 1 AS one")
    lookups = TypeLookups(con)
    assert lookups.column_types("t") == column_types(con, "t") == {"name": "VARCHAR"}
    assert lookups.column_types("v") == column_types(con, "v")
    assert lookups.queries == 3
