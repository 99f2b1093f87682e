"""`strategy: view` outputs: a view created in a DuckDB file and in PostgreSQL, and the refusals."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import duckdb
import psycopg
import pytest

from tests.conftest import pz, write_project

PG_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test"

SOURCE = {
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          orders: { format: csv, path: orders.csv, columns: { id: bigint, amount: bigint } }
    """,
    "data/orders.csv": "id,amount\n1,150\n2,275\n3,400\n",
    "pipelines/orders.sql": (
        "INSERT INTO {{ sink('wh', 'orders') }}\nSELECT * FROM {{ source('files', 'orders') }}\n"
    ),
    "pipelines/big.sql": (
        "INSERT INTO {{ sink('wh', 'big_orders') }}\n"
        "SELECT id, amount FROM {{ ref('orders') }} WHERE amount > 200\n"
    ),
    # a view over a view: ref('big') is the view wh.big_orders
    "pipelines/huge.sql": (
        "INSERT INTO {{ sink('wh', 'huge_orders') }}\nSELECT id FROM {{ ref('big') }} WHERE amount > 300\n"
    ),
}


def test_a_view_output_in_a_duckdb_file(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **SOURCE,
            "project.yml": "name: shop\n",
            "sinks/wh.yml": """
                connector: duckdb
                connection: { path: wh.duckdb }
                outputs:
                  big_orders: { strategy: view, table: marts.big_orders }
                  huge_orders: { strategy: view }
                  mid_orders: { strategy: view }
            """,
            # an ephemeral pipeline between: inlined into the view's SQL as a subquery
            "pipelines/mid.sql": "SELECT id FROM {{ ref('orders') }} WHERE amount BETWEEN 200 AND 300\n",
            "pipelines/mid.yml": "materialized: ephemeral\n",
            "pipelines/mid_view.sql": (
                "INSERT INTO {{ sink('wh', 'mid_orders') }}\nSELECT m.id FROM {{ ref('mid') }} AS m\n"
            ),
        },
    )
    result = pz(project_dir, "run")
    assert result.exit_code == 0, result.output
    assert result.node("wh.big_orders")["status"] == "success"
    con = duckdb.connect(str(project_dir / "wh.duckdb"), read_only=True)
    try:
        views = con.sql(
            "SELECT schema_name, view_name, sql FROM duckdb_views() WHERE NOT internal"
        ).fetchall()
        assert sorted((s, v) for s, v, _ in views) == [
            ("main", "huge_orders"),
            ("main", "mid_orders"),
            ("marts", "big_orders"),
        ]
        assert any('"main"."orders"' in sql or "main.orders" in sql for _, _, sql in views)
        assert con.sql("SELECT * FROM marts.big_orders ORDER BY id").fetchall() == [(2, 275), (3, 400)]
        assert con.sql("SELECT * FROM huge_orders").fetchall() == [(3,)]
        assert con.sql("SELECT * FROM mid_orders").fetchall() == [(2,)]
    finally:
        con.close()
    # the view reads the table as it is now: a later run's rows show through it
    (project_dir / "data" / "orders.csv").write_text("id,amount\n7,900\n")
    again = pz(project_dir, "run")
    assert again.exit_code == 0, again.output
    con = duckdb.connect(str(project_dir / "wh.duckdb"), read_only=True)
    assert con.sql("SELECT * FROM marts.big_orders").fetchall() == [(7, 900)]
    con.close()


def test_a_view_reading_outside_its_sink_is_refused(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **SOURCE,
            "project.yml": "name: shop\nenv:\n  TOKEN: { default: s3cr3t, secret: true }\n",
            "sinks/wh.yml": """
                connector: duckdb
                connection: { path: wh.duckdb }
                outputs:
                  big_orders: { strategy: view, keys: [id] }
                  huge_orders: { strategy: view }
                  masked: { strategy: view }
                  via: { strategy: view }
                  bare: { strategy: view }
            """,
            # a table named without ref(): the view would read whatever the target holds under that name
            "pipelines/bare.sql": (
                "INSERT INTO {{ sink('wh', 'bare') }}\n"
                "WITH o AS (SELECT 2 AS id) SELECT * FROM o JOIN orders USING (id)\n"
            ),
            "pipelines/masked.sql": (
                "INSERT INTO {{ sink('wh', 'masked') }}\n"
                "SELECT {{ env('TOKEN') }} AS t FROM {{ ref('big') }}\n"
            ),
            "sinks/lake.yml": (
                "connector: localfiles\nconnection: { root: out }\noutputs:\n  v: { strategy: view }\n"
            ),
            "pipelines/orders.sql": "SELECT * FROM {{ source('files', 'orders') }}\n",  # into no sink
            "pipelines/huge.sql": (
                "INSERT INTO {{ sink('wh', 'huge_orders') }}\n"
                "SELECT * FROM {{ source('files', 'orders') }} JOIN {{ ref('big') }} USING (id)\n"
            ),
            "pipelines/lv.sql": "INSERT INTO {{ sink('lake', 'v') }}\nSELECT 1 AS x\n",
            "pipelines/eph.sql": "SELECT id FROM {{ source('files', 'orders') }}\n",
            "pipelines/eph.yml": "materialized: ephemeral\n",
            "pipelines/via.sql": "INSERT INTO {{ sink('wh', 'via') }}\nSELECT id FROM {{ ref('eph') }}\n",
        },
    )
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    out = result.output
    assert (
        "PZ0241 pipelines/big.sql:1:13: output 'wh.big_orders' (strategy: view) of pipeline 'big' reads "
        "ref('orders'), which does not live in that sink (it writes into no output of sink 'wh')"
    ) in out
    assert (
        "PZ0241 pipelines/huge.sql:1:13: output 'wh.huge_orders' (strategy: view) of pipeline 'huge' reads "
        "source('files', 'orders'), which does not live in that sink"
    ) in out
    assert (
        "PZ0242 sinks/wh.yml:4:3: output 'wh.big_orders' (strategy: view) of pipeline 'big' sets keys" in out
    )
    assert "PZ0305 sinks/lake.yml:4:8: sink 'lake' output 'v': connector 'localfiles' cannot view" in out
    assert (
        "PZ0242 pipelines/masked.sql:1:13: output 'wh.masked' (strategy: view) of pipeline 'masked': its SQL "
        "holds a secret"
    ) in out
    assert "s3cr3t" not in out
    assert "of pipeline 'via' reads source('files', 'orders') through ephemeral 'eph'" in out
    assert (
        "PZ0241 pipelines/bare.sql:1:13: output 'wh.bare' (strategy: view) of pipeline 'bare' reads table "
        "'orders' by name, which does not live in that sink"
    ) in out
    assert "table 'o'" not in out  # a CTE is no table
    assert not (project_dir / "wh.duckdb").exists()


@pytest.fixture
def pg_schema() -> Iterator[str]:
    schema = f"pz_views_{secrets.token_hex(4)}"
    with psycopg.connect(PG_DSN, autocommit=True) as con:
        con.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield schema
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as con:
            con.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.mark.postgres
def test_a_view_output_in_postgres(project_dir: Path, pg_schema: str) -> None:
    write_project(
        project_dir,
        {
            **SOURCE,
            "project.yml": "name: shop\n",
            # the tables a PostgreSQL view reads are merged: a replace drops its table, which a view on it
            # would refuse (docs/connectors.md)
            "sinks/wh.yml": f"""
                connector: postgres
                connection: {{ host: 127.0.0.1, port: 5432, database: test, user: postgres }}
                outputs:
                  orders: {{ strategy: merge, keys: [id], table: {pg_schema}.orders }}
                  big_orders: {{ strategy: view, table: {pg_schema}.big_orders }}
                  huge_orders: {{ strategy: view, table: {pg_schema}.huge_orders }}
            """,
        },
    )
    result = pz(project_dir, "run")
    assert result.exit_code == 0, result.output
    with psycopg.connect(PG_DSN) as con:
        kinds = con.execute(
            "SELECT relname, relkind FROM pg_class JOIN pg_namespace n ON n.oid = relnamespace "
            "WHERE nspname = %s ORDER BY relname",
            [pg_schema],
        ).fetchall()
        assert [(name, str(kind)) for name, kind in kinds if not name.endswith("_pkey")] == [
            ("big_orders", "v"),
            ("huge_orders", "v"),
            ("orders", "r"),
        ]
        big = con.execute(f'SELECT id, amount FROM "{pg_schema}".big_orders ORDER BY id').fetchall()
        assert big == [(2, 275), (3, 400)]
        assert con.execute(f'SELECT id FROM "{pg_schema}".huge_orders').fetchall() == [(3,)]
    again = pz(project_dir, "run")  # the views are replaced in place; the merge goes on under them
    assert again.exit_code == 0, again.output
