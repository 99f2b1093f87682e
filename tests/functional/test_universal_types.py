"""Universal-tier sinks write the types the native tier writes: UUID and JSON columns (top level and inside
lists) and lists, in postgres, a duckdb file and localfiles' csv, parquet and json outputs, compared tier
against tier (they landed as text, and a list failed the CSV writer with a raw pyarrow message)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest

from tests.conftest import PG_HOST, PG_PORT, PG_USER, fresh_pg_database, pz, write_project

pytestmark = pytest.mark.postgres

ROWS_SQL = """
    SELECT range AS id,
           uuid '6f1c2b5a-0d4e-4a55-9a3e-2f3c6b7d8e9f' AS u,
           ('{"a": [1, ' || range || ']}')::JSON AS j,
           [1, 2, range::INTEGER] AS l,
           ['x', NULL] AS ls,
           [uuid '00000000-0000-0000-0000-00000000000a'] AS lu
    FROM range(3)
"""
SINKS = ("pg", "wh", "csv", "pq", "js")


def _project(root: Path, database: str, universal: bool) -> Path:
    files = {
        "project.yml": "name: types\n" + ("engine: { force_universal: true }\n" if universal else ""),
        "sinks/pg.yml": f"""
            connector: postgres
            connection: {{ host: {PG_HOST}, port: {PG_PORT}, user: {PG_USER}, database: {database} }}
            outputs:
              out: {{ table: public.{"u" if universal else "n"} }}
        """,
        "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n"
        "outputs: { out: { table: t } }\n",
        **{
            f"sinks/{name}.yml": f"connector: localfiles\nconnection: {{ root: out/{name} }}\n"
            f"outputs: {{ out: {{ format: {fmt} }} }}\n"
            for name, fmt in (("csv", "csv"), ("pq", "parquet"), ("js", "json"))
        },
    }
    for sink in SINKS:
        rows = f"SELECT * EXCLUDE (lu) FROM ({ROWS_SQL})" if sink == "pg" else ROWS_SQL  # see below
        files[f"pipelines/to_{sink}.sql"] = f"INSERT INTO {{{{ sink('{sink}', 'out') }}}}\n{rows}"
    return write_project(root, files)


def _landed(project: Path, database: str, table: str) -> dict[str, Any]:
    out = project / "out"
    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=database) as con:
        pg_types = con.execute(
            "SELECT column_name, udt_name FROM information_schema.columns WHERE table_name = %s "
            "ORDER BY ordinal_position",
            (table,),
        ).fetchall()
        pg_rows = con.execute(f"SELECT * FROM public.{table} ORDER BY id").fetchall()  # type: ignore[arg-type]
    with duckdb.connect(str(out / "wh.duckdb"), read_only=True) as con:
        wh = (con.execute("DESCRIBE t").fetchall(), con.execute("SELECT * FROM t ORDER BY id").fetchall())
    parquet = f"{out}/pq/out.parquet/*.parquet"
    return {
        "pg": (pg_types, pg_rows),
        "wh": wh,
        "pq": (
            duckdb.sql(f"DESCRIBE SELECT * FROM '{parquet}'").fetchall(),
            duckdb.sql(f"SELECT * FROM '{parquet}' ORDER BY id").fetchall(),
        ),
        "csv": (out / "csv" / "out.csv" / "part-00000.csv").read_text(),
        "js": (out / "js" / "out.json" / "part-00000.json").read_text(),
    }


def test_universal_sinks_write_the_native_tiers_types(tmp_path: Path) -> None:
    with fresh_pg_database() as database:
        landed = {}
        for universal in (False, True):
            project = _project(tmp_path / ("u" if universal else "n"), database, universal)
            result = pz(project, "run")
            assert result.exit_code == 0, result.output
            tiers = {result.node(f"{s}.out")["tier"] for s in SINKS}
            assert tiers == {"universal" if universal else "native"}, tiers
            landed[universal] = _landed(project, database, "u" if universal else "n")
    native, universal = landed[False], landed[True]
    assert dict(native["pg"][0])["u"] == "uuid" and dict(native["pg"][0])["j"] == "json"
    assert ("u", "UUID") in [(r[0], r[1]) for r in native["wh"][0]]
    for sink in SINKS:
        assert universal[sink] == native[sink], sink


def test_postgres_universal_tier_refuses_a_list_of_uuids_it_would_write_as_text(tmp_path: Path) -> None:
    """ADBC writes no uuid[]: a coded refusal naming the column, where text[] landed before."""
    with fresh_pg_database() as database:
        project = _project(tmp_path / "u", database, universal=True)
        write_project(
            project, {"pipelines/to_pg.sql": f"INSERT INTO {{{{ sink('pg', 'out') }}}}\n{ROWS_SQL}"}
        )
        result = pz(project, "run", "-s", "to_pg+")
        assert result.exit_code == 1, result.output
        error = result.node("pg.out")["error"]
        assert error["code"] == "PZ0501", error
        assert "column lu: the universal tier cannot write Arrow type list<" in error["message"], error
        assert "cast the column in the pipeline" in error["message"], error
        with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=database) as con:
            assert con.execute("SELECT to_regclass('public.u')").fetchone() == (None,)
