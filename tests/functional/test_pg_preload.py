"""A postgres source's first native read of a query LOADs the extension on a helper thread while psycopg
describes the relation (`PostgresConnector._relation_while_loading`): the LOAD lands in the staging instance,
and a LOAD that fails there is quiet, reported once by the ATTACH's own LOAD, as before. (A table is
described through the read's own ATTACH: no helper.)"""

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


def _project(root: Path, table: str, query: bool = False) -> Path:
    dataset = f"{{ query: 'SELECT id FROM {table}'" if query else f"{{ table: {table}"
    return write_project(
        root,
        {
            "project.yml": "name: preload\n",
            "sources/pg.yml": f"""
                connector: postgres
                connection: {{ host: 127.0.0.1, port: 5432, database: test, user: postgres }}
                datasets:
                  orders: {dataset}, columns: {{ id: bigint }} }}
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
    for query, reads in ((True, ["path", "path", "path"]), (False, ["path", "path"])):
        calls.clear()
        project = _project(tmp_path / f"shop_{query}", pg_table, query)
        result = pz(project, "run")
        assert result.exit_code == 1, result.output
        failed = result.node("src_pg__orders")
        assert failed["status"] == "failed" and failed["error"]["code"] == "PZ0505", failed
        assert f"File '{not_an_extension}' is not a DuckDB extension" in failed["error"]["message"], failed
        # staging's list (the bogus file has no RECORD entry: not loaded there), the helper's LOAD (quiet,
        # a query only), then the ATTACH's (reported)
        assert calls == reads


def test_a_first_read_with_the_helper_lands_every_row(tmp_path: Path, pg_table: str) -> None:
    for query in (True, False):
        project = _project(tmp_path / f"shop_{query}", pg_table, query)
        result = pz(project, "run")
        assert result.exit_code == 0, result.output
        assert result.node("src_pg__orders")["rows"] == 2


def _unsigned_copy(tmp_path: Path) -> Path:
    """A real extension file with one byte of its signature changed: DuckDB refuses it unless unsigned
    extensions are allowed."""
    import duckdb_extension_httpfs

    shipped = next(Path(duckdb_extension_httpfs.__file__).parent.glob("extensions/*/httpfs.duckdb_extension"))
    data = bytearray(shipped.read_bytes())
    data[-10] ^= 0xFF
    copy = tmp_path / "httpfs.duckdb_extension"
    copy.write_bytes(bytes(data))
    return copy


def test_staging_opens_with_the_shipped_extension_loaded_and_locked_to_signed_ones(tmp_path: Path) -> None:
    """The file the plan's native postgres nodes need is LOADed as staging opens (no signature check: pz
    found it as pip installed it); then the instance refuses any unsigned extension, and the setting back."""
    import duckdb

    from pipelinez.engine.run.context import close_staging, open_staging

    con = open_staging(tmp_path / "staging.duckdb", "1GB", [native.extension_path()])
    try:
        loaded = "SELECT loaded FROM duckdb_extensions() WHERE extension_name = 'postgres_scanner'"
        assert con.execute(loaded).fetchone() == (True,)
        setting = "SELECT current_setting('allow_unsigned_extensions')"
        assert con.execute(setting).fetchone() == (False,)
        # off while unsigned files were allowed (nothing autoloaded unchecked), DuckDB's default once locked
        assert con.execute("SELECT current_setting('autoload_known_extensions')").fetchone() == (True,)
        unsigned = _unsigned_copy(tmp_path)
        with pytest.raises(duckdb.Error, match="signature"):
            con.cursor().execute(f"LOAD '{unsigned}'")
        with pytest.raises(duckdb.Error, match="while database is running"):
            con.execute("SET allow_unsigned_extensions = true")
        con.execute("RESET allow_unsigned_extensions")
        assert con.execute(setting).fetchone() == (False,)
    finally:
        close_staging(con)


def test_a_run_needing_the_extension_loads_it_as_staging_opens(
    tmp_path: Path, pg_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipelinez.engine.run import context

    opened: list[list[str]] = []
    real = context.open_staging

    def recording(
        path: Path,
        memory_limit: str,
        extensions: tuple[str, ...] | list[str] = (),
        project: Path | None = None,
    ) -> object:
        opened.append(list(extensions))
        return real(path, memory_limit, extensions, project)

    monkeypatch.setattr("pipelinez.engine.run.context.open_staging", recording)
    project = _project(tmp_path / "shop", pg_table)
    result = pz(project, "run")
    assert result.exit_code == 0, result.output
    assert opened == [[native.extension_path()]]
