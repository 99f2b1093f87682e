"""A postgres source's first native read LOADs the extension on a helper thread while psycopg describes the
relation (`PostgresConnector._relation_while_loading`): the LOAD lands in the staging instance, and a LOAD
that fails there is quiet, reported once by the ATTACH's own LOAD, as before."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pipelinez.connectors.postgres import native
from pipelinez.core.duck_connect import connect
from tests.conftest import pz, write_project

PG_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test"

pytestmark = [pytest.mark.postgres]


@pytest.fixture
def pg_table() -> Iterator[str]:
    schema = f"pz_preload_{secrets.token_hex(4)}"
    with psycopg.connect(PG_DSN, autocommit=True) as con:
        con.execute(f'CREATE SCHEMA "{schema}"')
        con.execute(f'CREATE TABLE "{schema}".orders (id bigint PRIMARY KEY)')
        con.execute(f'INSERT INTO "{schema}".orders VALUES (1), (2)')
    try:
        yield f"{schema}.orders"
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as con:
            con.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _project(root: Path, table: str) -> Path:
    return write_project(
        root,
        {
            "project.yml": "name: preload\n",
            "sources/pg.yml": f"""
                connector: postgres
                connection: {{ host: 127.0.0.1, port: 5432, database: test, user: postgres }}
                datasets:
                  orders: {{ table: {table}, columns: {{ id: bigint }} }}
            """,
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: wh.duckdb }\n",
            "pipelines/copy.sql": """
                INSERT INTO {{ sink('wh', 'copy') }}
                SELECT id FROM {{ source('pg', 'orders') }}
            """,
        },
    )


def test_preloading_loads_the_extension_into_the_instance() -> None:
    con = connect()
    loaded = "SELECT loaded FROM duckdb_extensions() WHERE extension_name = 'postgres_scanner'"
    assert con.execute(loaded).fetchone() in (None, (False,))
    native.preload_extension(con)
    assert con.execute(loaded).fetchone() == (True,)


def test_a_load_that_fails_on_the_helper_is_reported_once_by_the_attach(
    tmp_path: Path, pg_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    not_an_extension = tmp_path / "postgres_scanner.duckdb_extension"
    not_an_extension.write_bytes(b"not an extension")
    calls: list[str] = []

    def bogus_path() -> str:
        calls.append("path")
        return str(not_an_extension)

    monkeypatch.setattr(native, "extension_path", bogus_path)
    project = _project(tmp_path / "shop", pg_table)
    result = pz(project, "run")
    assert result.exit_code == 1, result.output
    failed = result.node("src_pg__orders")
    assert failed["status"] == "failed" and failed["error"]["code"] == "PZ0505", failed
    assert f"File '{not_an_extension}' is not a DuckDB extension" in failed["error"]["message"], failed
    assert calls == ["path", "path"]  # the helper's LOAD (quiet), then the ATTACH's (reported)


def test_a_first_read_with_the_helper_lands_every_row(tmp_path: Path, pg_table: str) -> None:
    project = _project(tmp_path / "shop", pg_table)
    result = pz(project, "run")
    assert result.exit_code == 0, result.output
    assert result.node("src_pg__orders")["rows"] == 2
