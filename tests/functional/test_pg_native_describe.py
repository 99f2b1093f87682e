"""A native read of a postgres table dataset describes it through the database it ATTACHes for the read
(`connectors.postgres.catalog`), with no psycopg connection (issue 22: psycopg's import and connect were the
largest fixed cost of a small incremental read): the same description as through psycopg, the same errors."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from pipelinez.connectors.postgres.catalog import ExtensionCatalog, bind
from pipelinez.connectors.postgres.connector import PostgresConnector
from pipelinez.connectors.postgres.native import Attachment
from pipelinez.connectors.postgres.settings import Settings
from pipelinez.connectors.postgres.source import describe
from pipelinez.connectors.sdk import ConnectorContext, DatasetRequest, Partition
from pipelinez.core.diagnostics import PzConnectorError
from tests.conftest import fresh_pg_database

pytestmark = pytest.mark.postgres

SECRET = "n0t-the-Pa$$'\\word"
SETUP = """
CREATE DOMAIN "it's a domain" AS numeric(10, 3) CHECK (VALUE > 0);
CREATE TYPE mood AS ENUM ('sad', 'ok');
CREATE SCHEMA "Odd Sch'ema";
CREATE TABLE "Odd Sch'ema".items (
    id bigint PRIMARY KEY, price "it's a domain", tags text[], at timestamptz, feeling mood,
    code char(3), "MixedCase" varchar(12), amount numeric, grid int4[][]
);
INSERT INTO "Odd Sch'ema".items VALUES (1, 2.5, '{a,b}', '2024-01-01 00:00:00+00', 'ok', 'abc', 'x', 1.25,
    '{{1,2},{3,4}}');
"""
TABLE = '"Odd Sch\'ema".items'


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    with fresh_pg_database(SETUP) as name:
        yield name


def _connection(database: str, port: int = 5432) -> dict[str, Any]:
    return {"host": "127.0.0.1", "port": port, "user": "postgres", "database": database, "password": SECRET}


def test_the_attachment_describes_a_table_as_psycopg_does(database: str) -> None:
    settings = Settings.from_connection(_connection(database))
    dataset = DatasetRequest("items", {"table": TABLE}, None)
    con = duckdb.connect()
    attachment = Attachment(settings, read_only=True)
    try:
        through_extension = describe(ExtensionCatalog(con, attachment.alias_in(con)), dataset, "", "PZ0505")
    finally:
        attachment.drop()
        con.close()
    with settings.psycopg() as pg:
        through_psycopg = describe(pg, dataset, "", "PZ0505")
    assert through_extension == through_psycopg
    assert [p.name for p in through_extension.plans][-3:] == ["MixedCase", "amount", "grid"]


def test_a_native_table_read_connects_no_psycopg(database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("psycopg connection opened")

    monkeypatch.setattr(Settings, "psycopg", refused)
    connector = PostgresConnector(ConnectorContext("pg", Path("."), _connection(database)))
    con = duckdb.connect()
    try:
        dataset = DatasetRequest("items", {"table": TABLE}, {"id": "bigint", "feeling": "varchar"})
        connector.extract_native(con, dataset, Partition(0, "all"), '"landed"')
        assert con.execute('SELECT id, feeling FROM "landed"').fetchall() == [(1, "ok")]
    finally:
        connector.close()
        con.close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_no_server_is_a_transient_pz0505_naming_the_server(database: str) -> None:
    connector = PostgresConnector(ConnectorContext("pg", Path("."), _connection(database, _closed_port())))
    con = duckdb.connect()
    try:
        with pytest.raises(PzConnectorError) as failed:
            connector.extract_native(
                con, DatasetRequest("items", {"table": TABLE}, None), Partition(0, "all"), '"t"'
            )
    finally:
        connector.close()
        con.close()
    error = failed.value
    assert error.code == "PZ0505" and error.is_transient
    assert error.message.startswith("cannot connect to PostgreSQL at postgres@127.0.0.1:"), error.message
    assert SECRET not in error.message
    # libpq's reason, not the extension's echo of the whole connection string (options and all)
    assert "Unable to connect" not in error.message and "options=" not in error.message, error.message
    assert "connection to server at" in error.message, error.message


def test_a_missing_table_is_the_same_error_through_either(database: str) -> None:
    dataset = DatasetRequest("items", {"table": "public.nowhere"}, None)
    connector = PostgresConnector(ConnectorContext("pg", Path("."), _connection(database)))
    con = duckdb.connect()
    try:
        with pytest.raises(PzConnectorError) as native:
            connector.extract_native(con, dataset, Partition(0, "all"), '"t"')
        with pytest.raises(PzConnectorError) as universal:
            list(connector.extract_batches(dataset, Partition(0, "all")))
    finally:
        connector.close()
        con.close()
    assert (native.value.code, native.value.message) == (universal.value.code, universal.value.message)
    assert "public.nowhere does not exist" in native.value.message


def test_parameters_are_placed_as_postgres_literals(database: str) -> None:
    assert bind("SELECT %s, %s::oid[], 100%%", ["it's \\ here", [1, 2]]) == (
        "SELECT E'it''s \\\\ here', '{1,2}'::oid[], 100%"
    )
    assert bind("SELECT %s::int4[]", [[]]) == "SELECT '{}'::int4[]"
    with pytest.raises(ValueError):
        bind("SELECT %s, %s", ["one"])
    with pytest.raises(ValueError):
        bind("SELECT 1", ["one"])
    with pytest.raises(TypeError):
        bind("SELECT %s", [1.5])
    # what the server reads back, through the extension, is the value itself
    text = "a'b\\c\"d%s"
    con = duckdb.connect()
    attachment = Attachment(Settings.from_connection(_connection(database)), read_only=True)
    try:
        cursor = ExtensionCatalog(con, attachment.alias_in(con)).cursor()
        assert cursor.execute("SELECT %s::text, '100%%'", [text]).fetchone() == (text, "100%")
        assert cursor.fetchone() is None
    finally:
        attachment.drop()
        con.close()
