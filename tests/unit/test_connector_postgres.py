"""The postgres connector's source side, tier 5 and error handling, against the live PostgreSQL on
127.0.0.1:5432 (trust auth, user postgres).

Each module run creates its own database `pz_test_<random>` and drops it afterwards.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pyarrow as pa
import pytest

from pipelinez.connectors.postgres import nan_guard, native
from pipelinez.connectors.postgres.connector import PostgresConnector
from pipelinez.connectors.postgres.settings import Settings, classify, summary
from pipelinez.connectors.sdk import ConnectorContext, DatasetRequest, OutputRequest, Partition
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.engine.nodes.landing import ingest_batches
from tests.conftest import fresh_pg_database

pytestmark = pytest.mark.postgres

HOST, PORT, USER = "127.0.0.1", 5432, "postgres"
SECRET = "s3cr3t-Pässw0rd'\"x"


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    with fresh_pg_database(ALL_TYPES_DDL) as name:
        yield name


@pytest.fixture
def pg(database: str) -> Iterator[psycopg.Connection[Any]]:
    con = psycopg.connect(host=HOST, port=PORT, user=USER, dbname=database, autocommit=True)
    yield con
    con.close()


def connection(database: str, **extra: Any) -> dict[str, Any]:
    return {"host": HOST, "port": PORT, "user": USER, "database": database, **extra}


@pytest.fixture
def conn(database: str) -> Iterator[PostgresConnector]:
    # a password the trust-auth server ignores: it must still never appear in any message
    connector = PostgresConnector(ConnectorContext("pg", Path("."), connection(database, password=SECRET)))
    yield connector
    connector.close()


def staging() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    return con


def land_native(
    conn: PostgresConnector, con: duckdb.DuckDBPyConnection, ds: DatasetRequest, table: str
) -> int:
    parts = conn.partitions(ds)
    for part in parts:
        conn.extract_native(con, ds, part, f'"{table}"')
    return len(parts)


def land_universal(
    conn: PostgresConnector, con: duckdb.DuckDBPyConnection, ds: DatasetRequest, table: str
) -> int:
    """As the engine does it (`ingest_batches`, with its contract casts)."""
    parts = conn.partitions(ds)
    for part in parts:
        exists = bool(
            con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [table]).fetchone()[0]  # type: ignore[index]
        )
        ingest_batches(con, conn.extract_batches(ds, part), table, exists, ds.columns, f"__in_{table}")
    return len(parts)


def describe(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in con.execute(f'DESCRIBE "{table}"').fetchall()]


def assert_identical(con: duckdb.DuckDBPyConnection, a: str, b: str, order: str = "id") -> None:
    """Same columns and types, same rows (EXCEPT ALL both ways), and row for row the same text."""
    assert describe(con, a) == describe(con, b)
    for x, y in ((a, b), (b, a)):
        row = con.execute(
            f'SELECT count(*) FROM (SELECT * FROM "{x}" EXCEPT ALL SELECT * FROM "{y}")'
        ).fetchone()
        assert row == (0,), f"rows of {x} missing from {y}"
    cols = ", ".join(f'CAST("{c}" AS VARCHAR)' for c, _ in describe(con, a))
    rows_a = con.execute(f'SELECT {cols} FROM "{a}" ORDER BY "{order}"').fetchall()
    rows_b = con.execute(f'SELECT {cols} FROM "{b}" ORDER BY "{order}"').fetchall()
    assert rows_a == rows_b


# A table holding every supported type, with NULLs, extremes and non-ASCII text.
ALL_TYPES_DDL = r"""
CREATE SCHEMA shop;
CREATE TYPE shop.mood AS ENUM ('sad', 'ok', 'hàppy 😀');
CREATE TYPE shop.pair AS (a int, b text);
CREATE DOMAIN shop.posint AS integer CHECK (VALUE > 0);
CREATE DOMAIN shop.price AS numeric(10,2);
CREATE TABLE shop.alltypes (
  id integer PRIMARY KEY,
  c_bool boolean, c_int2 smallint, c_int4 integer, c_int8 bigint, c_float4 real, c_float8 double precision,
  c_num numeric(12,3), c_num38 numeric(38,10), c_num_int numeric(18,0),
  c_num_wide numeric(50,5), c_num_free numeric,
  c_num_neg numeric(5,-2), c_num_tiny numeric(3,5), c_money money,
  c_text text, c_varchar varchar(20), c_char char(6), c_name name, c_qchar "char",
  c_bytea bytea, c_date date, c_time time, c_timetz timetz, c_ts timestamp, c_tstz timestamptz,
  c_ts3 timestamp(3),
  c_interval interval, c_uuid uuid, c_json json, c_jsonb jsonb, c_oid oid,
  c_enum shop.mood, c_domain shop.posint, c_dprice shop.price,
  c_int_arr int[], c_text_arr text[], c_num_arr numeric(10,2)[], c_free_arr numeric[], c_char_arr char(3)[],
  c_date_arr date[], c_tstz_arr timestamptz[], c_uuid_arr uuid[], c_jsonb_arr jsonb[], c_enum_arr shop.mood[],
  c_bool_arr boolean[], c_bytea_arr bytea[], c_interval_arr interval[], c_inet_arr inet[], c_int2d int[][],
  c_inet inet, c_cidr cidr, c_mac macaddr, c_bit bit(4), c_varbit varbit, c_xml xml, c_range int4range,
  c_tsrange tstzrange, c_point point, c_tsv tsvector, c_pair shop.pair
);
INSERT INTO shop.alltypes VALUES
(1, true, 32767, 2147483647, 9223372036854775807, 3.4028235e38, 1.7976931348623157e308,
 999999999.999, 9999999999999999999999999999.9999999999, 999999999999999999,
 123456789012345678901234567890123456789012345.12345, 3.14159265358979323846264338327950288419716939937510,
 9999900, 0.00123, 92233720368547758.07,
 'héllo wörld ✓ 日本語 🚀 עברית e' || chr(769), 'ünïcödé', 'ab', 'nm', 'x',
 '\x00ff10'::bytea, '2024-02-29', '23:59:59.999999', '23:59:59.999999+15:59', '2024-01-01 12:34:56.123456',
 '2024-01-01 12:34:56.123456+02', '2024-01-01 12:34:56.789',
 '178000000 years 11 mons 30 days 23:59:59.999999',
 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2, {"b": null}], "ü": "✓"}', '{"k": 1, "z": [true]}',
 4294967295, 'hàppy 😀', 2147483647, 12345678.90,
 '{1,NULL,3}', '{"a","b c","日本",NULL,""}', '{1.50,2.25,NULL}', '{1.5,NaN,Infinity}', '{"a  ","b"}',
 '{2024-01-01,infinity,-infinity,NULL}', '{2024-01-01 00:00:00+00,infinity}',
 '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}',
 ARRAY['{"a":1}'::jsonb, NULL], '{sad,"hàppy 😀"}', '{t,f,NULL}', ARRAY['\x00'::bytea, '\xff'::bytea],
 ARRAY['1 day'::interval, '-1 mons'::interval], '{10.0.0.1,::1}', '{{1,2},{3,4}}',
 '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', B'1010', B'10101', '<a x="1">ü</a>', '[1,10)',
 '[2024-01-01 00:00:00+00,2025-01-01 00:00:00+00)', '(1.5,-2)', 'a fat cat', ROW(1, 'x,y')),
(2, false, -32768, -2147483648, -9223372036854775808, -1.4e-45, -2.2250738585072014e-308,
 -999999999.999, -9999999999999999999999999999.9999999999, -999999999999999999,
 -1, -0.000000000000000000001, -9999900, -0.00999, -92233720368547758.08,
 '', '', '', '', '', ''::bytea, '4713-01-01 BC', '00:00:00', '00:00:00-15:59', '4713-01-01 00:00:00 BC',
 '0001-01-01 00:00:00+00 BC', '1970-01-01 00:00:00', '-178000000 years -11 mons -30 days -23:59:59.999999',
 '00000000-0000-0000-0000-000000000000', '[]', '{}', 0, 'sad', 1, -12345678.90,
 '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}',
 '::1', '::/0', '00:00:00:00:00:00', B'0000', B'', '', 'empty', '(,)', '(0,0)', '', ROW(NULL, NULL)),
(4, true, 0, 0, 0, 'NaN', 'Infinity', 0, 0, 0, 0, 'NaN', 0, 0, 0,
 E'line1\nline2\ttab "quote" ''single'' \\ back', 'x', E'a\t  ', 'x', 'z', '\xdeadbeef'::bytea, '9999-12-31',
 '24:00:00', '24:00:00+00', '294246-12-31 23:59:59.999999', '9999-12-31 23:59:59.999999+00', 'infinity',
 '0', 'ffffffff-ffff-ffff-ffff-ffffffffffff', 'null', '"str"', 1, 'ok', 42, 0,
 '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}',
 '{NULL}', '{NULL}', '{NULL}', '{{NULL}}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO shop.alltypes (id) VALUES (3);
INSERT INTO shop.alltypes (id, c_bool, c_int2, c_int4, c_int8, c_float4, c_float8, c_num, c_num38, c_num_int,
  c_num_wide, c_num_free, c_num_neg, c_num_tiny, c_money, c_text, c_varchar, c_char, c_name, c_qchar, c_bytea,
  c_date, c_time, c_timetz, c_ts, c_tstz, c_ts3, c_interval, c_uuid, c_json, c_jsonb, c_oid) VALUES
(5, true, 1, 1, 1, '-Infinity', '-Infinity', 1, 1, 1, 1, 'Infinity', 100, 0.001, 1,
 'a', 'b', ' c', 'd', 'e', '\x00'::bytea, 'infinity', '12:00', '12:00+05:30', '-infinity', 'infinity',
 '-infinity', '1 mon -1 days', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12', '1', '2.50', 0);
INSERT INTO shop.alltypes (id, c_bool, c_int2, c_int4, c_int8, c_float4, c_float8, c_num, c_num38, c_num_int,
  c_num_wide, c_num_free, c_money, c_text) VALUES
(6, false, 7, 7, 7, 0.1, 0.1, 0.5, 0.5, 5, 0.5, '-Infinity', -0.01, repeat('ß', 3000));
CREATE TABLE shop.attachable AS SELECT id, c_bool, c_int2, c_int4, c_int8, c_float4, c_float8,
  c_num, c_num38, c_num_int, c_text, c_varchar, c_char, c_name, c_bytea, c_date, c_time, c_timetz,
  c_ts, c_tstz, c_ts3, c_interval, c_uuid, c_json, c_jsonb, c_oid, c_enum, c_int_arr, c_text_arr,
  c_num_arr, c_char_arr, c_date_arr, c_tstz_arr, c_uuid_arr, c_jsonb_arr, c_enum_arr, c_bool_arr,
  c_interval_arr FROM shop.alltypes;
CREATE TABLE shop.orders AS
  SELECT i AS id, (i % 97)::int AS customer_id, round((i * 1.37)::numeric % 1000, 2)::numeric(12,2) AS amount,
         (ARRAY['open','shipped','returned'])[1 + i % 3] AS status,
         timestamptz '2024-01-01 00:00:00+00' + i * interval '37 minutes' AS updated_at,
         date '2024-01-01' + (i % 400) AS day
  FROM generate_series(1, 5000) AS i;
INSERT INTO shop.orders VALUES (5001, NULL, NULL, NULL, NULL, NULL),
  (-7, 1, 1, 'open', 'infinity', 'infinity'),
  (5002, 2, 2, 'open', '-infinity', '-infinity');
CREATE TABLE shop.nan_guard (id int, n numeric(8,2), na numeric(8,2)[]);
INSERT INTO shop.nan_guard VALUES (1, 0, '{0}'), (2, 1.5, '{1.5}');
CREATE TABLE shop.flat (id int, a int[]);
INSERT INTO shop.flat VALUES (1, '{1,2}'), (2, '{{1,2},{3,4}}');
CREATE TABLE shop.empty (id int, name text);
CREATE SCHEMA "we ird";
CREATE TABLE "we ird"."ta""ble" (id int, "Mixed Case" text);
INSERT INTO "we ird"."ta""ble" VALUES (1, 'x');
"""

EXPECTED_TYPES = {
    "id": "INTEGER",
    "c_bool": "BOOLEAN",
    "c_int2": "SMALLINT",
    "c_int4": "INTEGER",
    "c_int8": "BIGINT",
    "c_float4": "FLOAT",
    "c_float8": "DOUBLE",
    "c_num": "DECIMAL(12,3)",
    "c_num38": "DECIMAL(38,10)",
    "c_num_int": "DECIMAL(18,0)",
    "c_num_wide": "VARCHAR",
    "c_num_free": "VARCHAR",
    "c_num_neg": "DECIMAL(7,0)",
    "c_num_tiny": "DECIMAL(5,5)",
    "c_money": "VARCHAR",
    "c_text": "VARCHAR",
    "c_varchar": "VARCHAR",
    "c_char": "VARCHAR",
    "c_name": "VARCHAR",
    "c_qchar": "VARCHAR",
    "c_bytea": "BLOB",
    "c_date": "DATE",
    "c_time": "TIME",
    "c_timetz": "TIME WITH TIME ZONE",
    "c_ts": "TIMESTAMP",
    "c_tstz": "TIMESTAMP WITH TIME ZONE",
    "c_ts3": "TIMESTAMP",
    "c_interval": "INTERVAL",
    "c_uuid": "UUID",
    "c_json": "JSON",
    "c_jsonb": "JSON",
    "c_oid": "UINTEGER",
    "c_enum": "VARCHAR",
    "c_domain": "INTEGER",
    "c_dprice": "DECIMAL(10,2)",
    "c_int_arr": "INTEGER[]",
    "c_text_arr": "VARCHAR[]",
    "c_num_arr": "DECIMAL(10,2)[]",
    "c_free_arr": "VARCHAR[]",
    "c_char_arr": "VARCHAR[]",
    "c_date_arr": "DATE[]",
    "c_tstz_arr": "TIMESTAMP WITH TIME ZONE[]",
    "c_uuid_arr": "UUID[]",
    "c_jsonb_arr": "JSON[]",
    "c_enum_arr": "VARCHAR[]",
    "c_bool_arr": "BOOLEAN[]",
    "c_bytea_arr": "VARCHAR[]",
    "c_interval_arr": "INTERVAL[]",
    "c_inet_arr": "VARCHAR[]",
    "c_int2d": "VARCHAR",
    "c_inet": "VARCHAR",
    "c_cidr": "VARCHAR",
    "c_mac": "VARCHAR",
    "c_bit": "VARCHAR",
    "c_varbit": "VARCHAR",
    "c_xml": "VARCHAR",
    "c_range": "VARCHAR",
    "c_tsrange": "VARCHAR",
    "c_point": "VARCHAR",
    "c_tsv": "VARCHAR",
    "c_pair": "VARCHAR",
}


def ds(name: str = "t", **options: Any) -> DatasetRequest:
    columns = options.pop("columns", None)
    return DatasetRequest(name, options, columns)


# -- the two tiers stage the same thing -------------------------------------------------------------
def test_all_types_identical_between_tiers(conn: PostgresConnector) -> None:
    con = staging()
    request = ds(table="shop.alltypes")
    land_native(conn, con, request, "nat")
    land_universal(conn, con, request, "uni")
    assert dict(describe(con, "nat")) == EXPECTED_TYPES
    assert conn.staging_columns(request) == list(EXPECTED_TYPES.items())
    assert con.execute('SELECT count(*) FROM "nat"').fetchone() == (6,)
    assert_identical(con, "nat", "uni")


def test_table_scan_query_path_and_universal_agree(conn: PostgresConnector) -> None:
    """A table whose columns the extension decodes exactly is read with its own table scan; that scan, the
    query path (taken for partitions) and the universal tier stage the same table."""
    con = staging()
    whole = ds(table="shop.attachable")
    assert conn.relation(whole).attach_scan_ok(Partition(0, "all"))
    land_native(conn, con, whole, "scan")
    land_native(conn, con, ds(table="shop.attachable", partitions={"column": "id", "count": 3}), "query")
    land_universal(conn, con, whole, "uni")
    assert {t for _, t in describe(con, "scan")} >= {
        "TIME WITH TIME ZONE",
        "JSON[]",
        "DECIMAL(10,2)[]",
        "UINTEGER",
    }
    assert_identical(con, "scan", "query")
    assert_identical(con, "scan", "uni")
    land_native(conn, con, ds(table="shop.alltypes", partitions={"column": "id", "count": 3}), "all_parts")
    land_universal(
        conn, con, ds(table="shop.alltypes", partitions={"column": "c_date", "count": 2}), "all_uni"
    )
    assert_identical(con, "all_parts", "all_uni")


def test_all_types_values_are_faithful(conn: PostgresConnector) -> None:
    con = staging()
    land_native(conn, con, ds(table="shop.alltypes"), "t")

    def col(name: str) -> list[Any]:
        return [r[0] for r in con.execute(f'SELECT CAST("{name}" AS VARCHAR) FROM t ORDER BY id').fetchall()]

    assert col("c_num38")[:2] == [
        "9999999999999999999999999999.9999999999",
        "-9999999999999999999999999999.9999999999",
    ]
    assert col("c_num_wide")[0] == "123456789012345678901234567890123456789012345.12345"
    assert col("c_num_free")[:6] == [
        "3.14159265358979323846264338327950288419716939937510",
        "-0.000000000000000000001",
        None,
        "NaN",
        "Infinity",
        "-Infinity",
    ]
    assert col("c_num_neg")[:2] == ["9999900", "-9999900"]
    tiny = con.execute("SELECT c_num_tiny FROM t ORDER BY id LIMIT 2").fetchall()
    assert tiny == [(Decimal("0.00123"),), (Decimal("-0.00999"),)]
    assert col("c_money")[:2] == ["92233720368547758.07", "-92233720368547758.08"]
    assert col("c_char")[:5] == ["ab", "", None, "a\t", " c"]
    assert col("c_text")[0] == "héllo wörld ✓ 日本語 🚀 עברית e\u0301"
    assert col("c_date") == ["2024-02-29", "4713-01-01 (BC)", None, "9999-12-31", "infinity", None]
    assert col("c_time")[3] == "24:00:00"
    assert col("c_timetz")[:2] == ["23:59:59.999999+15:59", "00:00:00-15:59"]
    assert col("c_tstz")[:2] == ["2024-01-01 10:34:56.123456+00", "0001-01-01 (BC) 00:00:00+00"]
    assert col("c_ts")[3:5] == ["294246-12-31 23:59:59.999999", "-infinity"]
    assert col("c_interval")[0] == "178000000 years 11 months 30 days 23:59:59.999999"
    assert col("c_float4")[3:5] == ["nan", "-inf"]
    assert col("c_oid")[0] == "4294967295"
    assert col("c_enum")[0] == "hàppy 😀"
    assert col("c_json")[0] == '{"a": [1, 2, {"b": null}], "ü": "✓"}'
    assert col("c_date_arr")[0] == "[2024-01-01, infinity, -infinity, NULL]"
    assert col("c_free_arr")[0] == "[1.5, NaN, Infinity]"
    assert col("c_char_arr")[0] == "[a, b]"
    assert col("c_int2d")[0] == "{{1,2},{3,4}}"
    assert col("c_pair")[0] == '(1,"x,y")'
    assert col("c_tsrange")[0] == '["2024-01-01 00:00:00+00","2025-01-01 00:00:00+00")'
    assert col("c_bit")[0] == "1010"
    row = con.execute("SELECT c_num, c_dprice, c_domain FROM t WHERE id = 1").fetchone()
    assert row == (Decimal("999999999.999"), Decimal("12345678.90"), 2147483647)


def test_query_dataset_identical_between_tiers(conn: PostgresConnector) -> None:
    con = staging()
    # a query result carries no array dimensions: its arrays are one-dimensional (c_int2d would be refused)
    cols = ", ".join(f"a.{c}" for c in EXPECTED_TYPES if c != "c_int2d")
    request = ds(query=f"SELECT {cols}, a.c_num * 2 AS doubled, 'ü'::text AS lit FROM shop.alltypes a;  ")
    land_native(conn, con, request, "nat")
    land_universal(conn, con, request, "uni")
    types = dict(describe(con, "nat"))
    assert types["doubled"] == "VARCHAR"  # numeric without typmod: exact text
    assert types["c_num"] == "DECIMAL(12,3)" and types["c_domain"] == "INTEGER"
    assert_identical(con, "nat", "uni")


def test_contract_selects_and_casts_in_both_tiers(conn: PostgresConnector) -> None:
    con = staging()
    contract = {"amount": "decimal(18,4)", "id": "bigint", "status": "varchar", "updated_at": "timestamptz"}
    request = ds(table="shop.orders", columns=contract)
    land_native(conn, con, request, "nat")
    land_universal(conn, con, request, "uni")
    assert describe(con, "nat") == [
        ("amount", "DECIMAL(18,4)"),
        ("id", "BIGINT"),
        ("status", "VARCHAR"),
        ("updated_at", "TIMESTAMP WITH TIME ZONE"),
    ]
    assert_identical(con, "nat", "uni")
    missing = ds(table="shop.orders", columns={"nope": "int"})
    with pytest.raises(PzConnectorError, match="nope"):
        conn.extract_native(staging(), missing, Partition(0, "all"), '"x"')


@pytest.mark.parametrize("column", ["id", "day", "updated_at", "amount", "customer_id"])
def test_partitions_land_every_row_once(conn: PostgresConnector, column: str) -> None:
    con = staging()
    whole = ds(table="shop.orders")
    split = ds(table="shop.orders", partitions={"column": column, "count": 4})
    parts = conn.partitions(split)
    assert 2 <= len(parts) <= 4
    assert [p.index for p in parts] == list(range(len(parts)))
    assert parts[0].description.endswith("(and NULL)")
    land_native(conn, con, whole, "whole")
    land_native(conn, con, split, "nat")
    land_universal(conn, con, split, "uni")
    assert con.execute("SELECT count(*) FROM nat").fetchone() == (5003,)
    assert_identical(con, "whole", "nat")
    assert_identical(con, "whole", "uni")


def test_partition_rows_land_separately(conn: PostgresConnector) -> None:
    split = ds(table="shop.orders", partitions={"column": "id", "count": 3})
    counts = []
    for part in conn.partitions(split):
        con = staging()
        conn.extract_native(con, split, part, '"p"')
        counts.append(con.execute("SELECT count(*) FROM p").fetchone()[0])  # type: ignore[index]
    assert sum(counts) == 5003 and all(c > 1000 for c in counts)


def test_partitions_of_a_query_and_edge_cases(conn: PostgresConnector) -> None:
    con = staging()
    request = ds(query="SELECT * FROM shop.orders WHERE id > 100", partitions={"column": "id", "count": 5})
    assert len(conn.partitions(request)) == 5
    land_native(conn, con, request, "nat")
    land_universal(conn, con, request, "uni")
    assert con.execute("SELECT count(*) FROM nat").fetchone() == (4902,)
    assert_identical(con, "nat", "uni")
    assert conn.partitions(ds(table="shop.empty", partitions={"column": "id", "count": 4})) == [
        Partition(0, "all")
    ]
    assert len(conn.partitions(ds(table="shop.orders", partitions={"column": "id", "count": 1}))) == 1
    with pytest.raises(PzConnectorError, match="partitions need"):
        conn.partitions(ds(table="shop.orders", partitions={"column": "status", "count": 2}))
    with pytest.raises(PzConnectorError, match="not a column"):
        conn.partitions(ds(table="shop.orders", partitions={"column": "nope", "count": 2}))


def test_partition_spec_bounds_are_literals_not_sql(conn: PostgresConnector) -> None:
    con = staging()
    request = ds(table="shop.orders")
    evil = Partition(0, "x", {"column": "id", "lower": "1'); DROP TABLE shop.orders; --", "upper": None})
    with pytest.raises(PzConnectorError):
        conn.extract_native(con, request, evil, '"x"')
    with psycopg.connect(**_kw(conn)) as check:
        assert check.execute("SELECT count(*) FROM shop.orders").fetchone() == (5003,)


def _kw(conn: PostgresConnector) -> dict[str, Any]:
    return {"host": HOST, "port": PORT, "user": USER, "dbname": conn.context.connection["database"]}


def test_empty_table_and_odd_names(conn: PostgresConnector) -> None:
    con = staging()
    land_native(conn, con, ds(table="shop.empty"), "nat")
    land_universal(conn, con, ds(table="shop.empty"), "uni")
    assert describe(con, "nat") == describe(con, "uni") == [("id", "INTEGER"), ("name", "VARCHAR")]
    land_native(conn, con, ds(table='"we ird"."ta""ble"'), "odd")
    assert con.execute('SELECT "Mixed Case" FROM odd').fetchall() == [("x",)]
    with pytest.raises(PzConnectorError, match="case-insensitive"):
        conn.fetch_schema(ds(query='SELECT 1 AS "ID", 2 AS id'))


def test_nan_in_decimal_is_refused_in_both_tiers(
    conn: PostgresConnector, pg: psycopg.Connection[Any]
) -> None:
    request = ds(table="shop.nan_guard")
    con = staging()
    land_native(conn, con, request, "ok")  # zeros that are real zeros pass the guard
    land_universal(conn, con, request, "ok_u")
    assert_identical(con, "ok", "ok_u")
    pg.execute("INSERT INTO shop.nan_guard VALUES (3, 'NaN', '{NaN}')")
    try:
        with pytest.raises(PzConnectorError, match="NaN") as native:
            conn.extract_native(staging(), request, Partition(0, "all"), '"t"')
        assert native.value.code == "PZ0505" and "n, na" in native.value.message
        with pytest.raises(PzConnectorError, match="NaN"):
            list(conn.extract_batches(request, Partition(0, "all")))
    finally:
        pg.execute("DELETE FROM shop.nan_guard WHERE id = 3")


@pytest.fixture
def guard_paths(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts how the NaN guard answered: by key lookup (`key`) or by scanning the table (`scan`)."""
    calls = {"key": 0, "scan": 0}
    by_key, by_scan = nan_guard._nan_by_key, nan_guard._nan_by_scan

    def key(*args: Any) -> Any:
        found = by_key(*args)
        calls["key"] += found is not None
        return found

    def scan(*args: Any) -> Any:
        calls["scan"] += 1
        return by_scan(*args)

    monkeypatch.setattr(nan_guard, "_nan_by_key", key)
    monkeypatch.setattr(nan_guard, "_nan_by_scan", scan)
    return calls


def _guard_outcome(conn: PostgresConnector, request: DatasetRequest) -> str:
    try:
        conn.extract_native(staging(), request, Partition(0, "all"), '"t"')
    except PzConnectorError as exc:
        assert exc.code == "PZ0505" and "hold NaN" in exc.message, exc.message
        return exc.message
    return "ok"


def test_nan_guard_looks_up_few_zeros_by_key(
    conn: PostgresConnector, pg: psycopg.Connection[Any], guard_paths: dict[str, int]
) -> None:
    pg.execute(
        "CREATE TABLE shop.guard_pk (id bigint PRIMARY KEY, n numeric(8,2), na numeric(8,2)[]);"
        "INSERT INTO shop.guard_pk SELECT g, g % 50, ARRAY[g % 70] FROM generate_series(1, 500) AS g;"
        "CREATE TABLE shop.guard_pair (a int, b text, n numeric(8,2), UNIQUE (b, a));"
        "INSERT INTO shop.guard_pair SELECT g, 'k' || g, g % 7 FROM generate_series(1, 100) AS g;"
        "CREATE TABLE shop.guard_uuid (u uuid PRIMARY KEY, n numeric(8,2));"
        "INSERT INTO shop.guard_uuid VALUES ('00000000-0000-0000-0000-000000000001', 0), "
        "('00000000-0000-0000-0000-000000000002', 1)"
    )
    pk, pair, uid = ds(table="shop.guard_pk"), ds(table="shop.guard_pair"), ds(table="shop.guard_uuid")
    assert [_guard_outcome(conn, r) for r in (pk, pair, uid)] == ["ok"] * 3  # real zeros pass
    assert guard_paths == {"key": 3, "scan": 0}
    pg.execute("UPDATE shop.guard_pk SET n = 'NaN' WHERE id = 123")
    assert "column(s) n hold" in _guard_outcome(conn, pk)
    pg.execute("UPDATE shop.guard_pk SET n = 1, na = '{1,NaN}' WHERE id = 123")
    assert "column(s) na hold" in _guard_outcome(conn, pk)
    pg.execute("UPDATE shop.guard_pair SET n = 'NaN' WHERE a = 50")
    assert "column(s) n hold" in _guard_outcome(conn, pair)
    pg.execute("UPDATE shop.guard_uuid SET n = 'NaN' WHERE n = 1")
    assert "column(s) n hold" in _guard_outcome(conn, uid)
    assert guard_paths == {"key": 7, "scan": 0}
    # a key the contract casts is not staged exactly: the scan answers
    cast = ds(table="shop.guard_pk", columns={"id": "VARCHAR", "n": "DECIMAL(8,2)"})
    assert _guard_outcome(conn, cast) == "ok"  # n holds no NaN now; na (NaN) is not selected
    pg.execute("UPDATE shop.guard_pk SET n = 'NaN', na = '{1}' WHERE id = 123")
    assert "column(s) n hold" in _guard_outcome(conn, cast)
    assert guard_paths == {"key": 7, "scan": 2}


def test_nan_guard_scans_without_a_usable_key(
    conn: PostgresConnector, pg: psycopg.Connection[Any], guard_paths: dict[str, int]
) -> None:
    pg.execute(
        "CREATE TABLE shop.guard_nokey (id int, n numeric(8,2));"
        "INSERT INTO shop.guard_nokey VALUES (1, 0), (2, 1);"
        "CREATE TABLE shop.guard_null (id int UNIQUE, n numeric(8,2));"
        "INSERT INTO shop.guard_null VALUES (1, 0), (NULL, 0), (2, 1);"
        "CREATE TABLE shop.guard_hidden (id int PRIMARY KEY, n numeric(8,2));"
        "INSERT INTO shop.guard_hidden VALUES (1, 0), (2, 1);"
    )
    nokey, null = ds(table="shop.guard_nokey"), ds(table="shop.guard_null")
    hidden = ds(table="shop.guard_hidden", columns={"n": "DECIMAL(8,2)"})  # the key is not selected
    assert [_guard_outcome(conn, r) for r in (nokey, null, hidden)] == ["ok"] * 3
    assert guard_paths == {"key": 0, "scan": 3}
    pg.execute("INSERT INTO shop.guard_nokey VALUES (3, 'NaN')")
    pg.execute("UPDATE shop.guard_null SET n = 'NaN' WHERE id IS NULL")  # the NULL key cannot find it
    pg.execute("UPDATE shop.guard_hidden SET n = 'NaN' WHERE id = 1")
    assert all("column(s) n hold" in _guard_outcome(conn, r) for r in (nokey, null, hidden))
    assert guard_paths == {"key": 0, "scan": 6}


def test_nan_guard_scans_when_zeros_are_many(
    conn: PostgresConnector, pg: psycopg.Connection[Any], guard_paths: dict[str, int]
) -> None:
    many = nan_guard.GUARD_KEY_LIMIT + 5
    pg.execute(
        "CREATE TABLE shop.guard_many (id int PRIMARY KEY, n numeric(8,2));"
        f"INSERT INTO shop.guard_many SELECT g, 0 FROM generate_series(1, {many}) AS g;"
        "INSERT INTO shop.guard_many VALUES (-1, 1)"
    )
    request = ds(table="shop.guard_many")
    assert _guard_outcome(conn, request) == "ok"
    pg.execute(f"UPDATE shop.guard_many SET n = 'NaN' WHERE id = {many}")
    assert "column(s) n hold" in _guard_outcome(conn, request)
    assert guard_paths == {"key": 0, "scan": 2}
    pg.execute(f"DELETE FROM shop.guard_many WHERE id > {nan_guard.GUARD_KEY_LIMIT - 10}")
    pg.execute("UPDATE shop.guard_many SET n = 'NaN' WHERE id = 7")
    assert "column(s) n hold" in _guard_outcome(conn, request)  # few enough again: by key
    assert guard_paths == {"key": 1, "scan": 2}


def test_nan_guard_scans_when_a_staged_key_moved(
    conn: PostgresConnector, pg: psycopg.Connection[Any], guard_paths: dict[str, int]
) -> None:
    """Rows changed between the staging scan and the guard: a staged zero row whose key no longer finds
    it (deleted, or its key changed) sends the guard to the scan, which still finds a NaN anywhere."""
    pg.execute(
        "CREATE TABLE shop.guard_moved (id int PRIMARY KEY, n numeric(8,2));"
        "INSERT INTO shop.guard_moved VALUES (1, 'NaN'), (2, 0), (3, 1)"
    )
    request = ds(table="shop.guard_moved")
    relation = conn.relation(request)
    con = staging()
    with pytest.MonkeyPatch.context() as patch:  # stage without the guard
        patch.setattr(native, "nan_guard", lambda *args: None)
        conn.extract_native(con, request, Partition(0, "all"), '"t"')
    assert con.execute('SELECT n FROM "t" ORDER BY id').fetchall() == [(0,), (0,), (1,)]

    def guard() -> None:
        nan_guard.nan_guard(con, conn.control(), conn.settings, relation, '"t"', "")

    with pytest.raises(PzConnectorError, match="column\\(s\\) n hold NaN"):
        guard()
    assert guard_paths == {"key": 1, "scan": 0}
    pg.execute("UPDATE shop.guard_moved SET id = 10 WHERE id = 1")
    with pytest.raises(PzConnectorError, match="column\\(s\\) n hold NaN"):
        guard()
    assert guard_paths == {"key": 1, "scan": 1}
    pg.execute("UPDATE shop.guard_moved SET n = 5 WHERE id = 10")
    guard()  # the NaN is gone from the server
    assert guard_paths == {"key": 1, "scan": 2}


def test_more_dimensions_than_declared_is_refused_in_both_tiers(conn: PostgresConnector) -> None:
    request = ds(table="shop.flat")
    with pytest.raises(PzConnectorError, match="dimensions"):
        conn.extract_native(staging(), request, Partition(0, "all"), '"t"')
    with pytest.raises(PzConnectorError, match="multi-dimensional array") as universal:
        list(conn.extract_batches(request, Partition(0, "all")))
    assert "pz-guard" not in universal.value.message and not universal.value.is_transient


def test_universal_batches_are_arrow_with_canonical_types(conn: PostgresConnector) -> None:
    batches = list(conn.extract_batches(ds(table="shop.alltypes"), Partition(0, "all")))
    schema = batches[0].schema
    assert schema.field("c_uuid").type == pa.uuid()
    assert schema.field("c_json").type == pa.json_()
    assert schema.field("c_num").type == pa.decimal128(12, 3)
    assert schema.field("c_tstz").type == pa.timestamp("us", tz="UTC")
    assert all(b.schema == schema for b in batches)
    empty = list(conn.extract_batches(ds(table="shop.empty"), Partition(0, "all")))
    assert len(empty) == 1 and empty[0].num_rows == 0 and empty[0].schema.names == ["id", "name"]


# -- tier 5 ---------------------------------------------------------------------------------------
def test_fetch_schema_check_connection(conn: PostgresConnector) -> None:
    conn.check_connection()
    assert conn.fetch_schema(ds(table="shop.orders")) == [
        ("id", "INTEGER"),
        ("customer_id", "INTEGER"),
        ("amount", "DECIMAL(12,2)"),
        ("status", "VARCHAR"),
        ("updated_at", "TIMESTAMP WITH TIME ZONE"),
        ("day", "DATE"),
    ]
    with pytest.raises(PzConnectorError) as missing:
        conn.fetch_schema(ds(table="shop.nope"))
    assert missing.value.code == "PZ0602" and "shop.nope" in missing.value.message


def test_check_connection_failures(database: str) -> None:
    refused = PostgresConnector(
        ConnectorContext("pg", Path("."), connection(database, port=1, password=SECRET))
    )
    with pytest.raises(PzConnectorError) as exc:
        refused.check_connection()
    assert exc.value.code == "PZ0601" and exc.value.is_transient
    assert SECRET not in exc.value.message
    nodb = PostgresConnector(ConnectorContext("pg", Path("."), connection("pz_no_such_db", password=SECRET)))
    with pytest.raises(PzConnectorError) as exc:
        nodb.check_connection()
    assert exc.value.code == "PZ0601" and not exc.value.is_transient and "does not exist" in exc.value.message


def test_probe_output(database: str, pg: psycopg.Connection[Any], conn: PostgresConnector) -> None:
    conn.probe_output(OutputRequest("o", {"table": "shop.orders"}, "replace"))
    conn.probe_output(OutputRequest("o", {"table": "shop.brand_new"}, "merge", keys=("id",)))
    role = f"pz_probe_{secrets.token_hex(3)}"
    pg.execute(f"CREATE ROLE {role} LOGIN")
    pg.execute(f"GRANT USAGE ON SCHEMA shop TO {role}")
    try:
        limited = PostgresConnector(ConnectorContext("pg", Path("."), {**connection(database), "user": role}))
        with pytest.raises(PzConnectorError) as exc:
            limited.probe_output(OutputRequest("o", {"table": "shop.orders"}, "replace"))
        assert exc.value.code == "PZ0606"
        assert (
            "not the owner of shop.orders" in exc.value.message
            and "no CREATE on schema shop" in exc.value.message
        )
        with pytest.raises(PzConnectorError, match=r"no INSERT on shop\.orders"):
            limited.probe_output(OutputRequest("o", {"table": "shop.orders"}, "append"))
        with pytest.raises(PzConnectorError, match="schema nope does not exist"):
            limited.probe_output(OutputRequest("o", {"table": "nope.t"}, "append"))
        pg.execute(f"GRANT INSERT ON shop.orders TO {role}")
        limited.probe_output(OutputRequest("o", {"table": "shop.orders"}, "append"))
        limited.close()
    finally:
        pg.execute(f"DROP OWNED BY {role}")
        pg.execute(f"DROP ROLE {role}")


# -- errors: classification and secrets ----------------------------------------------------------------
TRANSIENT_STATES = ["40001", "40P01", "55P03", "57014", "57P01", "57P03", "53300", "08006", "08001"]
TERMINAL_STATES = ["42601", "42501", "42P01", "42703", "22012", "23505", "0A000", "XX000"]


@pytest.mark.parametrize("state", TRANSIENT_STATES + TERMINAL_STATES)
def test_sqlstate_classification_psycopg_and_adbc(
    pg: psycopg.Connection[Any], database: str, state: str
) -> None:
    raise_it = f"DO $$ BEGIN RAISE EXCEPTION 'boom' USING ERRCODE = '{state}'; END $$"
    with pytest.raises(psycopg.Error) as psy:
        pg.execute(raise_it)
    settings = Settings.from_connection(connection(database))
    adbc = settings.adbc()
    cur = adbc.cursor()
    with pytest.raises(Exception) as via_adbc:
        cur.execute(raise_it)
    cur.close()
    adbc.close()
    expected = state in TRANSIENT_STATES
    assert classify(psy.value)[0] is expected
    assert classify(via_adbc.value)[0] is expected
    err = settings.error(via_adbc.value, "where", "PZ0505")
    assert err.is_transient is expected and "boom" in err.message and "Query was" not in err.message


def test_real_errors_classified(pg: psycopg.Connection[Any], conn: PostgresConnector) -> None:
    with pytest.raises(psycopg.Error) as syntax:
        pg.execute("SELEC 1")
    assert classify(syntax.value) == (False, None)
    with pytest.raises(PzConnectorError) as undefined:
        list(conn.extract_batches(ds(query="SELECT nope FROM shop.orders"), Partition(0, "all")))
    assert not undefined.value.is_transient and "nope" in undefined.value.message
    assert classify(psycopg.OperationalError("connection failed: Connection refused")) == (True, None)
    assert (
        classify(psycopg.OperationalError('FATAL:  password authentication failed for user "x"'))[0] is False
    )
    assert classify(duckdb.IOException('IO Error: Unable to connect to Postgres at "": Connection refused'))[
        0
    ]
    assert not classify(duckdb.CatalogException('Catalog Error: Table with name "timeout" does not exist!'))[
        0
    ]
    assert summary("ERROR: x\nLINE 1: select timeout\n ^") == "ERROR: x"


SERVER_WORDS = [
    # (error without its SQLSTATE, expected (transient, retry_after))
    (
        duckdb.IOException(
            "IO Error: Failed to fetch header for COPY: FATAL:  "
            "terminating connection due to administrator command"
        ),
        (True, 1.0),
    ),
    (
        OSError(
            "[libpq] Execution error [PGRES_FATAL_ERROR]: ERROR:  could not serialize access due to "
            "read/write dependencies among transactions"
        ),
        (True, None),
    ),
    (OSError("[libpq] Execution error [PGRES_FATAL_ERROR]: ERROR:  deadlock detected"), (True, None)),
    (OSError("[libpq] PQgetResult: FATAL:  the database system is shutting down"), (True, 2.0)),
    (
        duckdb.IOException(
            "IO Error: Unable to connect to Postgres: FATAL:  sorry, too many clients already"
        ),
        (True, 5.0),
    ),
    # pz's own interrupt, a quoted name that happens to hold the words, an ordinary error: terminal
    (
        OSError(
            "[libpq] Execution error [PGRES_FATAL_ERROR]: ERROR:  canceling statement due to user request"
        ),
        (False, None),
    ),
    (
        duckdb.CatalogException('Catalog Error: Table with name "deadlock detected" does not exist!'),
        (False, None),
    ),
    (OSError("[libpq] Execution error [PGRES_FATAL_ERROR]: ERROR:  division by zero"), (False, None)),
]


@pytest.mark.parametrize(("error", "expected"), SERVER_WORDS, ids=lambda v: str(v)[:40])
def test_errors_that_lost_their_sqlstate_are_classified_by_the_server_s_words(
    error: BaseException, expected: tuple[bool, float | None]
) -> None:
    assert classify(error) == expected


@pytest.mark.parametrize("tier", ["native", "universal", "control"])
@pytest.mark.parametrize("form", ["keys", "dsn_uri", "dsn_kv"])
def test_password_never_in_errors(database: str, tier: str, form: str) -> None:
    if form == "keys":
        block = connection(database, port=1, password=SECRET)
    elif form == "dsn_uri":
        from urllib.parse import quote

        block = {"dsn": f"postgresql://{USER}:{quote(SECRET, safe='')}@{HOST}:1/{database}"}
    else:
        quoted = SECRET.replace("\\", "\\\\").replace("'", "\\'")
        block = {"dsn": f"host={HOST} port=1 dbname={database} user={USER} password='{quoted}'"}
    pgc = PostgresConnector(ConnectorContext("pg", Path("."), block))
    assert pgc.settings.password == SECRET
    with pytest.raises(PzConnectorError) as exc:
        if tier == "native":
            pgc._control = psycopg.connect(host=HOST, port=PORT, user=USER, dbname=database, autocommit=True)
            pgc._relations.clear()
            relation_request = ds(table="shop.orders")
            pgc.relation(relation_request)  # described through the working control connection
            pgc.extract_native(staging(), relation_request, Partition(0, "all"), '"t"')
        elif tier == "universal":
            pgc._control = psycopg.connect(host=HOST, port=PORT, user=USER, dbname=database, autocommit=True)
            list(pgc.extract_batches(ds(table="shop.orders"), Partition(0, "all")))
        else:
            pgc.check_connection()
    message = exc.value.message
    assert exc.value.is_transient, message
    for form_of_secret in (SECRET, "s3cr3t", "Pässw0rd", "P%C3%A4ssw0rd"):
        assert form_of_secret not in message
    assert "127.0.0.1" in message or "port 1" in message or "Connection refused" in message
    pgc.close()


def test_scrub_forms() -> None:
    settings = Settings.from_connection({"host": "h", "password": "pw'x"})
    text = "password=pw'x  postgresql://u:pw%27x@h/db password='pw\\'x' libpq: pw'x"
    scrubbed = settings.scrub(text)
    assert "pw'x" not in scrubbed and "pw%27x" not in scrubbed and "pw\\'x" not in scrubbed
    assert (
        Settings.from_connection({"host": "h"}).scrub("postgresql://u:other@h/db")
        == "postgresql://u:***@h/db"
    )


def test_settings_and_validate() -> None:
    settings = Settings.from_connection(
        {
            "dsn": "postgresql://u:p%40ss@db.example:6543/shop?sslmode=require",
            "options": "-c search_path=shop",
        }
    )
    assert settings.password == "p@ss"
    assert settings.params["host"] == "db.example" and settings.params["port"] == "6543"
    assert settings.params["dbname"] == "shop" and settings.params["sslmode"] == "require"
    assert settings.params["options"].endswith("-c search_path=shop")
    assert "p@ss" not in settings.libpq(with_password=False)
    assert "password='p@ss'" in settings.libpq(with_password=True)
    with pytest.raises(PzConnectorError, match="sslmode"):
        Settings.from_connection({"sslmode": "sometimes"})
    issues = PostgresConnector.validate(
        {"dsn": "postgresql://x", "host": "h"},
        {
            "a": {"table": "t", "query": "select 1"},
            "b": {},
            "c": {"table": 'bad"name'},
            "d": {"table": "a.b.c"},
            "e": {"table": "{{ var('t') }}"},
        },
        {"o": {"table": "x..y"}, "p": {"table": "public.ok"}},
    )
    got = sorted((i.block, i.name, i.path) for i in issues)
    assert got == [
        ("connection", None, ("host",)),
        ("dataset", "a", ("table",)),
        ("dataset", "b", ()),
        ("dataset", "c", ("table",)),
        ("dataset", "d", ("table",)),
        ("output", "o", ("table",)),
    ]


def test_manifest_is_data() -> None:
    from pipelinez.connectors import registry

    manifest = registry.manifest_of("postgres")
    caps = manifest.capabilities
    assert manifest.name == "postgres" and manifest.version == "0.1.0"
    assert caps.source_tiers == ("native", "universal") and caps.sink_tiers == ("native", "universal")
    assert caps.strategies == ("replace", "merge", "append", "view") and caps.partitions
    assert caps.atomic_replace and caps.transactional_merge
    assert manifest.connection_schema["additionalProperties"] is False
    assert registry.load_class("postgres") is PostgresConnector
