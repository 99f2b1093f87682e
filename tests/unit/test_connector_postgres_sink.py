"""The postgres connector's sink side against the live PostgreSQL on 127.0.0.1:5432 (trust auth).

Each module run creates its own database `pz_test_<random>` and drops it afterwards. Written tables are read
back row for row: through psycopg for spot values, and through the connector's own (separately tested)
native source into DuckDB, where they are compared with the staged result by EXCEPT ALL both ways.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pyarrow as pa
import pytest

from pipelinez.connectors.postgres.connector import PostgresConnector
from pipelinez.connectors.postgres.sink import AppendFailed
from pipelinez.connectors.sdk import ConnectorContext, DatasetRequest, OutputRequest, Partition, WriteResult
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.engine.run.failures import classify as engine_classify
from tests.conftest import fresh_pg_database

pytestmark = pytest.mark.postgres

HOST, PORT, USER = "127.0.0.1", 5432, "postgres"
TIERS = ["native", "universal"]


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    with fresh_pg_database("CREATE SCHEMA wh") as name:
        yield name


@pytest.fixture
def pg(database: str) -> Iterator[psycopg.Connection[Any]]:
    con = psycopg.connect(host=HOST, port=PORT, user=USER, dbname=database, autocommit=True)
    yield con
    con.close()


def connection(database: str) -> dict[str, Any]:
    return {"host": HOST, "port": PORT, "user": USER, "database": database, "password": "sink-secret-pw"}


@pytest.fixture
def conn(database: str) -> Iterator[PostgresConnector]:
    connector = PostgresConnector(ConnectorContext("wh", Path("."), connection(database)))
    yield connector
    connector.close()


@pytest.fixture
def table() -> str:
    return f"t_{secrets.token_hex(3)}"


def staging(sql: str = "") -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    if sql:
        con.execute(sql)
    return con


RESULT_SQL = """
CREATE TABLE res AS
SELECT i::BIGINT AS id,
       (i * 1.25)::DECIMAL(12,2) AS amount,
       CASE WHEN i % 7 = 0 THEN NULL ELSE 'nâme ' || i || ' 日本 🚀' END AS name,
       i % 2 = 0 AS even,
       DATE '2024-01-01' + i::INTEGER AS day,
       TIMESTAMP '2024-01-01 00:00:00.123456' + INTERVAL (i) MINUTE AS ts,
       TIMESTAMPTZ '2024-01-01 00:00:00+00' + INTERVAL (i) HOUR AS tstz,
       TIME '23:59:59.999999' AS t,
       INTERVAL (i) DAY + INTERVAL 1 MONTH AS iv,
       md5(i::VARCHAR)::UUID AS u,
       ('{"i": ' || i || ', "s": "ü"}')::JSON AS j,
       [i, NULL, i + 1]::INTEGER[] AS li,
       ['a', NULL, 'ß']::VARCHAR[] AS ls,
       ('\\x' || lpad(to_hex(i % 256), 2, '0'))::BLOB AS bl,
       (i * 0.5)::DOUBLE AS dbl,
       (i % 100)::SMALLINT AS small
FROM range(1, 301) AS r(i)
"""


def reader(
    con: duckdb.DuckDBPyConnection, sql: str, lossless: bool = True, rows: int = 64
) -> pa.RecordBatchReader:
    cur = con.cursor()
    cur.execute(f"SET arrow_lossless_conversion = {str(lossless).lower()}")
    return cur.execute(sql).to_arrow_reader(rows)


def write(
    conn: PostgresConnector,
    tier: str,
    con: duckdb.DuckDBPyConnection,
    output: OutputRequest,
    source: str = "res",
    lossless: bool = True,
) -> WriteResult:
    if tier == "native":
        return conn.write_native(con, output, f'"{source}"')
    return conn.write_batches(output, reader(con, f'SELECT * FROM "{source}"', lossless))


def read_back(conn: PostgresConnector, con: duckdb.DuckDBPyConnection, table: str, into: str) -> None:
    con.execute(f'DROP TABLE IF EXISTS "{into}"')
    conn.extract_native(con, DatasetRequest("back", {"table": table}, None), Partition(0, "all"), f'"{into}"')


def same_rows(con: duckdb.DuckDBPyConnection, a: str, b: str) -> None:
    for x, y in ((a, b), (b, a)):
        left = con.execute(
            f'SELECT count(*) FROM (SELECT * FROM "{x}" EXCEPT ALL SELECT * FROM "{y}")'
        ).fetchone()
        assert left == (0,), f"rows of {x} missing from {y}"
    names = con.sql(f'SELECT * FROM "{a}"').columns
    cols = ", ".join(f'CAST("{c}" AS VARCHAR)' for c in names)
    order = names[0]
    assert (
        con.execute(f'SELECT {cols} FROM "{a}" ORDER BY "{order}"').fetchall()
        == con.execute(f'SELECT {cols} FROM "{b}" ORDER BY "{order}"').fetchall()
    )


def pg_types(pg: psycopg.Connection[Any], qualified: str) -> dict[str, str]:
    rows = pg.execute(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = %s::regclass "
        "AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
        [qualified],
    ).fetchall()
    return {str(r[0]): str(r[1]) for r in rows}


def work_tables(pg: psycopg.Connection[Any]) -> list[str]:
    return [str(r[0]) for r in pg.execute("SELECT relname FROM pg_class WHERE relname LIKE '%\\_\\_pz\\_%'")]


def out(table: str, strategy: str = "replace", **kw: Any) -> OutputRequest:
    return OutputRequest("o", {"table": f"wh.{table}"}, strategy, run_id="20261010T020011408Z-7d1e", **kw)


# -- replace --------------------------------------------------------------------------------------
@pytest.mark.parametrize("tier", TIERS)
def test_replace_row_for_row(
    conn: PostgresConnector, pg: psycopg.Connection[Any], table: str, tier: str
) -> None:
    pg.execute(f"CREATE TABLE wh.{table} (old_col int)")
    pg.execute(f"INSERT INTO wh.{table} VALUES (1)")
    con = staging(RESULT_SQL)
    result = write(conn, tier, con, out(table))
    assert result == WriteResult(rows=300)
    assert pg_types(pg, f"wh.{table}") == {
        "id": "bigint",
        "amount": "numeric(12,2)",
        "name": "text",
        "even": "boolean",
        "day": "date",
        "ts": "timestamp without time zone",
        "tstz": "timestamp with time zone",
        "t": "time without time zone",
        "iv": "interval",
        "u": "uuid",
        "j": "json",
        "li": "integer[]",
        "ls": "text[]",
        "bl": "bytea",
        "dbl": "double precision",
        "small": "smallint",
    }
    read_back(conn, con, f"wh.{table}", "back")
    same_rows(con, "res", "back")
    row = pg.execute(
        f"SELECT name, amount::text, u::text, j::text, li::text FROM wh.{table} WHERE id = 8"
    ).fetchone()
    uuid8 = str(con.execute("SELECT md5('8')::UUID").fetchone()[0])  # type: ignore[index]
    assert row == ("nâme 8 日本 🚀", "10.00", uuid8, '{"i": 8, "s": "ü"}', "{8,NULL,9}")
    assert work_tables(pg) == []


def test_replace_infinity_and_wide_types_native(
    conn: PostgresConnector, pg: psycopg.Connection[Any], table: str
) -> None:
    con = staging(
        "CREATE TABLE res AS SELECT * FROM (VALUES (1, 'infinity'::DATE, '-infinity'::TIMESTAMP, "
        "170141183460469231731687303715884105::HUGEINT, 18446744073709551615::UBIGINT, "
        "'12:00:00+05:30'::TIMETZ, "
        "{'a': 1, 'b': [1, 2]}, 'x'::ENUM('x', 'y'))) v(id, d, ts, h, ub, ttz, st, e)"
    )
    conn.write_native(con, out(table), '"res"')
    row = pg.execute(
        f"SELECT d::text, ts::text, h::text, ub::text, ttz::text, st::text, e FROM wh.{table}"
    ).fetchone()
    assert row == (
        "infinity",
        "-infinity",
        "170141183460469231731687303715884105",
        "18446744073709551615",
        "12:00:00+05:30",
        '{"a":1,"b":[1,2]}',
        "x",
    )


def test_replace_infinity_universal(conn: PostgresConnector, pg: psycopg.Connection[Any], table: str) -> None:
    con = staging("CREATE TABLE res AS SELECT 1 AS id, 'infinity'::DATE AS d, '-infinity'::DATE AS d2")
    conn.write_batches(out(table), reader(con, "SELECT * FROM res"))
    assert pg.execute(f"SELECT d::text, d2::text FROM wh.{table}").fetchone() == ("infinity", "-infinity")
    con = staging("CREATE TABLE res AS SELECT 1 AS id, 'infinity'::TIMESTAMP AS ts")
    with pytest.raises(PzConnectorError, match="infinity"):
        conn.write_batches(out(table), reader(con, "SELECT * FROM res"))
    assert pg.execute(f"SELECT d::text FROM wh.{table}").fetchone() == ("infinity",)


def test_replace_keeps_grants_comment(
    conn: PostgresConnector, pg: psycopg.Connection[Any], table: str
) -> None:
    role = f"pz_reader_{secrets.token_hex(3)}"
    pg.execute(f"CREATE ROLE {role}")
    try:
        pg.execute(f"CREATE TABLE wh.{table} (id bigint, name text, secret text)")
        pg.execute(f"GRANT SELECT ON wh.{table} TO {role} WITH GRANT OPTION")
        pg.execute(f"GRANT UPDATE (name) ON wh.{table} TO {role}")
        pg.execute(f"GRANT INSERT ON wh.{table} TO PUBLIC")
        pg.execute(f"COMMENT ON TABLE wh.{table} IS 'the orders, ü'")
        for tier in TIERS:
            con = staging("CREATE TABLE res AS SELECT range AS id, 'n' || range AS name FROM range(5)")
            write(conn, tier, con, out(table))
            checks = pg.execute(
                "SELECT has_table_privilege(%(r)s, %(t)s, 'SELECT WITH GRANT OPTION'), "
                "has_column_privilege(%(r)s, %(t)s, 'name', 'UPDATE'), "
                "has_column_privilege(%(r)s, %(t)s, 'id', 'UPDATE'), "
                "has_table_privilege(%(r)s, %(t)s, 'DELETE'), "
                "has_table_privilege('public', %(t)s, 'INSERT'), "
                "obj_description(%(t)s::regclass, 'pg_class')",
                {"r": role, "t": f"wh.{table}"},
            ).fetchone()
            assert checks == (True, True, False, False, True, "the orders, ü"), tier
            assert pg.execute(f"SELECT count(*) FROM wh.{table}").fetchone() == (5,)
    finally:
        pg.execute(f"DROP TABLE IF EXISTS wh.{table}")
        pg.execute(f"DROP ROLE {role}")


@pytest.mark.parametrize("tier", TIERS)
def test_replace_refuses_empty_unless_allowed(
    conn: PostgresConnector, pg: psycopg.Connection[Any], table: str, tier: str
) -> None:
    pg.execute(f"CREATE TABLE wh.{table} AS SELECT 1 AS id")
    con = staging("CREATE TABLE res AS SELECT 1::BIGINT AS id, 'x' AS name WHERE false")
    with pytest.raises(PzConnectorError) as exc:
        write(conn, tier, con, out(table))
    assert exc.value.code == "PZ0509" and "allow_empty" in exc.value.message
    assert pg.execute(f"SELECT count(*) FROM wh.{table}").fetchone() == (1,)
    assert write(conn, tier, con, out(table, allow_empty=True)) == WriteResult(rows=0)
    assert pg.execute(f"SELECT count(*) FROM wh.{table}").fetchone() == (0,)
    assert pg_types(pg, f"wh.{table}") == {"id": "bigint", "name": "text"}


KILL_SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import duckdb
    from pipelinez.connectors.postgres.connector import PostgresConnector
    from pipelinez.connectors.sdk import ConnectorContext, OutputRequest
    database, table, tier = sys.argv[1:4]
    con = duckdb.connect()
    con.execute("CREATE TABLE res AS SELECT range AS id, 'new' AS v FROM range(1000)")
    conn = PostgresConnector(ConnectorContext("wh", Path("."), {"host": "127.0.0.1", "port": 5432,
                                              "user": "postgres", "database": database}))
    output = OutputRequest("o", {"table": "wh." + table}, "replace", run_id="20261010T020011408Z-dead")
    if tier == "native":
        conn.write_native(con, output, '"res"')
    else:
        conn.write_batches(output, con.execute("SELECT * FROM res").to_arrow_reader(100))
    print("swapped")
    """
)


@pytest.mark.parametrize("tier", TIERS)
def test_replace_killed_before_swap_leaves_old_table(
    conn: PostgresConnector, pg: psycopg.Connection[Any], database: str, table: str, tier: str
) -> None:
    pg.execute(f"CREATE TABLE wh.{table} AS SELECT g AS id, 'old' AS v FROM generate_series(1, 10) g")
    env = {**os.environ, "PZ_FAILPOINTS": "sink.before_swap:kill"}
    proc = subprocess.run(
        [sys.executable, "-c", KILL_SCRIPT, database, table, tier],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 137, proc.stderr
    assert "swapped" not in proc.stdout
    assert pg.execute(f"SELECT count(*), min(v), max(v) FROM wh.{table}").fetchone() == (10, "old", "old")
    assert pg_types(pg, f"wh.{table}") == {"id": "integer", "v": "text"}
    leftover = work_tables(pg)
    assert len(leftover) == 1 and "__pz_tmp_20261010T020011408Z-dead_" in leftover[0]
    assert pg.execute(f'SELECT count(*) FROM wh."{leftover[0]}"').fetchone() == (
        1000,
    )  # written, not swapped
    # the next replace of that table cleans up what the killed writer left
    con = staging("CREATE TABLE res AS SELECT range AS id, 'new' AS v FROM range(3)")
    write(conn, tier, con, out(table))
    assert pg.execute(f"SELECT count(*), min(v) FROM wh.{table}").fetchone() == (3, "new")
    assert work_tables(pg) == []


@pytest.mark.parametrize("tier", TIERS)
def test_replace_failure_before_swap_cleans_up(
    conn: PostgresConnector,
    pg: psycopg.Connection[Any],
    table: str,
    tier: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pg.execute(f"CREATE TABLE wh.{table} AS SELECT 1 AS id")
    monkeypatch.setenv("PZ_FAILPOINTS", "other,sink.before_swap")
    con = staging("CREATE TABLE res AS SELECT range AS id FROM range(10)")
    with pytest.raises(RuntimeError, match=r"failpoint sink\.before_swap"):
        write(conn, tier, con, out(table))
    assert pg.execute(f"SELECT count(*) FROM wh.{table}").fetchone() == (1,)
    assert work_tables(pg) == []


def test_replace_with_dependent_view_fails_cleanly(
    conn: PostgresConnector, pg: psycopg.Connection[Any], table: str
) -> None:
    pg.execute(f"CREATE TABLE wh.{table} AS SELECT 1 AS id")
    pg.execute(f"CREATE VIEW wh.v_{table} AS SELECT * FROM wh.{table}")
    con = staging("CREATE TABLE res AS SELECT range AS id FROM range(10)")
    with pytest.raises(PzConnectorError) as exc:
        conn.write_native(con, out(table), '"res"')
    assert not exc.value.is_transient and f"v_{table}" in exc.value.message
    assert pg.execute(f"SELECT count(*) FROM wh.{table}").fetchone() == (1,)
    assert work_tables(pg) == []


def test_replace_concurrent_writer_is_transient(conn: PostgresConnector, database: str, table: str) -> None:
    holder = psycopg.connect(host=HOST, port=PORT, user=USER, dbname=database, autocommit=True)
    holder.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", [0x507A, f"wh.{table}"])
    try:
        con = staging("CREATE TABLE res AS SELECT 1 AS id")
        with pytest.raises(PzConnectorError) as exc:
            conn.write_native(con, out(table), '"res"')
        assert exc.value.is_transient and exc.value.retry_after == 5.0
    finally:
        holder.close()


# -- merge ----------------------------------------------------------------------------------------
MERGE_TARGET = (
    "CREATE TABLE wh.{t} (id bigint {pk}, name text, amount numeric(12,2), note text DEFAULT 'kept')"
)


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("unique", [True, False], ids=["on_conflict", "merge_stmt"])
def test_merge_upserts_deletes_and_is_idempotent(
    conn: PostgresConnector, pg: psycopg.Connection[Any], table: str, tier: str, unique: bool
) -> None:
    pg.execute(MERGE_TARGET.format(t=table, pk="PRIMARY KEY" if unique else ""))
    pg.execute(
        f"INSERT INTO wh.{table} (id, name, amount) VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3), (4, 'd', 4)"
    )
    con = staging(
        "CREATE TABLE res AS SELECT * FROM (VALUES (2, 'B ü', 20.5, false), (3, 'c', 3, true), "
        "(5, 'e', 5, NULL), "
        "(9, 'gone', 9, true)) v(id, name, amount, is_deleted)"
    )
    output = out(table, "merge", keys=("id",), on_delete="is_deleted")
    expected = [
        (1, "a", "1.00", "kept"),
        (2, "B ü", "20.50", "kept"),
        (4, "d", "4.00", "kept"),
        (5, "e", "5.00", "kept"),
    ]  # columns the result lacks keep their default
    query = f"SELECT id, name, amount::text, note FROM wh.{table} ORDER BY id"
    assert write(conn, tier, con, output) == WriteResult(rows=2)  # upserted; delete requests do not land
    first = pg.execute(query).fetchall()
    assert first == expected
    write(conn, tier, con, output)
    assert pg.execute(query).fetchall() == first  # merge twice = merge once
    assert work_tables(pg) == []


@pytest.mark.parametrize("tier", TIERS)
def test_merge_creates_missing_target_row_for_row(
    conn: PostgresConnector, pg: psycopg.Connection[Any], table: str, tier: str
) -> None:
    con = staging(RESULT_SQL)
    con.execute("ALTER TABLE res ADD COLUMN del BOOLEAN DEFAULT false")
    output = out(table, "merge", keys=("id", "day"), on_delete="del")
    write(conn, tier, con, output)
    assert "del" not in pg_types(pg, f"wh.{table}")  # the on_delete column is a control column
    read_back(conn, con, f"wh.{table}", "back")
    con.execute("CREATE TABLE expected AS SELECT * EXCLUDE (del) FROM res")
    same_rows(con, "expected", "back")
    write(conn, tier, con, output)
    read_back(conn, con, f"wh.{table}", "back2")
    same_rows(con, "back", "back2")


@pytest.mark.parametrize("tier", TIERS)
def test_merge_refuses_null_and_duplicate_keys(
    conn: PostgresConnector, pg: psycopg.Connection[Any], table: str, tier: str
) -> None:
    pg.execute(MERGE_TARGET.format(t=table, pk=""))
    pg.execute(f"INSERT INTO wh.{table} (id, name) VALUES (1, 'a')")
    for rows, needle in (
        ("(1, 'x'), (NULL, 'y')", "NULL merge key"),
        ("(2, 'x'), (2, 'y')", "more than once"),
    ):
        con = staging(f"CREATE TABLE res AS SELECT * FROM (VALUES {rows}) v(id, name)")
        with pytest.raises(PzConnectorError, match=needle) as exc:
            write(conn, tier, con, out(table, "merge", keys=("id",)))
        assert not exc.value.is_transient
        assert pg.execute(f"SELECT id, name FROM wh.{table}").fetchall() == [(1, "a")]
    assert work_tables(pg) == []


def test_merge_universal_casts_to_existing_types(
    conn: PostgresConnector, pg: psycopg.Connection[Any], table: str
) -> None:
    pg.execute(f"CREATE TABLE wh.{table} (id integer PRIMARY KEY, u uuid, j jsonb, amount numeric(8,1))")
    con = staging(
        "CREATE TABLE res AS SELECT 1 AS id, uuid() AS u, '{\"a\": 1}'::JSON AS j, 2.25::DOUBLE AS amount"
    )
    conn.write_batches(out(table, "merge", keys=("id",)), reader(con, "SELECT * FROM res", lossless=False))
    row = pg.execute(f"SELECT j::text, amount::text FROM wh.{table}").fetchone()
    assert row == ('{"a": 1}', "2.3")  # PostgreSQL's cast rounds half away from zero
    assert pg_types(pg, f"wh.{table}")["u"] == "uuid"


def test_merge_unknown_column_and_key(
    conn: PostgresConnector, pg: psycopg.Connection[Any], table: str
) -> None:
    pg.execute(f"CREATE TABLE wh.{table} (id int)")
    con = staging("CREATE TABLE res AS SELECT 1 AS id, 2 AS extra")
    with pytest.raises(PzConnectorError, match="no column"):
        conn.write_native(con, out(table, "merge", keys=("id",)), '"res"')
    with pytest.raises(PzConnectorError, match="not columns of the result"):
        conn.write_native(con, out(table, "merge", keys=("nope",)), '"res"')


# -- append ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("tier", TIERS)
def test_append_batches_row_for_row(
    conn: PostgresConnector, pg: psycopg.Connection[Any], table: str, tier: str
) -> None:
    conn.append_batch_rows = 64
    con = staging(RESULT_SQL)
    result = write(conn, tier, con, out(table, "append"))
    assert result == WriteResult(rows=300, batches_committed=5)  # 300 rows / 64 per batch
    read_back(conn, con, f"wh.{table}", "back")
    same_rows(con, "res", "back")
    write(conn, tier, con, out(table, "append"))
    assert pg.execute(f"SELECT count(*), count(DISTINCT id) FROM wh.{table}").fetchone() == (600, 300)


@pytest.mark.parametrize("tier", TIERS)
def test_append_failure_records_batches_committed(
    conn: PostgresConnector, pg: psycopg.Connection[Any], table: str, tier: str
) -> None:
    pg.execute(f"CREATE TABLE wh.{table} (id bigint CHECK (id < 250), v text)")
    conn.append_batch_rows = 100
    con = staging("CREATE TABLE res AS SELECT range AS id, 'v' || range AS v FROM range(400)")
    with pytest.raises(AppendFailed) as exc:
        write_rows(conn, tier, con, out(table, "append"), rows=100)
    err = exc.value
    assert isinstance(err, PzConnectorError) and err.code == "PZ0501" and not err.is_transient
    assert err.batches_committed == 2 and err.rows_committed == 200
    assert "2 batch(es), 200 row(s) committed" in err.message and "check constraint" in err.message
    assert pg.execute(f"SELECT count(*), max(id) FROM wh.{table}").fetchone() == (200, 199)
    failure = engine_classify(err, "PZ0501", "sink 'wh' output 'o'")
    assert failure.batches_committed == 2


def write_rows(
    conn: PostgresConnector, tier: str, con: duckdb.DuckDBPyConnection, output: OutputRequest, rows: int
) -> WriteResult:
    if tier == "native":
        return conn.write_native(con, output, '"res"')
    return conn.write_batches(output, reader(con, "SELECT * FROM res", rows=rows))


def test_append_universal_into_existing_types_and_empty(
    conn: PostgresConnector, pg: psycopg.Connection[Any], table: str
) -> None:
    pg.execute(f"CREATE TABLE wh.{table} (id integer, u uuid, extra text DEFAULT 'd')")
    con = staging("CREATE TABLE res AS SELECT range::BIGINT AS id, uuid() AS u FROM range(10)")
    result = conn.write_batches(out(table, "append"), reader(con, "SELECT * FROM res", lossless=False))
    assert result == WriteResult(rows=10, batches_committed=1)
    assert pg.execute(f"SELECT count(*), min(extra) FROM wh.{table}").fetchone() == (10, "d")
    empty = conn.write_batches(out(table, "append"), reader(con, "SELECT * FROM res WHERE false"))
    assert empty == WriteResult(rows=0, batches_committed=0)
    assert work_tables(pg) == []


def test_append_native_from_a_view(conn: PostgresConnector, pg: psycopg.Connection[Any], table: str) -> None:
    conn.append_batch_rows = 3
    con = staging("CREATE VIEW res AS SELECT range AS id FROM range(10)")
    assert conn.write_native(con, out(table, "append"), '"res"') == WriteResult(rows=10, batches_committed=1)


def test_unwritable_universal_type(conn: PostgresConnector, table: str) -> None:
    con = staging("CREATE TABLE res AS SELECT {'a': 1} AS st")
    with pytest.raises(PzConnectorError, match="cannot write Arrow type"):
        conn.write_batches(out(table), reader(con, "SELECT * FROM res"))


def test_default_table_name_and_bad_name(conn: PostgresConnector, pg: psycopg.Connection[Any]) -> None:
    con = staging("CREATE TABLE res AS SELECT 1 AS id")
    name = f"out_{secrets.token_hex(3)}"
    conn.write_native(con, OutputRequest(name, {}, "replace"), '"res"')
    assert pg.execute(f"SELECT count(*) FROM public.{name}").fetchone() == (1,)
    with pytest.raises(PzConnectorError) as exc:
        conn.write_native(con, OutputRequest("o", {"table": "a.b.c"}, "replace"), '"res"')
    assert exc.value.code == "PZ0303"


def test_sink_errors_never_hold_the_password(database: str, table: str) -> None:
    block = {**connection(database), "port": 1}
    broken = PostgresConnector(ConnectorContext("wh", Path("."), block))
    con = staging("CREATE TABLE res AS SELECT 1 AS id")
    for call in (
        lambda: broken.write_native(con, out(table), '"res"'),
        lambda: broken.write_batches(out(table), reader(con, "SELECT * FROM res")),
    ):
        with pytest.raises(PzConnectorError) as exc:
            call()
        assert exc.value.is_transient and "sink-secret-pw" not in exc.value.message


# -- through the engine: pz validate --connect / pz run with postgres on both sides ------------------
def _project(root: Path, database: str, table: str, force_universal: bool) -> Path:
    from tests.conftest import write_project

    connection_yaml = f"""
        host: 127.0.0.1
        port: 5432
        database: {database}
        user: postgres
        password: "{{{{ env('PG_PASSWORD') }}}}"
    """
    return write_project(
        root,
        {
            "project.yml": f"""
                name: pgshop
                env:
                  PG_PASSWORD: {{ required: true, secret: true }}
                engine: {{ threads: 2, force_universal: {str(force_universal).lower()} }}
            """,
            "sources/pg.yml": "connector: postgres\nconnection:"
            + textwrap.indent(textwrap.dedent(connection_yaml), "  ")
            + textwrap.dedent(f"""
                datasets:
                  orders:
                    table: wh.{table}_src
                    partitions: {{ column: id, count: 3 }}
                """),
            "sinks/wh.yml": "connector: postgres\nconnection:"
            + textwrap.indent(textwrap.dedent(connection_yaml), "  ")
            + textwrap.dedent(f"""
                outputs:
                  totals:
                    table: wh.{table}_totals
                  latest:
                    table: wh.{table}_latest
                    strategy: merge
                    keys: [id]
                  log:
                    table: wh.{table}_log
                    strategy: append
                """),
            "pipelines/totals.sql": """
                INSERT INTO {{ sink('wh', 'totals') }}
                SELECT status, count(*) AS n, sum(amount) AS total
                FROM {{ source('pg', 'orders') }} GROUP BY status
            """,
            "pipelines/latest.sql": """
                INSERT INTO {{ sink('wh', 'latest') }}
                INSERT INTO {{ sink('wh', 'log') }}
                SELECT id, status, amount, updated_at FROM {{ source('pg', 'orders') }}
            """,
        },
    )


@pytest.mark.parametrize("tier", TIERS)
def test_pz_run_postgres_to_postgres(
    pg: psycopg.Connection[Any], database: str, table: str, tier: str, tmp_path: Path
) -> None:
    from tests.conftest import pz

    pg.execute(
        f"CREATE TABLE wh.{table}_src AS SELECT g AS id, (ARRAY['open','shipped'])[1 + g % 2] AS status, "
        f"(g * 1.5)::numeric(10,2) AS amount, timestamptz '2024-01-01 00:00:00+00' + g * interval '1 hour' "
        "AS updated_at FROM generate_series(1, 1000) g"
    )
    project = _project(tmp_path / "proj", database, table, tier == "universal")
    env = {"PG_PASSWORD": "pz-e2e-secret"}
    validate = pz(project, "validate", "--connect", env=env)
    assert validate.exit_code == 0, validate.output
    for attempt in (1, 2):
        result = pz(project, "run", env=env)
        assert result.exit_code == 0, result.output
        node = result.node("src_pg__orders")
        assert node["tier"] == tier and node["rows"] == 1000 and len(node["partitions"]) == 3
        assert pg.execute(f"SELECT count(*) FROM wh.{table}_latest").fetchone() == (1000,)
        assert pg.execute(f"SELECT count(*) FROM wh.{table}_log").fetchone() == (1000 * attempt,)
        assert result.node("wh.log")["batches_committed"] == 1
    totals = pg.execute(f"SELECT status, n, total::text FROM wh.{table}_totals ORDER BY status").fetchall()
    assert totals == [("open", 500, "375750.00"), ("shipped", 500, "375000.00")]
    for path in project.joinpath(".pz").rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl", ".log", ".txt"):
            assert "pz-e2e-secret" not in path.read_text(errors="replace"), path


@pytest.mark.parametrize("strategy", ["replace", "append"])
def test_a_streamed_pipeline_is_computed_once_by_the_native_write(
    conn: PostgresConnector, pg: psycopg.Connection[Any], table: str, strategy: str
) -> None:
    """A pipeline streamed into the write is a view in staging: each read of it computes its query again.
    The rows are counted by the INSERT, not by a count(*) first (which computed a join twice)."""
    from tests.unit.test_sink_reads_once import Recording, full_reads

    con = staging("CREATE TABLE t AS SELECT range AS id FROM range(5000); CREATE VIEW v AS SELECT id FROM t")
    recording = Recording(con)
    result = conn.write_native(recording, out(table, strategy), "v")  # type: ignore[arg-type]
    assert result.rows == 5000
    assert len(full_reads(recording.log)) == 1, recording.log
    assert pg.execute(f"SELECT count(*), sum(id) FROM wh.{table}").fetchone() == (5000, 5000 * 4999 // 2)


def test_an_empty_native_append_of_a_stored_result_writes_nothing(
    conn: PostgresConnector, pg: psycopg.Connection[Any], table: str
) -> None:
    con = staging("CREATE TABLE res AS SELECT range AS id FROM range(0)")
    assert conn.write_native(con, out(table, "append"), '"res"').rows == 0
    assert pg.execute(f"SELECT count(*) FROM wh.{table}").fetchone() == (0,)
