"""The mysql connector against the live MariaDB on 127.0.0.1:3306 (root, no password).

Each module run creates its own database `pz_test_<random>` and drops it afterwards.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pymysql
import pytest

from pipelinez.connectors.mysql import sink as mysql_sink
from pipelinez.connectors.mysql.connector import MySQLConnector
from pipelinez.connectors.mysql.settings import Settings, TableName, is_transient, split_qualified
from pipelinez.connectors.sdk import ConnectorContext, DatasetRequest, OutputRequest, Partition
from pipelinez.core.diagnostics import PzConnectorError

pytestmark = pytest.mark.mysql

HOST, PORT, USER = "127.0.0.1", 3306, "root"


def _server() -> pymysql.connections.Connection[Any]:
    return pymysql.connect(host=HOST, port=PORT, user=USER, password="", charset="utf8mb4", autocommit=True)


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    try:
        con = _server()
    except pymysql.MySQLError as exc:
        pytest.fail(f"MariaDB not reachable on {HOST}:{PORT} (start it as .ci/run does): {exc}")
    name = f"pz_test_{secrets.token_hex(4)}"
    with con.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    try:
        yield name
    finally:
        with con.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        con.close()


@pytest.fixture
def db(database: str) -> Iterator[pymysql.connections.Connection[Any]]:
    con = pymysql.connect(
        host=HOST, port=PORT, user=USER, password="", database=database, charset="utf8mb4", autocommit=True
    )
    with con.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
    yield con
    con.close()


def connection(database: str, **extra: Any) -> dict[str, Any]:
    return {"host": HOST, "port": PORT, "user": USER, "password": "", "database": database, **extra}


@pytest.fixture
def conn(database: str) -> MySQLConnector:
    return MySQLConnector(ConnectorContext("my", Path("."), connection(database)))


def sql(con: pymysql.connections.Connection[Any], statement: str, args: Any = None) -> list[tuple[Any, ...]]:
    with con.cursor() as cur:
        cur.execute(statement, args)
        return list(cur.fetchall())


def extract(conn: MySQLConnector, dataset: DatasetRequest, partition: Partition | None = None) -> pa.Table:
    part = partition or Partition(0, "all")
    batches = list(conn.extract_batches(dataset, part))
    assert batches, "a read always yields at least one (maybe empty) batch"
    return pa.Table.from_batches(batches)


def reader_of(table: pa.Table, max_chunksize: int | None = None) -> pa.RecordBatchReader:
    return pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=max_chunksize))


# -- types --------------------------------------------------------------------------------------------
TYPES_DDL = """
CREATE TABLE every_type (
  id INT PRIMARY KEY,
  b TINYINT(1), ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, su SMALLINT UNSIGNED,
  mi MEDIUMINT, mu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, bu BIGINT UNSIGNED,
  f FLOAT, d DOUBLE, d38 DECIMAL(38,10), d65 DECIMAL(65,30), d0 DECIMAL(10,0), du DECIMAL(12,4) UNSIGNED,
  da DATE, dtm DATETIME, dt6 DATETIME(6), ts TIMESTAMP(6) NULL, tm TIME(6), yr YEAR,
  bit1 BIT(1), bit64 BIT(64),
  c CHAR(5), vc VARCHAR(100), tx TEXT, lt LONGTEXT, js JSON, en ENUM('a','ü'), st SET('x','y'),
  bn BINARY(4), vb VARBINARY(20), bl BLOB, lb LONGBLOB
) CHARACTER SET utf8mb4
"""

ROW_MAX = (
    1,
    True,
    127,
    255,
    32767,
    65535,
    8388607,
    16777215,
    2147483647,
    4294967295,
    9223372036854775807,
    18446744073709551615,
    3.5,
    1.7976931348623157e308,
    Decimal("9999999999999999999999999999.9999999999"),
    Decimal("99999999999999999999999999999999999.999999999999999999999999999999"),
    Decimal("9999999999"),
    Decimal("99999999.9999"),
    dt.date(9999, 12, 31),
    dt.datetime(9999, 12, 31, 23, 59, 59),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
    dt.datetime(2038, 1, 19, 3, 14, 7, 999999),
    dt.time(23, 59, 59, 999999),
    2155,
    1,
    18446744073709551615,
    "ab✓",
    "héllo wörld ✓ 日本語 😀 𝄞",
    "tab\there\nnewline\\back\r\x00nul 'q' \"dq\"",
    "L" * 70000,
    '{"a": [1, 2.5, "ü"], "b": null}',
    "ü",
    "x,y",
    b"\x00\xff\t\n",
    b"\\N\x00\r\n\t",
    bytes(range(256)),
    b"\xff" * 100000,
)
ROW_MIN = (
    2,
    False,
    -128,
    0,
    -32768,
    0,
    -8388608,
    0,
    -2147483648,
    0,
    -9223372036854775808,
    0,
    -3.5,
    -1.7976931348623157e308,
    Decimal("-9999999999999999999999999999.9999999999"),
    Decimal("-99999999999999999999999999999999999.999999999999999999999999999999"),
    Decimal("-9999999999"),
    Decimal("0.0001"),
    dt.date(1000, 1, 1),
    dt.datetime(1000, 1, 1, 0, 0, 0),
    dt.datetime(1000, 1, 1, 0, 0, 0, 1),
    dt.datetime(1970, 1, 1, 0, 0, 1),
    dt.time(0, 0),
    1901,
    0,
    0,
    "",
    "",
    "",
    "",
    "[]",
    "a",
    "",
    b"\x00\x00\x00\x00",
    b"",
    b"",
    b"",
)
ROW_NULL = (3, *([None] * (len(ROW_MAX) - 1)))
ROW_SPECIAL = (
    4,
    None,
    0,
    None,
    None,
    None,
    None,
    None,
    None,
    None,
    None,
    None,
    1.25,
    5e-324,
    Decimal("0E-10"),
    None,
    Decimal("0"),
    None,
    dt.date(2024, 2, 29),
    dt.datetime(2024, 2, 29, 12, 0),
    dt.datetime(2024, 2, 29, 12, 0, 0, 500),
    None,
    dt.time(12, 34, 56, 789000),
    None,
    None,
    None,
    "\\N",
    "NULL",
    "\\",
    "\\N",
    '"\\\\"',
    None,
    None,
    None,
    b"\\",
    b"NULL",
    None,
)
ROWS = [ROW_MAX, ROW_MIN, ROW_NULL, ROW_SPECIAL]

EXPECTED_TYPES = [
    ("id", "INTEGER"),
    ("b", "BOOLEAN"),
    ("ti", "TINYINT"),
    ("tu", "UTINYINT"),
    ("si", "SMALLINT"),
    ("su", "USMALLINT"),
    ("mi", "INTEGER"),
    ("mu", "UINTEGER"),
    ("i", "INTEGER"),
    ("iu", "UINTEGER"),
    ("bi", "BIGINT"),
    ("bu", "UBIGINT"),
    ("f", "FLOAT"),
    ("d", "DOUBLE"),
    ("d38", "DECIMAL(38,10)"),
    ("d65", "VARCHAR"),
    ("d0", "DECIMAL(10,0)"),
    ("du", "DECIMAL(12,4)"),
    ("da", "DATE"),
    ("dtm", "TIMESTAMP"),
    ("dt6", "TIMESTAMP"),
    ("ts", "TIMESTAMP WITH TIME ZONE"),
    ("tm", "TIME"),
    ("yr", "SMALLINT"),
    ("bit1", "BOOLEAN"),
    ("bit64", "UBIGINT"),
    ("c", "VARCHAR"),
    ("vc", "VARCHAR"),
    ("tx", "VARCHAR"),
    ("lt", "VARCHAR"),
    ("js", "VARCHAR"),
    ("en", "VARCHAR"),
    ("st", "VARCHAR"),
    ("bn", "BLOB"),
    ("vb", "BLOB"),
    ("bl", "BLOB"),
    ("lb", "BLOB"),
]


def expected_staged(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """What DuckDB should hold for a row inserted as `row`."""
    names = [name for name, _ in EXPECTED_TYPES]
    out: list[Any] = []
    for name, value in zip(names, row, strict=True):
        if value is None:
            out.append(None)
        elif name in ("b", "bit1"):
            out.append(bool(value))
        elif name == "d65":
            out.append(str(value) if value != 0 else "0E-30")
        elif name == "f":
            out.append(float(value))
        elif name == "bn":
            out.append(value.ljust(4, b"\x00"))
        elif name == "c":
            out.append(value)
        else:
            out.append(value)
    return tuple(out)


@pytest.fixture(scope="module")
def every_type(database: str) -> str:
    con = pymysql.connect(
        host=HOST,
        port=PORT,
        user=USER,
        password="",
        database=database,
        charset="utf8mb4",
        autocommit=True,
        binary_prefix=True,
    )
    with con.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute(TYPES_DDL)
        marks = ", ".join(["%s"] * len(ROW_MAX))
        for row in ROWS:
            cur.execute(f"INSERT INTO every_type VALUES ({marks})", row)
    con.close()
    return "every_type"


def test_fetch_schema_maps_every_type(conn: MySQLConnector, every_type: str) -> None:
    assert conn.fetch_schema(DatasetRequest("t", {"table": every_type}, None)) == EXPECTED_TYPES


def test_every_type_round_trips_into_duckdb(conn: MySQLConnector, every_type: str, db: Any) -> None:
    table = extract(conn, DatasetRequest("t", {"table": every_type}, None))
    assert table.num_rows == len(ROWS)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("batch", table)
    con.execute("CREATE TABLE staged AS SELECT * FROM batch")
    described = [(name, kind) for name, kind, *_ in con.execute("DESCRIBE staged").fetchall()]
    assert described == EXPECTED_TYPES
    # TIMESTAMPTZ read back as its UTC wall clock (DuckDB's Python conversion of TIMESTAMPTZ needs pytz)
    got = con.execute("SELECT * REPLACE (timezone('UTC', ts) AS ts) FROM staged ORDER BY id").fetchall()
    for row, actual in zip(ROWS, got, strict=True):
        expected = expected_staged(row)
        for (name, _), want, have in zip(EXPECTED_TYPES, expected, actual, strict=True):
            if name == "d65" and want is not None:
                assert Decimal(have) == Decimal(str(row[15])), name
                continue
            assert have == want, (row[0], name, have, want)
    # the JSON text is the server's canonical text and still parses
    js = [r[0] for r in sql(db, "SELECT js FROM every_type ORDER BY id")]
    assert [r[30] for r in got] == js
    assert json.loads(got[0][30]) == {"a": [1, 2.5, "ü"], "b": None}


def test_query_dataset_and_contract_subset(conn: MySQLConnector, every_type: str) -> None:
    query = f"SELECT id, vc, d0 + 1 AS plus, d38 * 2 AS twice FROM {every_type} WHERE id <= 2;"
    table = extract(conn, DatasetRequest("q", {"query": query}, None))
    assert table.column_names == ["id", "vc", "plus", "twice"]
    assert table.column("plus").type == pa.decimal128(11, 0)
    assert table.column("plus").to_pylist() == [Decimal("10000000000"), Decimal("-9999999998")]
    # DECIMAL(39,10) does not fit DuckDB's DECIMAL: exact text
    assert table.column("twice").to_pylist() == [
        "19999999999999999999999999999.9999999998",
        "-19999999999999999999999999999.9999999998",
    ]
    contract = DatasetRequest("t", {"table": every_type}, {"VC": "varchar", "id": "integer"})
    table = extract(conn, contract)
    assert table.column_names == ["vc", "id"]
    with pytest.raises(PzConnectorError, match="nope"):
        extract(conn, DatasetRequest("t", {"table": every_type}, {"nope": "integer"}))


def test_values_a_mapping_cannot_hold_fail_clearly(conn: MySQLConnector, db: Any) -> None:
    sql(db, "CREATE TABLE odd (id INT, flag TINYINT(1), t TIME(6), d DATETIME)")
    sql(db, "INSERT INTO odd VALUES (1, 2, '-838:59:59', '2024-01-01'), (2, 0, '25:00:00.5', NULL)")
    with pytest.raises(PzConnectorError, match=r"'flag' is TINYINT\(1\).*holds 2") as info:
        extract(conn, DatasetRequest("odd", {"table": "odd"}, None))
    assert not info.value.is_transient
    ok = extract(
        conn, DatasetRequest("odd", {"table": "odd"}, {"id": "int", "flag": "TINYINT", "t": "interval"})
    )
    assert ok.column("flag").to_pylist() == [2, 0]
    assert ok.column("t").type == pa.duration("us")
    assert ok.column("t").to_pylist() == [
        dt.timedelta(hours=-838, minutes=-59, seconds=-59),
        dt.timedelta(hours=25, microseconds=500000),
    ]
    with pytest.raises(PzConnectorError, match="'t' is TIME but holds -838:59:59"):
        extract(conn, DatasetRequest("odd", {"table": "odd"}, {"id": "int", "flag": "TINYINT", "t": "time"}))
    sql(db, "SET SESSION sql_mode = ''")
    sql(db, "INSERT INTO odd VALUES (3, 0, '00:00:00', '0000-00-00 00:00:00')")
    with pytest.raises(PzConnectorError, match=r"column\(s\) d hold dates no calendar has.*query:") as info:
        extract(conn, DatasetRequest("odd", {"table": "odd"}, {"id": "int", "d": "timestamp"}))
    assert not info.value.is_transient and info.value.code == "PZ0518"
    sql(db, "INSERT INTO odd VALUES (4, 0, '00:00:00', '2020-02-00 10:00:00')")
    with pytest.raises(PzConnectorError, match=r"column\(s\) d hold dates no calendar has") as info:
        extract(conn, DatasetRequest("odd", {"query": "SELECT id, d FROM odd WHERE id = 4"}, None))
    assert info.value.code == "PZ0518"


# -- partitions ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def numbers(database: str) -> str:
    con = pymysql.connect(host=HOST, port=PORT, user=USER, password="", database=database, autocommit=True)
    with con.cursor() as cur:
        cur.execute(
            "CREATE TABLE numbers (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, k BIGINT NULL, v VARCHAR(10))"
        )
        cur.execute(
            "INSERT INTO numbers (k, v) "
            "SELECT CAST(seq AS SIGNED) * 3 - 500, CONCAT('v', seq) FROM seq_1_to_1000"
        )
        cur.execute("INSERT INTO numbers (k, v) VALUES (NULL, 'n1'), (NULL, 'n2'), (-500, 'dup')")
    con.close()
    return "numbers"


@pytest.mark.parametrize("count", [1, 3, 7, 64])
def test_partitions_cover_every_row_exactly_once(
    conn: MySQLConnector, db: Any, numbers: str, count: int
) -> None:
    ds = DatasetRequest("numbers", {"table": numbers, "partitions": {"column": "k", "count": count}}, None)
    parts = conn.partitions(ds)
    assert len(parts) == min(count, 3001)  # k spans [-500, 2500]
    assert [p.index for p in parts] == list(range(len(parts)))
    json.dumps([p.spec for p in parts])  # specs are plain JSON
    seen: list[int] = []
    for part in parts:
        table = extract(conn, ds, part)
        if table.num_rows:
            seen += table.column("id").to_pylist()
    everything = [row[0] for row in sql(db, f"SELECT id FROM {numbers} ORDER BY id")]
    assert len(everything) == 1003
    assert sorted(seen) == everything


def test_partitions_never_exceed_the_span(conn: MySQLConnector, db: Any) -> None:
    sql(db, "CREATE TABLE narrow (id INT, k BIGINT UNSIGNED)")
    sql(db, "INSERT INTO narrow VALUES (1, 18446744073709551611), (2, 18446744073709551615), (3, NULL)")
    ds = DatasetRequest("n", {"table": "narrow", "partitions": {"column": "k", "count": 50}}, None)
    parts = conn.partitions(ds)
    assert len(parts) == 5
    assert parts[-1].spec["upper"] == 18446744073709551615 and parts[-1].spec["last"]
    ids = sorted(i for part in parts for i in extract(conn, ds, part).column("id").to_pylist())
    assert ids == [1, 2, 3]


def test_partitions_on_empty_and_non_integer_columns(conn: MySQLConnector, db: Any, numbers: str) -> None:
    sql(db, "CREATE TABLE empty_t (id INT, k INT)")
    ds = DatasetRequest("e", {"table": "empty_t", "partitions": {"column": "k", "count": 4}}, None)
    parts = conn.partitions(ds)
    assert len(parts) == 1 and parts[0].spec.get("all")
    assert extract(conn, ds, parts[0]).num_rows == 0
    bad = DatasetRequest("n", {"table": numbers, "partitions": {"column": "v", "count": 4}}, None)
    with pytest.raises(PzConnectorError, match="integer column"):
        conn.partitions(bad)


# -- sink ---------------------------------------------------------------------------------------------
def sink_table(rows: list[tuple[Any, ...]]) -> pa.Table:
    names = ["id", "name", "amount", "at", "blob", "deleted"]
    columns: list[Any] = list(zip(*rows, strict=True)) if rows else [[] for _ in names]
    return pa.table(
        {
            "id": pa.array(columns[0], pa.int64()),
            "name": pa.array(columns[1], pa.string()),
            "amount": pa.array(columns[2], pa.decimal128(12, 2)),
            "at": pa.array(columns[3], pa.timestamp("us")),
            "blob": pa.array(columns[4], pa.binary()),
            "deleted": pa.array(columns[5], pa.bool_()),
        }
    )


T0 = dt.datetime(2024, 1, 1, 12, 0, 0, 123456)
BASE = [
    (1, "one", Decimal("1.10"), T0, b"\x00", False),
    (2, "twö 😀", Decimal("-2.20"), None, None, False),
    (3, None, None, T0, b"\t\n\\", False),
]


def read_back(db: Any, table: str) -> list[tuple[Any, ...]]:
    return sql(db, f"SELECT id, name, amount, `at`, `blob`, deleted FROM `{table}` ORDER BY id")


def normalise(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [(r[0], r[1], r[2], r[3], r[4], None if r[5] is None else int(r[5])) for r in sorted(rows)]


def read_merged(db: Any, table: str) -> list[tuple[Any, ...]]:
    """A merge target's rows, without the on_delete column (a control column, never written)."""
    return sql(db, f"SELECT id, name, amount, `at`, `blob` FROM `{table}` ORDER BY id")


def merged(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [r[:5] for r in sorted(rows)]


def columns_of(db: Any, table: str) -> list[str]:
    return [
        str(r[0])
        for r in sql(
            db,
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
            "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
            [table],
        )
    ]


def out(name: str, strategy: str, run_id: str = "20261010T020011408Z-7d1e", **kw: Any) -> OutputRequest:
    return OutputRequest(name, kw.pop("options", {}), strategy, run_id=run_id, **kw)


def test_replace_creates_then_swaps_row_for_row(conn: MySQLConnector, db: Any) -> None:
    result = conn.write_batches(out("rep", "replace"), reader_of(sink_table(BASE)))
    assert result.rows == 3
    assert read_back(db, "rep") == normalise(BASE)
    newer = [(10, "ten", Decimal("10.00"), T0, b"x", True)]
    result = conn.write_batches(out("rep", "replace", run_id="r2"), reader_of(sink_table(newer)))
    assert result.rows == 1
    assert read_back(db, "rep") == normalise(newer)
    leftovers = sql(db, "SHOW TABLES LIKE 'rep\\_\\_pz%'")
    assert leftovers == []


def test_replace_into_qualified_table_with_many_batches(
    conn: MySQLConnector, db: Any, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mysql_sink, "CHUNK_ROWS", 7)
    rows = [
        (i, f"n{i}", Decimal(i) / 100, T0 + dt.timedelta(seconds=i), bytes([i % 256]), i % 2 == 0)
        for i in range(100)
    ]
    result = conn.write_batches(
        out("whatever", "replace", options={"table": f"{database}.`we.ird`"}),
        reader_of(sink_table(rows), max_chunksize=3),
    )
    assert result.rows == 100
    assert read_back(db, "we.ird") == normalise(rows)


def test_replace_empty_result_is_refused_unless_allowed(conn: MySQLConnector, db: Any) -> None:
    conn.write_batches(out("rep_empty", "replace"), reader_of(sink_table(BASE)))
    with pytest.raises(PzConnectorError) as info:
        conn.write_batches(out("rep_empty", "replace", run_id="r2"), reader_of(sink_table([])))
    assert info.value.code == "PZ0509"
    assert read_back(db, "rep_empty") == normalise(BASE)
    assert sql(db, "SHOW TABLES LIKE 'rep\\_empty\\_\\_pz%'") == []
    result = conn.write_batches(
        out("rep_empty", "replace", run_id="r3", allow_empty=True), reader_of(sink_table([]))
    )
    assert result.rows == 0
    assert read_back(db, "rep_empty") == []


def test_replace_failure_before_swap_leaves_old_table(
    conn: MySQLConnector, db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn.write_batches(out("rep_fail", "replace"), reader_of(sink_table(BASE)))
    monkeypatch.setenv("PZ_FAILPOINTS", "sink.before_swap")
    with pytest.raises(RuntimeError, match="failpoint"):
        conn.write_batches(out("rep_fail", "replace", run_id="r2"), reader_of(sink_table(BASE[:1])))
    assert read_back(db, "rep_fail") == normalise(BASE)
    assert sql(db, "SHOW TABLES LIKE 'rep\\_fail\\_\\_pz%'") == []


KILL_SCRIPT = """
import json, sys
from pathlib import Path
import pyarrow as pa
from pipelinez.connectors.mysql.connector import MySQLConnector
from pipelinez.connectors.sdk import ConnectorContext, OutputRequest
args = json.loads(sys.argv[1])
conn = MySQLConnector(ConnectorContext("my", Path("."), args["connection"]))
table = pa.table({"id": pa.array(range(1000), pa.int64()), "name": pa.array(["new"] * 1000)})
conn.write_batches(OutputRequest("rep_kill", {}, "replace", run_id=args["run_id"]),
                   pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=100)))
print("swapped")
"""


def test_replace_killed_between_temp_write_and_swap_keeps_old_table(
    conn: MySQLConnector, db: Any, database: str
) -> None:
    old = pa.table({"id": pa.array([1, 2], pa.int64()), "name": pa.array(["old1", "old2"])})
    conn.write_batches(out("rep_kill", "replace"), reader_of(old))
    env = {**os.environ, "PZ_FAILPOINTS": "sink.before_swap:kill"}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            KILL_SCRIPT,
            json.dumps({"connection": connection(database), "run_id": "killed-run"}),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 137, done.stderr
    assert "swapped" not in done.stdout
    assert sql(db, "SELECT id, name FROM rep_kill ORDER BY id") == [(1, "old1"), (2, "old2")]
    # the temp table of the killed attempt is left behind, complete; the next run's write sweeps it
    leftover = TableName(None, "rep_kill").work_table("tmp", "killed-run").table
    assert sql(db, f"SELECT COUNT(*) FROM `{leftover}`") == [(1000,)]
    env.pop("PZ_FAILPOINTS")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            KILL_SCRIPT,
            json.dumps({"connection": connection(database), "run_id": "next-run"}),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert sql(db, "SELECT COUNT(*), MIN(name) FROM rep_kill") == [(1000, "new")]
    assert sql(db, "SHOW TABLES LIKE 'rep\\_kill\\_\\_pz%'") == []


def test_merge_upserts_deletes_and_is_idempotent(conn: MySQLConnector, db: Any) -> None:
    conn.write_batches(out("mrg", "merge", keys=("id",), on_delete="deleted"), reader_of(sink_table(BASE)))
    assert read_merged(db, "mrg") == merged(BASE)
    assert columns_of(db, "mrg") == ["id", "name", "amount", "at", "blob"]  # the flag is not created
    assert sql(
        db,
        "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = DATABASE() "
        "AND TABLE_NAME = 'mrg' AND CONSTRAINT_NAME = 'PRIMARY'",
    ) == [("id",)]
    change = [
        (2, "two v2", Decimal("22.00"), T0, b"2", False),  # update
        (3, None, None, None, None, True),  # delete by flag
        (4, "four", Decimal("4.00"), None, b"", False),  # insert
        (99, "ghost", None, None, None, True),  # flagged but absent: nothing
        (5, "five", None, None, None, None),  # NULL flag: not deleted, inserted
    ]
    expected = merged([BASE[0], change[0], change[2], change[4]])
    for attempt in range(2):  # merge twice = merge once
        result = conn.write_batches(
            out("mrg", "merge", run_id=f"m{attempt}", keys=("id",), on_delete="deleted"),
            reader_of(sink_table(change)),
        )
        assert result.rows == 3  # the rows upserted; the two delete requests do not land
        assert read_merged(db, "mrg") == expected
        assert columns_of(db, "mrg") == ["id", "name", "amount", "at", "blob"]
    assert sql(db, "SHOW TABLES LIKE 'mrg\\_\\_pz%'") == []


def test_merge_string_keys_are_exact_and_case_sensitive(conn: MySQLConnector, db: Any) -> None:
    table = pa.table({"k": ["a", "A", "a ", "ü"], "v": [1, 2, 3, 4]})
    conn.write_batches(out("mrg_s", "merge", keys=("k",)), reader_of(table))
    conn.write_batches(
        out("mrg_s", "merge", run_id="x", keys=("k",)), reader_of(pa.table({"k": ["A"], "v": [20]}))
    )
    assert sorted(sql(db, "SELECT k, v FROM mrg_s")) == [("A", 20), ("a", 1), ("a ", 3), ("ü", 4)]


def test_merge_without_unique_key_deletes_and_inserts(conn: MySQLConnector, db: Any) -> None:
    sql(
        db,
        "CREATE TABLE mrg_nokey (id BIGINT, name LONGTEXT, amount DECIMAL(12,2), `at` DATETIME(6), "
        "`blob` LONGBLOB, deleted TINYINT(1), extra INT DEFAULT 7)",
    )
    sql(db, "INSERT INTO mrg_nokey (id, name) VALUES (1, 'old'), (1, 'old dup'), (5, 'five')")
    change = [(1, "one", Decimal("1.00"), T0, b"1", False), (5, None, None, None, None, True)]
    for attempt in range(2):
        conn.write_batches(
            out("mrg_nokey", "merge", run_id=f"n{attempt}", keys=("id",), on_delete="deleted"),
            reader_of(sink_table(change)),
        )
        # the target's own `deleted` column (an earlier version wrote the flag) is kept but not written
        assert read_back(db, "mrg_nokey") == [(*change[0][:5], None)]
    assert sql(db, "SELECT extra FROM mrg_nokey") == [(7,)]


def test_merge_leaves_an_existing_flag_column_alone(conn: MySQLConnector, db: Any) -> None:
    sql(
        db,
        "CREATE TABLE mrg_flag (id BIGINT PRIMARY KEY, name LONGTEXT, amount DECIMAL(12,2), "
        "`at` DATETIME(6), `blob` LONGBLOB, deleted TINYINT(1))",
    )
    sql(db, "INSERT INTO mrg_flag (id, name, deleted) VALUES (1, 'old', 1), (2, 'two', 0), (3, 'c', NULL)")
    change = [(1, "one", None, None, None, False), (2, None, None, None, None, True)]
    for attempt in range(2):  # merge twice = merge once
        conn.write_batches(
            out("mrg_flag", "merge", run_id=f"f{attempt}", keys=("id",), on_delete="DELETED"),
            reader_of(sink_table(change)),
        )
        assert read_back(db, "mrg_flag") == [
            (1, "one", None, None, None, 1),  # updated; its `deleted` is left as it was
            (3, "c", None, None, None, None),
        ]


def test_merge_refuses_the_flag_as_a_key(conn: MySQLConnector, db: Any) -> None:
    with pytest.raises(PzConnectorError) as info:
        conn.write_batches(
            out("mrg_flagkey", "merge", keys=("id", "deleted"), on_delete="deleted"),
            reader_of(sink_table(BASE)),
        )
    assert "cannot be a key" in info.value.message and info.value.code == "PZ0501"
    assert sql(db, "SHOW TABLES LIKE 'mrg\\_flagkey%'") == []


def test_merge_into_a_keyless_target_uses_an_indexed_temp_table(conn: MySQLConnector, db: Any) -> None:
    """Regression: DELETE … JOIN between two unindexed tables is quadratic (200k rows ran for 25+ minutes)."""
    sql(db, "CREATE TABLE mrg_big (id BIGINT, name LONGTEXT)")
    sql(db, "INSERT INTO mrg_big SELECT seq, 'old' FROM seq_1_to_30000")
    table = pa.table({"id": pa.array(range(15000, 45000), pa.int64()), "name": ["new"] * 30000})
    started = time.perf_counter()
    conn.write_batches(out("mrg_big", "merge", keys=("id",)), reader_of(table))
    assert time.perf_counter() - started < 20
    assert sql(db, "SELECT name, COUNT(*), COUNT(DISTINCT id) FROM mrg_big GROUP BY name ORDER BY name") == [
        ("new", 30000, 30000),
        ("old", 14999, 14999),
    ]


def test_merge_dml_is_one_transaction(conn: MySQLConnector, db: Any) -> None:
    conn.write_batches(out("mrg_tx", "merge", keys=("id",), on_delete="deleted"), reader_of(sink_table(BASE)))
    # row 1 is flagged (its DELETE runs first), row NULL cannot be inserted: everything rolls back
    bad = [(1, None, None, None, None, True), (None, "null key", None, None, None, False)]
    with pytest.raises(PzConnectorError) as info:
        conn.write_batches(
            out("mrg_tx", "merge", run_id="bad", keys=("id",), on_delete="deleted"),
            reader_of(sink_table(bad)),
        )
    assert "1048" in info.value.message and not info.value.is_transient
    assert read_merged(db, "mrg_tx") == merged(BASE)
    assert sql(db, "SHOW TABLES LIKE 'mrg\\_tx\\_\\_pz%'") == []


def test_append_adds_batches_and_counts_them(
    conn: MySQLConnector, db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mysql_sink, "CHUNK_ROWS", 2)
    result = conn.write_batches(out("app", "append"), reader_of(sink_table(BASE), max_chunksize=1))
    assert (result.rows, result.batches_committed) == (3, 2)
    result = conn.write_batches(out("app", "append", run_id="again"), reader_of(sink_table(BASE)))
    assert (result.rows, result.batches_committed) == (3, 1)  # a delivery batch holds whole Arrow batches
    assert read_back(db, "app") == normalise(BASE + BASE)


def test_append_failure_mid_way_reports_batches_committed(
    conn: MySQLConnector, db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mysql_sink, "CHUNK_ROWS", 10)
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])

    def batches() -> Iterator[pa.RecordBatch]:
        for start in (0, 10):
            yield pa.record_batch(
                [pa.array(range(start, start + 10), pa.int64()), pa.array(["x"] * 10)], schema=schema
            )
        raise OSError("staging read failed")

    with pytest.raises(PzConnectorError) as info:
        conn.write_batches(out("app_fail", "append"), pa.RecordBatchReader.from_batches(schema, batches()))
    assert info.value.batches_committed == 2  # type: ignore[attr-defined]
    assert info.value.rows_committed == 20  # type: ignore[attr-defined]
    assert "2 batch(es), 20 row(s) committed" in info.value.message
    assert sql(db, "SELECT COUNT(*) FROM app_fail") == [(20,)]

    # a server-side refusal in the third batch: the first two stay committed, the third rolls back
    sql(db, "CREATE TABLE app_fail2 (id BIGINT, name VARCHAR(3))")
    good = [
        pa.record_batch([pa.array(range(s, s + 10), pa.int64()), pa.array(["ok"] * 10)], schema=schema)
        for s in (0, 10)
    ]
    bad = pa.record_batch([pa.array(range(20, 30), pa.int64()), pa.array(["too long"] * 10)], schema=schema)
    with pytest.raises(PzConnectorError) as info:
        conn.write_batches(
            out("app_fail2", "append"), pa.RecordBatchReader.from_batches(schema, [*good, bad])
        )
    assert info.value.batches_committed == 2  # type: ignore[attr-defined]
    assert info.value.rows_committed == 20  # type: ignore[attr-defined]
    assert "1406" in info.value.message or "truncated" in info.value.message.lower()
    assert sql(db, "SELECT COUNT(*) FROM app_fail2") == [(20,)]


def test_sink_types_round_trip_through_duckdb(conn: MySQLConnector, db: Any) -> None:
    duck = duckdb.connect()
    duck.execute("SET TimeZone = 'UTC'")
    duck.execute("""CREATE TABLE r AS SELECT * FROM (VALUES
        (1, true, -5::TINYINT, 200::UTINYINT, 70000::UINTEGER, 18446744073709551615::UBIGINT, 1.5::FLOAT,
         0.1::DOUBLE, 12345.678::DECIMAL(18,3), DATE '2024-02-29', TIMESTAMP '2024-02-29 01:02:03.456789',
         TIMESTAMPTZ '2024-02-29 01:02:03.5+02', TIME '23:59:59.999999', 'ü😀\t\\N', '\\x00\\xFF'::BLOB,
         [1, 2], {'a': 'b'}),
        (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '', ''::BLOB, NULL, NULL)
    ) AS t(id, b, ti, ut, ui, ub, f, d, dec, da, ts, tz, tm, s, bl, li, st)""")
    result = conn.write_batches(
        out("types_out", "replace"), duck.execute("SELECT * FROM r").to_arrow_reader()
    )
    assert result.rows == 2
    got = sql(db, "SELECT * FROM types_out ORDER BY id")
    assert got[0] == (
        1,
        1,
        -5,
        200,
        70000,
        18446744073709551615,
        1.5,
        0.1,
        Decimal("12345.678"),
        dt.date(2024, 2, 29),
        dt.datetime(2024, 2, 29, 1, 2, 3, 456789),
        dt.datetime(2024, 2, 28, 23, 2, 3, 500000),
        dt.timedelta(hours=23, minutes=59, seconds=59, microseconds=999999),
        "ü😀\t\\N",
        b"\x00\xff",
        "[1, 2]",
        '{"a": "b"}',
    )
    assert got[1] == (2, *([None] * 12), "", b"", None, None)
    columns = dict(
        sql(
            db,
            "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE "
            "TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'types_out'",
        )
    )
    assert columns["b"] == "tinyint(1)" and columns["ub"] == "bigint(20) unsigned"
    assert (
        columns["dec"] == "decimal(18,3)" and columns["ts"] == "datetime(6)" and columns["li"] == "longtext"
    )


def test_sink_refuses_values_the_server_would_change(conn: MySQLConnector, db: Any) -> None:
    table = pa.table({"id": pa.array([1], pa.int64()), "x": pa.array([float("nan")])})
    with pytest.raises(PzConnectorError, match=r"refused|changed"):
        conn.write_batches(out("nan_out", "replace"), reader_of(table))
    assert sql(db, "SHOW TABLES LIKE 'nan\\_out%'") == []


# -- tier 5 -------------------------------------------------------------------------------------------
def test_check_connection_probe_and_missing_table(conn: MySQLConnector, db: Any) -> None:
    conn.check_connection()
    conn.probe_output(out("probe_me", "replace"))
    assert sql(db, "SHOW TABLES LIKE 'probe\\_me%'") == []
    with pytest.raises(PzConnectorError) as info:
        conn.fetch_schema(DatasetRequest("x", {"table": "no_such_table"}, None))
    assert info.value.code == "PZ0602" and not info.value.is_transient


def test_errors_are_classified_and_never_show_the_password(database: str) -> None:
    secret = "s3cr%t/p@ss"
    denied = MySQLConnector(ConnectorContext("my", Path("."), connection(database, password=secret)))
    with pytest.raises(PzConnectorError) as info:
        denied.check_connection()
    assert not info.value.is_transient and "1045" in info.value.message
    assert secret not in info.value.message and "s3cr" not in info.value.message
    with pytest.raises(PzConnectorError) as info:
        list(denied.extract_batches(DatasetRequest("t", {"table": "x"}, None), Partition(0, "all")))
    assert not info.value.is_transient and "s3cr" not in info.value.message
    refused = MySQLConnector(
        ConnectorContext("my", Path("."), {**connection(database, password=secret), "port": 1})
    )
    with pytest.raises(PzConnectorError) as info:
        refused.check_connection()
    assert info.value.is_transient and "2003" in info.value.message and "s3cr" not in info.value.message
    with pytest.raises(PzConnectorError) as info:
        list(refused.extract_batches(DatasetRequest("t", {"table": "x"}, None), Partition(0, "all")))
    assert info.value.is_transient


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (pymysql.err.OperationalError(2002, "Can't connect through socket"), True),
        (pymysql.err.OperationalError(2003, "Can't connect to MySQL server"), True),
        (pymysql.err.OperationalError(2006, "MySQL server has gone away"), True),
        (pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query"), True),
        (pymysql.err.OperationalError(1205, "Lock wait timeout exceeded"), True),
        (pymysql.err.OperationalError(1213, "Deadlock found when trying to get lock"), True),
        (pymysql.err.OperationalError(1040, "Too many connections"), True),
        (pymysql.err.OperationalError(1045, "Access denied"), False),
        (pymysql.err.ProgrammingError(1146, "Table 'x' doesn't exist"), False),
        (pymysql.err.IntegrityError(1062, "Duplicate entry"), False),
        (pymysql.err.DataError(1406, "Data too long"), False),
        (RuntimeError("MySqlError { ERROR 1213 (40001): Deadlock found when trying to get lock }"), True),
        (RuntimeError("MySqlError { ERROR 1146 (42S02): Table 'x.y' doesn't exist }"), False),
        (
            RuntimeError(
                "timed out waiting for connection: MySqlError { ERROR 1045 (28000): Access denied }"
            ),
            False,
        ),
        (
            RuntimeError(
                "DriverError { Could not connect to address `h:1': Connection refused (os error 111) }"
            ),
            True,
        ),
        (RuntimeError("IoError { Connection reset by peer (os error 104) }"), True),
        (RuntimeError("something else entirely"), False),
        (ConnectionResetError("reset"), True),
    ],
)
def test_error_classification(exc: BaseException, transient: bool) -> None:
    assert is_transient(exc) is transient


# -- static -------------------------------------------------------------------------------------------
def test_validate_cross_field_rules() -> None:
    issues = MySQLConnector.validate(
        {"dsn": "postgres://x", "host": "h"},
        {
            "a": {},
            "b": {"table": "t", "query": "SELECT 1"},
            "c": {"query": "DELETE FROM t"},
            "d": {"table": "t"},
        },
        {},
    )
    messages = [(i.block, i.name, i.message) for i in issues]
    assert ("connection", None, "connection has both dsn and host; give one or the other") in messages
    assert any("mysql://" in m for _, _, m in messages)
    assert ("dataset", "a", "dataset needs exactly one of table or query") in messages
    assert ("dataset", "b", "dataset has both table and query; keep one") in messages
    assert any(b == "dataset" and n == "c" for b, n, _ in messages)
    assert not any(n == "d" for _, n, _ in messages)
    assert MySQLConnector.validate({}, {}, {})[0].message == "connection needs host (or a dsn)"
    assert MySQLConnector.validate({"dsn": "{{ env('DSN') }}"}, {}, {}) == []


def test_manifest_is_honest() -> None:
    manifest = MySQLConnector.manifest()
    caps = manifest.capabilities
    assert (manifest.name, manifest.version) == ("mysql", "0.1.0")
    assert caps.source_tiers == ("universal",) and caps.sink_tiers == ("universal",)
    assert caps.strategies == ("replace", "merge", "append")
    assert caps.atomic_replace and caps.partitions and not caps.checkpointed_delivery
    assert "DDL auto-commits" in manifest.description
    assert manifest.connection_schema["additionalProperties"] is False
    assert set(manifest.dataset_schema["properties"]) >= {
        "table",
        "query",
        "columns",
        "partitions",
        "sync",
        "retry",
        "checks",
    }
    assert set(manifest.output_schema["properties"]) >= {
        "table",
        "strategy",
        "keys",
        "on_delete",
        "duplicates",
        "allow_empty",
        "retry",
    }


def test_settings_dsn_and_names() -> None:
    s = Settings.from_connection({"dsn": "mysql://u%40x:p%2Fw@db.example:3307/shop?prefer_socket=false"})
    assert (s.host, s.port, s.database, s.user, s.password) == ("db.example", 3307, "shop", "u@x", "p/w")
    assert "p%2Fw" in s.connectorx_url() and s.redact(s.connectorx_url()).count("***") == 1
    assert split_qualified("`my.db`.`t``x`") == ["my.db", "t`x"]
    assert TableName.parse('db."t.1"').sql() == "`db`.`t.1`"
    long = TableName("db", "x" * 64).sibling("__pz_tmp_20261010T020011408Z_7d1e")
    assert len(long.table) == 64 and long.table.endswith("__pz_tmp_20261010T020011408Z_7d1e")
    # work tables of two long names that share their first 60 characters differ, and fit 64
    first, second = TableName("db", "y" * 60 + "_one"), TableName("db", "y" * 60 + "_two")
    works = {
        t.work_table(k, "20261010T020011408Z-7d1e").table for t in (first, second) for k in ("tmp", "old")
    }
    assert len(works) == 4 and all(len(w) <= 64 for w in works)
    assert first.is_work_table(first.work_table("tmp", "any-run").table)
    assert not second.is_work_table(first.work_table("tmp", "any-run").table)
