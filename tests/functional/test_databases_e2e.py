"""End to end through the CLI against the live PostgreSQL and MariaDB: both tiers, every strategy,
`pz validate --connect` drift, and secrets that never reach an artifact."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pymysql
import pytest

from tests.conftest import pz, write_project

PG_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test"
SECRET = "pw-" + secrets.token_hex(8)

pytestmark = [pytest.mark.postgres]


@pytest.fixture
def pg_schema() -> Iterator[str]:
    schema = f"pz_e2e_{secrets.token_hex(4)}"
    with psycopg.connect(PG_DSN, autocommit=True) as con:
        con.execute(f'CREATE SCHEMA "{schema}"')
        con.execute(f'''CREATE TABLE "{schema}".orders (
            id bigint PRIMARY KEY, customer text, amount numeric(12,2),
            placed_at timestamptz, tags text[])''')
        con.execute(f'''INSERT INTO "{schema}".orders VALUES
            (1, 'ada', 10.50, '2026-01-01 10:00+00', '{{a,b}}'),
            (2, 'grace', 20.00, '2026-01-02 11:00+00', NULL),
            (3, 'Jürgen', 5.25, '2026-01-03 12:00+00', '{{}}')''')
    try:
        yield schema
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as con:
            con.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _pg_rows(sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(PG_DSN) as con:
        return con.execute(sql).fetchall()


def _project(project_dir: Path, schema: str, force_universal: bool, strategy: str = "replace") -> None:
    write_project(
        project_dir,
        {
            "project.yml": f"""
            name: pg_e2e
            env:
              PG_PASSWORD: {{ required: true, secret: true }}
            engine: {{ force_universal: {str(force_universal).lower()} }}
        """,
            "sources/pg.yml": f"""
            connector: postgres
            connection:
              host: 127.0.0.1
              port: 5432
              database: test
              user: postgres
              password: "{{{{ env('PG_PASSWORD') }}}}"
            datasets:
              orders:
                table: {schema}.orders
                columns: {{ id: bigint, customer: varchar, amount: "decimal(12,2)",
                           placed_at: timestamptz, tags: "varchar[]" }}
        """,
            "sinks/wh.yml": f"""
            connector: postgres
            connection:
              host: 127.0.0.1
              database: test
              user: postgres
              password: "{{{{ env('PG_PASSWORD') }}}}"
            outputs:
              totals:
                table: {schema}.totals
                strategy: {strategy}
                {"keys: [customer]" if strategy == "merge" else ""}
        """,
            "pipelines/totals.sql": """
            INSERT INTO {{ sink('wh', 'totals') }}
            SELECT customer, sum(amount) AS total, count(*) AS n, max(placed_at) AS last_at
            FROM {{ source('pg', 'orders') }} GROUP BY customer
        """,
        },
    )


@pytest.mark.parametrize("force_universal", [False, True], ids=["native", "universal"])
def test_postgres_to_postgres_both_tiers_and_no_secret_anywhere(
    project_dir: Path, pg_schema: str, force_universal: bool
) -> None:
    _project(project_dir, pg_schema, force_universal)
    env = {"PG_PASSWORD": SECRET}
    plan = pz(project_dir, "plan", env=env)
    assert plan.exit_code == 0, plan.output
    assert ("postgres universal" if force_universal else "postgres native") in plan.output
    result = pz(project_dir, "run", env=env)
    assert result.exit_code == 0, result.output
    assert result.node("src_pg__orders")["tier"] == ("universal" if force_universal else "native")
    rows = sorted(_pg_rows(f'SELECT customer, total::float8, n FROM "{pg_schema}".totals'), key=str)
    assert rows == [("Jürgen", 5.25, 1), ("ada", 10.5, 1), ("grace", 20.0, 1)]
    # a second replace gives the same table (effectively-once)
    assert pz(project_dir, "run", env=env).exit_code == 0
    assert _pg_rows(f'SELECT count(*) FROM "{pg_schema}".totals') == [(3,)]
    json_run = pz(project_dir, "--log-format", "json", "run", env=env)
    outputs = plan.output + result.output + json_run.output
    assert SECRET not in outputs
    for path in (project_dir / ".pz").rglob("*"):
        if path.is_file() and path.suffix != ".duckdb" and not path.name.endswith(".wal"):
            assert SECRET.encode() not in path.read_bytes(), path


def test_merge_twice_is_merge_once(project_dir: Path, pg_schema: str) -> None:
    _project(project_dir, pg_schema, False, strategy="merge")
    env = {"PG_PASSWORD": SECRET}
    assert pz(project_dir, "run", env=env).exit_code == 0
    first = _pg_rows(f'SELECT * FROM "{pg_schema}".totals ORDER BY customer')
    assert pz(project_dir, "run", env=env).exit_code == 0
    assert _pg_rows(f'SELECT * FROM "{pg_schema}".totals ORDER BY customer') == first


def test_validate_connect_names_every_drifted_column(project_dir: Path, pg_schema: str) -> None:
    _project(project_dir, pg_schema, False)
    sources = project_dir / "sources" / "pg.yml"
    sources.write_text(
        sources.read_text().replace(
            'columns: { id: bigint, customer: varchar, amount: "decimal(12,2)",',
            'columns: { id: integer, customer: varchar, amount: "decimal(12,2)", vanished: date,',
        )
    )
    result = pz(project_dir, "validate", "--connect", env={"PG_PASSWORD": SECRET})
    assert result.exit_code == 2, result.output
    assert any("PZ0604" in line and "'id'" in line and "integer" in line for line in result.lines), (
        result.output
    )
    assert any("PZ0603" in line and "'vanished'" in line for line in result.lines), result.output
    assert SECRET not in result.output


def test_validate_connect_caches_schema_for_undeclared_columns(project_dir: Path, pg_schema: str) -> None:
    _project(project_dir, pg_schema, False)
    sources = project_dir / "sources" / "pg.yml"
    text = sources.read_text()
    start = text.index("    columns:")
    sources.write_text(text[:start] + "\n")
    env = {"PG_PASSWORD": SECRET}
    loose = pz(project_dir, "validate", env=env)
    assert any("PZ0406" in line for line in loose.lines), loose.output
    connected = pz(project_dir, "validate", "--connect", env=env)
    assert connected.exit_code == 0, connected.output
    assert (project_dir / ".pz" / "target" / "schemas.json").exists()
    bound = pz(project_dir, "validate", env=env)
    assert not any("PZ0406" in line for line in bound.lines), bound.output


def test_unreachable_database_is_a_clear_connect_error(project_dir: Path, pg_schema: str) -> None:
    _project(project_dir, pg_schema, False)
    sources = project_dir / "sources" / "pg.yml"
    sources.write_text(sources.read_text().replace("port: 5432", "port: 1"))
    result = pz(project_dir, "validate", "--connect", env={"PG_PASSWORD": SECRET})
    assert result.exit_code == 2
    assert any(line.startswith("error: PZ0601") and "source 'pg'" in line for line in result.lines), (
        result.output
    )
    assert "Traceback" not in result.output and SECRET not in result.output


@pytest.mark.mysql
def test_mariadb_source_to_duckdb_sink(project_dir: Path) -> None:
    db = f"pz_e2e_{secrets.token_hex(4)}"
    con = pymysql.connect(host="127.0.0.1", user="root", password="", autocommit=True)
    try:
        with con.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{db}` CHARACTER SET utf8mb4")
            cur.execute(
                f"CREATE TABLE `{db}`.items (id BIGINT PRIMARY KEY, name VARCHAR(50), price DECIMAL(8,2))"
            )
            cur.execute(
                f"INSERT INTO `{db}`.items VALUES (1, 'tea', 2.50), (2, 'café', 3.10), (3, NULL, 0.99)"
            )
        write_project(
            project_dir,
            {
                "project.yml": "name: my_e2e\n",
                "sources/shop.yml": f"""
                connector: mysql
                connection: {{ host: 127.0.0.1, port: 3306, user: root, password: "", database: {db} }}
                datasets:
                  items: {{ table: items, partitions: {{ column: id, count: 2 }} }}
            """,
                "sinks/wh.yml": "connector: duckdb\nconnection: { path: wh.duckdb }\n",
                "pipelines/items.sql": """
                INSERT INTO {{ sink('wh', 'items') }}
                SELECT * FROM {{ source('shop', 'items') }} ORDER BY id
            """,
            },
        )
        result = pz(project_dir, "run")
        assert result.exit_code == 0, result.output
        node = result.node("src_shop__items")
        assert node["tier"] == "universal" and node["rows"] == 3
        assert sum(p["rows"] for p in node["partitions"]) == 3
        import duckdb

        rows = (
            duckdb.connect(str(project_dir / "wh.duckdb"), read_only=True)
            .execute("SELECT id, name, price FROM items ORDER BY id")
            .fetchall()
        )
        assert [(r[0], r[1], float(r[2])) for r in rows] == [
            (1, "tea", 2.5),
            (2, "café", 3.1),
            (3, None, 0.99),
        ]
    finally:
        with con.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
        con.close()
