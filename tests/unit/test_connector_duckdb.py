"""The duckdb connector against real DuckDB files and a real staging database (no mocks)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from pipelinez.connectors.duckdb.connector import DuckDBConnector
from pipelinez.connectors.duckdb.names import TableName, parse_parts
from pipelinez.connectors.registry import load_class, manifest_of
from pipelinez.connectors.sdk import (
    NATIVE,
    UNIVERSAL,
    ConnectorContext,
    DatasetRequest,
    OutputRequest,
    Partition,
)
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident

ALL = Partition(0, "all")

# -- helpers ---------------------------------------------------------------------------------------------


def connector(project: Path, path: str = "warehouse.duckdb") -> DuckDBConnector:
    return DuckDBConnector(ConnectorContext("wh", project, {"path": path}))


def make_source(project: Path, path: str = "src.duckdb") -> Path:
    file = project / path
    con = duckdb.connect(str(file))
    con.execute('''
        CREATE SCHEMA "we""ird";
        CREATE TABLE "we""ird"."we""ird name" AS SELECT 1 AS "col ""q""", 'x' AS "it's";
        CREATE SCHEMA analytics;
        CREATE TABLE analytics.orders AS
        SELECT range::BIGINT AS id,
               CASE WHEN range % 4 = 0 THEN NULL ELSE 'Zoë "' || range || E'\\n' END AS name,
               (range * 1.25)::DECIMAL(18,3) AS amount,
               DATE '2024-01-01' + range::INT AS day,
               TIMESTAMP '2024-01-01 00:00:00' + INTERVAL (range) MINUTE AS at,
               range::HUGEINT * 1000000000000 AS big,
               uuid() AS u,
               [range, range + 1] AS list,
               {'k': range} AS struct
        FROM range(20);
        CREATE TABLE main.plain AS SELECT 1 AS a;
    ''')
    con.close()
    return file


def load(
    conn: DuckDBConnector, con: duckdb.DuckDBPyConnection, ds: DatasetRequest, target: str, tier: str
) -> None:
    if tier == NATIVE:
        cur = con.cursor()
        cur.execute("BEGIN TRANSACTION")
        conn.extract_native(cur, ds, ALL, quote_ident(target))
        cur.execute("COMMIT")
        cur.close()
    else:
        con.register("arrow_table", pa.Table.from_batches(list(conn.extract_batches(ds, ALL))))
        con.execute(f"CREATE TABLE {quote_ident(target)} AS SELECT * FROM arrow_table")
        con.unregister("arrow_table")


def types(con: duckdb.DuckDBPyConnection, relation: str) -> list[tuple[str, str]]:
    return [(str(r[0]), str(r[1])) for r in con.execute(f"DESCRIBE {relation}").fetchall()]


def rows(con: duckdb.DuckDBPyConnection, relation: str) -> list[tuple[Any, ...]]:
    return con.execute(f"SELECT * FROM {relation} ORDER BY ALL").fetchall()


def attached(con: duckdb.DuckDBPyConnection) -> list[str]:
    return sorted(str(r[0]) for r in con.execute("SELECT database_name FROM duckdb_databases()").fetchall())


def read_target(file: Path, relation: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(file), read_only=True)
    try:
        return rows(con, relation)
    finally:
        con.close()


def tables_of(file: Path) -> list[tuple[str, str]]:
    con = duckdb.connect(str(file), read_only=True)
    try:
        return sorted(
            (str(r[0]), str(r[1]))
            for r in con.execute("SELECT schema_name, table_name FROM duckdb_tables()").fetchall()
        )
    finally:
        con.close()


# -- source ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dataset",
    [
        {"table": "analytics.orders"},
        {"query": "SELECT o.*, p.a FROM analytics.orders AS o JOIN plain AS p ON true -- trailing comment"},
        {"query": "select * from analytics.orders where id >= 0;  "},
    ],
    ids=["table", "query", "query-semicolon"],
)
def test_source_tiers_are_identical(tmp_path: Path, dataset: dict[str, Any]) -> None:
    make_source(tmp_path)
    conn, con = connector(tmp_path, "src.duckdb"), duckdb.connect(str(tmp_path / "staging.duckdb"))
    ds = DatasetRequest("orders", dataset, None)
    load(conn, con, ds, "native", NATIVE)
    load(conn, con, ds, "universal", UNIVERSAL)
    assert types(con, "native") == types(con, "universal")
    assert rows(con, "native") == rows(con, "universal")
    assert ("big", "HUGEINT") in types(con, "native") and ("u", "UUID") in types(con, "native")
    assert len(rows(con, "native")) == 20
    assert attached(con) == ["staging", "system", "temp"]  # detached again
    assert con.execute("SELECT current_database(), current_schema()").fetchone() == ("staging", "main")
    assert conn.fetch_schema(ds) == types(con, "native")
    assert conn.static_schema(ds) == types(con, "native")


def test_source_contract_and_odd_names(tmp_path: Path) -> None:
    make_source(tmp_path)
    conn, con = connector(tmp_path, "src.duckdb"), duckdb.connect()
    ds = DatasetRequest("w", {"table": '"we""ird"."we""ird name"'}, {'col "q"': "varchar", "it's": "varchar"})
    load(conn, con, ds, 'tar"get', NATIVE)
    load(conn, con, ds, "u", UNIVERSAL)
    assert types(con, '"tar""get"') == [('col "q"', "VARCHAR"), ("it's", "VARCHAR")]
    assert rows(con, '"tar""get"') == rows(con, "u") == [("1", "x")]
    missing = DatasetRequest("w", {"table": "analytics.orders"}, {"nope": "int"})
    with pytest.raises(PzConnectorError) as err:
        load(conn, con, missing, "t", NATIVE)
    assert "nope" in err.value.message and "LINE" not in err.value.message and err.value.code == "PZ0505"


def test_native_extraction_appends_into_an_existing_target_and_rolls_back(tmp_path: Path) -> None:
    make_source(tmp_path)
    conn, con = connector(tmp_path, "src.duckdb"), duckdb.connect()
    ds = DatasetRequest("p", {"table": "plain"}, None)
    load(conn, con, ds, "t", NATIVE)
    load(conn, con, ds, "t", NATIVE)  # a second partition lands in the same table
    assert rows(con, "t") == [(1,), (1,)]
    cur = con.cursor()
    cur.execute("BEGIN TRANSACTION")
    conn.extract_native(cur, DatasetRequest("q", {"query": "SELECT 5 AS a"}, None), ALL, '"t"')
    cur.execute("ROLLBACK")
    assert rows(con, "t") == [(1,), (1,)]
    assert attached(con) == ["memory", "system", "temp"]


def test_missing_source_file_and_table(tmp_path: Path) -> None:
    con = duckdb.connect()
    with pytest.raises(PzConnectorError) as err:
        load(
            connector(tmp_path, "absent.duckdb"),
            con,
            DatasetRequest("p", {"table": "plain"}, None),
            "t",
            NATIVE,
        )
    assert "does not exist" in err.value.message
    assert not (tmp_path / "absent.duckdb").exists()
    make_source(tmp_path)
    conn = connector(tmp_path, "src.duckdb")
    with pytest.raises(PzConnectorError) as err:
        conn.fetch_schema(DatasetRequest("p", {"table": "analytics.nope"}, None))
    assert err.value.code == "PZ0602" and "nope" in err.value.message
    assert conn.static_schema(DatasetRequest("p", {"table": "analytics.nope"}, None)) is None
    assert (
        connector(tmp_path, "absent.duckdb").static_schema(DatasetRequest("p", {"table": "x"}, None)) is None
    )


# -- sink ------------------------------------------------------------------------------------------------


def staging_with(tmp_path: Path, name: str, sql: str) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(tmp_path / "staging.duckdb"))
    con.execute(f"CREATE OR REPLACE TABLE {quote_ident(name)} AS {sql}")
    return con


def write(
    conn: DuckDBConnector, con: duckdb.DuckDBPyConnection, tier: str, output: OutputRequest, source: str
) -> Any:
    if tier == NATIVE:
        return conn.write_native(con, output, quote_ident(source))
    reader = con.execute(f"SELECT * FROM {quote_ident(source)}").to_arrow_reader(3)
    return conn.write_batches(output, reader)


TIERS = pytest.mark.parametrize("tier", [NATIVE, UNIVERSAL])


@TIERS
def test_replace_creates_schema_and_replaces(tmp_path: Path, tier: str) -> None:
    conn = connector(tmp_path, "out/wh.duckdb")
    con = staging_with(tmp_path, "r", "SELECT range AS id, 'v' || range AS v FROM range(5)")
    out = OutputRequest("orders", {"table": "analytics.orders"}, "replace", run_id="r1")
    assert write(conn, con, tier, out, "r").rows == 5
    con.execute("CREATE OR REPLACE TABLE r AS SELECT range AS id, 'w' AS v, true AS extra FROM range(2)")
    assert write(conn, con, tier, out, "r").rows == 2
    file = tmp_path / "out" / "wh.duckdb"
    assert read_target(file, "analytics.orders") == [(0, "w", True), (1, "w", True)]
    assert tables_of(file) == [("analytics", "orders")]
    assert attached(con) == ["staging", "system", "temp"]


@TIERS
def test_failed_replace_leaves_the_old_table(
    tmp_path: Path, tier: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = connector(tmp_path)
    con = staging_with(tmp_path, "r", "SELECT range AS id FROM range(5)")
    out = OutputRequest("o", {}, "replace", run_id="r1")
    write(conn, con, tier, out, "r")
    before = read_target(tmp_path / "warehouse.duckdb", "o")
    con.execute("CREATE OR REPLACE TABLE r AS SELECT range + 100 AS id FROM range(9)")
    monkeypatch.setenv("PZ_FAILPOINTS", "sink.before_swap")
    with pytest.raises(RuntimeError, match=r"failpoint sink\.before_swap"):
        write(conn, con, tier, OutputRequest("o", {}, "replace", run_id="r2"), "r")
    assert read_target(tmp_path / "warehouse.duckdb", "o") == before
    assert tables_of(tmp_path / "warehouse.duckdb") == [("main", "o")]  # no temp table left
    assert attached(con) == ["staging", "system", "temp"]


_KILL_SCRIPT = """
import sys, duckdb, pathlib
from pipelinez.connectors.duckdb.connector import DuckDBConnector
from pipelinez.connectors.sdk import ConnectorContext, OutputRequest
project = pathlib.Path(sys.argv[1])
con = duckdb.connect(str(project / "staging.duckdb"))
con.execute(f"CREATE OR REPLACE TABLE r AS SELECT range + {int(sys.argv[2])} AS id FROM range(50000)")
conn = DuckDBConnector(ConnectorContext("wh", project, {"path": "warehouse.duckdb"}))
out = OutputRequest("o", {"table": "analytics.o"}, "replace", run_id=sys.argv[2])
if sys.argv[3] == "native":
    conn.write_native(con, out, '"r"')
else:
    conn.write_batches(out, con.execute("SELECT * FROM r").to_arrow_reader(1000))
"""


@TIERS
def test_killed_before_swap_leaves_the_old_table(tmp_path: Path, tier: str) -> None:
    script = textwrap.dedent(_KILL_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "PZ_FAILPOINTS"}
    subprocess.run([sys.executable, "-c", script, str(tmp_path), "0", tier], check=True, env=env)
    file = tmp_path / "warehouse.duckdb"
    before = read_target(file, "analytics.o")
    killed = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path), "7", tier],
        env={**env, "PZ_FAILPOINTS": "sink.before_swap:kill"},
    )
    assert killed.returncode == 137
    assert read_target(file, "analytics.o") == before
    assert tables_of(file) == [("analytics", "o")]
    subprocess.run([sys.executable, "-c", script, str(tmp_path), "9", tier], check=True, env=env)
    assert read_target(file, "analytics.o")[0] == (9,)


@TIERS
def test_empty_replace_is_refused(tmp_path: Path, tier: str) -> None:
    conn = connector(tmp_path)
    con = staging_with(tmp_path, "r", "SELECT 1 AS id")
    write(conn, con, tier, OutputRequest("o", {}, "replace", run_id="r"), "r")
    con.execute("CREATE OR REPLACE TABLE r AS SELECT 1 AS id WHERE false")
    with pytest.raises(PzConnectorError) as err:
        write(conn, con, tier, OutputRequest("o", {}, "replace", run_id="r"), "r")
    assert err.value.code == "PZ0509" and "allow_empty" in err.value.message
    assert read_target(tmp_path / "warehouse.duckdb", "o") == [(1,)]
    write(conn, con, tier, OutputRequest("o", {}, "replace", allow_empty=True, run_id="r"), "r")
    assert read_target(tmp_path / "warehouse.duckdb", "o") == []


@TIERS
def test_empty_replace_of_a_missing_file_creates_nothing(tmp_path: Path, tier: str) -> None:
    con = staging_with(tmp_path, "r", "SELECT 1 AS id WHERE false")
    with pytest.raises(PzConnectorError):
        write(connector(tmp_path, "new.duckdb"), con, tier, OutputRequest("o", {}, "replace"), "r")
    assert not (tmp_path / "new.duckdb").exists()


MERGE_V1 = """SELECT * FROM (VALUES (1, 'a', false, 10), (2, 'b', false, 20), (NULL, 'null key', false, 0))
              AS v(id, val, deleted, n)"""
MERGE_V2 = """SELECT * FROM (VALUES (2, 'B', false, 21), (3, 'c', NULL, 30), (1, 'gone', true, 0),
              (NULL, 'null key 2', false, 1), (99, 'never there', true, 0)) AS v(id, val, deleted, n)"""


@TIERS
def test_merge_upserts_deletes_and_is_idempotent(tmp_path: Path, tier: str) -> None:
    conn = connector(tmp_path)
    file = tmp_path / "warehouse.duckdb"
    out = OutputRequest("m", {"table": "s.merged"}, "merge", keys=("id",), on_delete="deleted", run_id="r")
    con = staging_with(tmp_path, "r", MERGE_V1)
    assert write(conn, con, tier, out, "r").rows == 3
    # the on_delete column is a control column: never written, not even when the sink creates the table
    assert [n for n, _ in conn.fetch_schema(DatasetRequest("d", {"table": "s.merged"}, None))] == [
        "id",
        "val",
        "n",
    ]
    con.execute(f"CREATE OR REPLACE TABLE r AS {MERGE_V2}")
    write(conn, con, tier, out, "r")
    once = read_target(file, "s.merged")
    # key 1 flagged: deleted; 99 flagged and absent: nothing; 3 has a NULL flag: not deleted, inserted
    assert once == [(2, "B", 21), (3, "c", 30), (None, "null key 2", 1)]
    write(conn, con, tier, out, "r")  # merging the same result again changes nothing
    assert read_target(file, "s.merged") == once
    assert [n for n, _ in conn.fetch_schema(DatasetRequest("d", {"table": "s.merged"}, None))] == [
        "id",
        "val",
        "n",
    ]


@TIERS
def test_merge_leaves_an_existing_flag_column_alone(tmp_path: Path, tier: str) -> None:
    """A target made by an earlier version holds the on_delete column: it is kept, and never written."""
    file = tmp_path / "warehouse.duckdb"
    target = duckdb.connect(str(file))
    target.execute("CREATE TABLE t (id INTEGER, val VARCHAR, deleted BOOLEAN)")
    target.execute("INSERT INTO t VALUES (1, 'a', NULL), (2, 'b', false), (3, 'c', NULL)")
    target.close()
    conn = connector(tmp_path)
    out = OutputRequest("t", {}, "merge", keys=("id",), on_delete="DELETED", run_id="r")
    con = staging_with(
        tmp_path,
        "r",
        "SELECT * FROM (VALUES (1, 'A', false), (2, 'gone', true), (4, 'd', NULL)) AS v(id, val, deleted)",
    )
    for _ in range(2):  # merge twice = merge once
        write(conn, con, tier, out, "r")
        assert read_target(file, "t") == [(1, "A", None), (3, "c", None), (4, "d", None)]


@TIERS
def test_merge_refuses_the_flag_as_a_key(tmp_path: Path, tier: str) -> None:
    conn = connector(tmp_path)
    con = staging_with(tmp_path, "r", "SELECT 1 AS id, false AS d")
    with pytest.raises(PzConnectorError) as err:
        write(conn, con, tier, OutputRequest("m", {}, "merge", keys=("id", "d"), on_delete="d"), "r")
    assert "cannot be a key" in err.value.message and err.value.code == "PZ0501"


def test_merge_matches_columns_by_name_and_adds_new_ones(tmp_path: Path) -> None:
    file = tmp_path / "warehouse.duckdb"
    target = duckdb.connect(str(file))
    target.execute("CREATE TABLE t (note VARCHAR, val VARCHAR, id INTEGER)")
    target.execute("INSERT INTO t VALUES ('kept', 'old', 1), ('other', 'x', 5)")
    target.close()
    conn = connector(tmp_path)
    con = staging_with(
        tmp_path, "r", "SELECT 'new' AS val, 1 AS id, 42 AS added UNION ALL SELECT 'n2', 2, 43"
    )
    conn.write_native(con, OutputRequest("t", {}, "merge", keys=("id",)), '"r"')
    assert read_target(file, "t") == [("kept", "new", 1, 42), ("other", "x", 5, None), (None, "n2", 2, 43)]
    con.execute("CREATE OR REPLACE TABLE r AS SELECT 7 AS id")  # keys only: inserts, never updates
    conn.write_native(con, OutputRequest("t", {}, "merge", keys=("id",)), '"r"')
    assert (None, None, 7, None) in read_target(file, "t")


@TIERS
def test_merge_refuses_duplicate_and_missing_keys(tmp_path: Path, tier: str) -> None:
    conn = connector(tmp_path)
    con = staging_with(tmp_path, "r", "SELECT * FROM (VALUES (1, 'a'), (1, 'b')) AS v(id, val)")
    with pytest.raises(PzConnectorError) as err:
        write(conn, con, tier, OutputRequest("m", {}, "merge", keys=("id",)), "r")
    assert "one row per key" in err.value.message
    with pytest.raises(PzConnectorError) as err:
        write(conn, con, tier, OutputRequest("m", {}, "merge", keys=("nope",)), "r")
    assert "'nope'" in err.value.message
    with pytest.raises(PzConnectorError) as err:
        write(conn, con, tier, OutputRequest("m", {}, "merge"), "r")
    assert err.value.code == "PZ0305"
    assert not (tmp_path / "warehouse.duckdb").exists() or tables_of(tmp_path / "warehouse.duckdb") == []


@TIERS
def test_append_appends_by_name(tmp_path: Path, tier: str) -> None:
    conn = connector(tmp_path)
    con = staging_with(tmp_path, "r", "SELECT 1 AS id, 'a' AS v")
    out = OutputRequest("ev", {"table": "raw.events"}, "append", run_id="r")
    first = write(conn, con, tier, out, "r")
    assert (first.rows, first.batches_committed) == (1, 1)
    con.execute("CREATE OR REPLACE TABLE r AS SELECT 'b' AS v, 2 AS id")
    write(conn, con, tier, out, "r")
    write(conn, con, tier, out, "r")
    assert read_target(tmp_path / "warehouse.duckdb", "raw.events") == [(1, "a"), (2, "b"), (2, "b")]


def test_odd_identifiers_and_hostile_values(tmp_path: Path) -> None:
    conn = connector(tmp_path, 'we\'ird "dir"/w h.duckdb')
    con = staging_with(
        tmp_path,
        "r'); DROP TABLE r; --",
        'SELECT 1 AS "k ""1""", \'\'\'); DROP TABLE x; --\' AS "v\'al", false AS "del;--"',
    )
    source = "r'); DROP TABLE r; --"
    table = '"sch""ema"."we""ird name; DROP TABLE x"'
    for strategy, keys, on_delete in [
        ("replace", (), None),
        ("merge", ('k "1"',), "del;--"),
        ("append", (), None),
    ]:
        out = OutputRequest("o", {"table": table}, strategy, keys=keys, on_delete=on_delete, run_id="r'\";--")
        conn.write_native(con, out, quote_ident(source))
    file = tmp_path / 'we\'ird "dir"' / "w h.duckdb"
    assert tables_of(file) == [('sch"ema', 'we"ird name; DROP TABLE x')]
    assert read_target(file, table) == [(1, "'); DROP TABLE x; --", False)] * 2
    back = connector(tmp_path, 'we\'ird "dir"/w h.duckdb')
    ds = DatasetRequest("d", {"table": table}, None)
    assert [n for n, _ in back.fetch_schema(ds)] == ['k "1"', "v'al", "del;--"]


def test_concurrent_writes_to_one_file(tmp_path: Path) -> None:
    con = staging_with(tmp_path, "r", "SELECT range AS id FROM range(1000)")
    conn = connector(tmp_path)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            strategy = ["replace", "append", "merge"][i % 3]
            out = OutputRequest(
                f"o{i}", {}, strategy, keys=("id",) if strategy == "merge" else (), run_id="r"
            )
            if i % 2:
                conn.write_native(con, out, '"r"')
            else:
                conn.write_batches(out, con.cursor().execute('SELECT * FROM "r"').to_arrow_reader(100))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(tables_of(tmp_path / "warehouse.duckdb")) == 8


def test_file_locked_by_another_process(tmp_path: Path) -> None:
    file = tmp_path / "warehouse.duckdb"
    duckdb.connect(str(file)).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('ready', flush=True);"
            " sys.stdin.readline()",
            str(file),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        con = staging_with(tmp_path, "r", "SELECT 1 AS id")
        conn = connector(tmp_path)
        for attempt in (
            lambda: conn.write_native(con, OutputRequest("o", {}, "replace"), '"r"'),
            lambda: conn.probe_output(OutputRequest("o", {}, "replace")),
            lambda: conn.check_connection(),
        ):
            with pytest.raises(PzConnectorError) as err:
                attempt()
            assert "another process holds the database file open" in err.value.message
            assert f"PID {holder.pid}" in err.value.message
        assert err.value.code == "PZ0601"
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=30)


def test_probe_output(tmp_path: Path) -> None:
    conn = connector(tmp_path, "sub/new.duckdb")
    conn.probe_output(OutputRequest("o", {"table": "s.t"}, "replace"))
    assert not (tmp_path / "sub").exists()  # probing never creates the file
    con = staging_with(tmp_path, "r", "SELECT 1 AS id")
    conn.write_native(con, OutputRequest("o", {}, "replace"), '"r"')
    conn.probe_output(OutputRequest("o", {"table": "s.t"}, "replace"))
    assert tables_of(tmp_path / "sub" / "new.duckdb") == [("main", "o")]  # the probe rolled back
    conn.check_connection()


def test_errors_name_the_output_and_the_cause(tmp_path: Path) -> None:
    file = tmp_path / "warehouse.duckdb"
    target = duckdb.connect(str(file))
    target.execute("CREATE TABLE t (id INTEGER NOT NULL)")
    target.close()
    con = staging_with(tmp_path, "r", "SELECT NULL::INTEGER AS id")
    with pytest.raises(PzConnectorError) as err:
        connector(tmp_path).write_native(con, OutputRequest("t", {}, "append"), '"r"')
    assert err.value.message.startswith("Constraint Error")  # the engine puts the node's name in front
    assert "NOT NULL" in err.value.message and "LINE" not in err.value.message
    assert err.value.code == "PZ0501" and not err.value.is_transient


# -- static ----------------------------------------------------------------------------------------------


def test_validate() -> None:
    issues = DuckDBConnector.validate(
        {"path": "w.duckdb"},
        {
            "both": {"table": "a", "query": "select 1"},
            "neither": {"columns": {}},
            "ok": {"table": "s.t"},
            "bad": {"table": 'we"ird'},
            "deep": {"table": "a.b.c"},
            "tmpl": {"table": "{{ var('t') }}"},
        },
        {"o": {"table": '"unclosed'}, "fine": {"table": '"we""ird"."x y"'}},
    )
    assert sorted((i.block, i.name) for i in issues) == [
        ("dataset", "bad"),
        ("dataset", "both"),
        ("dataset", "deep"),
        ("dataset", "neither"),
        ("output", "o"),
    ]


def test_table_names() -> None:
    assert parse_parts('"we""ird"."x.y"') == ['we"ird', "x.y"]
    assert TableName.parse("orders") == TableName("main", "orders")
    assert TableName.parse("an.orders").sql("cat") == '"cat"."an"."orders"'
    for bad in ['we"ird', '"open', "a..b", "", 'a."b"c', "a.b.c"]:
        with pytest.raises(ValueError):
            TableName.parse(bad)


def test_manifest() -> None:
    m = manifest_of("duckdb")
    assert load_class("duckdb") is DuckDBConnector
    caps = m.capabilities
    assert (
        caps.strategies == ("replace", "merge", "append", "view")
        and caps.atomic_replace
        and caps.atomic_append  # strategies.write: BEGIN … COMMIT around the append, on both tiers
        and caps.transactional_merge
    )
    assert caps.source_tiers == (NATIVE, UNIVERSAL) and caps.sink_tiers == (NATIVE, UNIVERSAL)
    import jsonschema

    for schema in (m.connection_schema, m.dataset_schema, m.output_schema):
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["additionalProperties"] is False
    jsonschema.validate(
        {"table": "t", "strategy": "merge", "keys": ["id"], "on_delete": {"column": "d"}}, m.output_schema
    )
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"path": "x"}, m.output_schema)


def test_summary_keeps_the_cause_only() -> None:
    from pipelinez.connectors.sdk_sql import summary

    raw = 'Binder Error: Referenced column "x" not found\nCandidate bindings: "y"\n\nLINE 1: SELECT x\n  ^'
    assert summary(raw) == 'Binder Error: Referenced column "x" not found\nCandidate bindings: "y"'
    raw = "Invalid Input Error: Error when sniffing file\nIt was not possible\nThe search space used was:\nx"
    assert summary(raw) == "Invalid Input Error: Error when sniffing file\nIt was not possible"
    assert (
        summary("Conversion Error: bad\n\nColumn n is being converted\n  file = a.csv")
        == "Conversion Error: bad"
    )


def _stream(con: duckdb.DuckDBPyConnection, sql: str, fail_after: int | None = None) -> pa.RecordBatchReader:
    """`sql`'s rows in batches of 7 (many INSERT groups); the stream breaks after `fail_after` batches."""
    reader = con.execute(sql).to_arrow_reader(7)

    def batches() -> Iterator[pa.RecordBatch]:
        for i, batch in enumerate(reader):
            if fail_after is not None and i == fail_after:
                raise OSError("the stream broke")
            yield batch

    return pa.RecordBatchReader.from_batches(reader.schema, batches())


@pytest.mark.parametrize("strategy", ["replace", "append", "merge"])
def test_a_long_stream_lands_whole_and_a_broken_one_not_at_all(tmp_path: Path, strategy: str) -> None:
    """The universal tier writes a stream in several INSERT statements (bounded memory): the target gets
    every row once, in order, and a stream that breaks after some statements leaves the target as it was."""
    conn = connector(tmp_path)
    con = duckdb.connect()
    first = "SELECT range AS id, 'row ' || range AS v FROM range(1000)"
    keys = ("id",) if strategy == "merge" else ()
    out = OutputRequest("o", {}, strategy, keys=keys, run_id="r1")
    assert conn.write_batches(out, _stream(con, first)).rows == 1000
    before = read_target(tmp_path / "warehouse.duckdb", "o")
    assert before == [(i, f"row {i}") for i in range(1000)]
    if strategy != "merge":  # the rows keep the stream's order
        with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as check:
            assert [r[0] for r in check.execute("SELECT id FROM o").fetchall()] == list(range(1000))
    again = "SELECT range + 500 AS id, 'new ' || range AS v FROM range(1000)"
    with pytest.raises(PzConnectorError) as err:
        conn.write_batches(
            OutputRequest("o", {}, strategy, keys=keys, run_id="r2"), _stream(con, again, fail_after=60)
        )
    assert "the stream broke" in err.value.message
    assert read_target(tmp_path / "warehouse.duckdb", "o") == before
    assert tables_of(tmp_path / "warehouse.duckdb") == [("main", "o")]
