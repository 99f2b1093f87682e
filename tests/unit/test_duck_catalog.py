"""core/duck_catalog: one name resolved, never an enumeration. Tables vs views, qualified and odd names,
misses of every part, the isolation setting, and a miss inside a transaction. The proof that a lookup never
reaches another attached database (a lost PostgreSQL attachment) is in tests/functional/test_faults.py."""

from __future__ import annotations

from pathlib import Path

import duckdb

from pipelinez.core import duck_catalog


def test_tables_views_and_misses(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "stage.duckdb"))
    duck_catalog.isolate(con)
    con.execute('CREATE TABLE "we.ird""t" (a INT, "b c" DECIMAL(12,2), t TIMESTAMPTZ)')
    con.execute("CREATE VIEW v AS SELECT 1 AS id")
    con.execute("CREATE TABLE r (rowid INT)")  # a column named rowid is still a table
    cur = con.cursor()
    odd = duck_catalog.qualified('we.ird"t')
    assert duck_catalog.columns_of(cur, odd) == [
        ("a", "INTEGER"),
        ("b c", "DECIMAL(12,2)"),
        ("t", "TIMESTAMP WITH TIME ZONE"),
    ]
    assert duck_catalog.columns_of(cur, duck_catalog.qualified('we.ird"t', "main", "stage")) is not None
    assert duck_catalog.columns_of(cur, '"v"') == [("id", "INTEGER")]
    assert [duck_catalog.table_exists(cur, q) for q in (odd, '"v"', '"r"')] == [True, False, True]
    for missing in ('"nosuch"', '"stage"."nosch"."t"', '"nodb"."main"."t"'):
        assert duck_catalog.columns_of(cur, missing) is None
        assert not duck_catalog.table_exists(cur, missing)
    setting = con.execute("SELECT current_setting('catalog_error_max_schemas')").fetchone()
    assert setting is not None and int(setting[0]) == 0


def test_a_miss_inside_a_transaction_leaves_it_usable(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "stage.duckdb"))
    con.execute("BEGIN TRANSACTION")
    con.execute("CREATE TABLE t (a INT)")
    assert duck_catalog.table_exists(con, '"t"') and not duck_catalog.table_exists(con, '"u"')
    con.execute("INSERT INTO t VALUES (1)")
    con.execute("COMMIT")
    assert con.execute("SELECT count(*) FROM t").fetchone() == (1,)
