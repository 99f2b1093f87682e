"""Partitioned database reads, end to end against the real PostgreSQL and MariaDB: partitions run
max_concurrency at a time (proved on the server: each partition's query counts its running peers in
pg_stat_activity / the process list), each worker reads all its partitions through one connection /
ATTACH (proved by counting the TCP connections a loopback proxy accepted), a connection lost mid-partition
fails that partition only (the worker reconnects for its next one) and `pz retry` finishes the load."""

from __future__ import annotations

import re
import secrets
import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pymysql
import pytest

from tests.conftest import PG_HOST, PG_PORT, PG_USER, PzResult, fresh_pg_database, pz, write_project
from tests.faults.tcp_proxy import Fault, FaultProxy

PEERS = 3  # max_concurrency of the sources below
COPY = "INSERT INTO {{ sink('wh', 'copy') }} SELECT * FROM {{ source('%s', 't') }}\n"
BARRIER_DATASET = (
    f"{{ query: 'SELECT id, pz_peers({PEERS}) AS peers FROM t', columns: {{ id: int, peers: int }}, "
    f"partitions: {{ column: id, count: {2 * PEERS} }} }}"
)

# A server-side witness of concurrency: each call waits (up to 30 s) until `n` partition reads of this
# database run at once, stays one more second so that the others see it too, and returns the most it saw
# running at once (itself included). Only inside a COPY (a partition's read, both tiers): the MIN/MAX the
# partition bounds come from evaluates it too, and must not wait.
PG_BARRIER = """
CREATE FUNCTION pz_peers(n int) RETURNS int LANGUAGE plpgsql VOLATILE AS $$
DECLARE seen int := 0; most int := 0; held int := 0;
BEGIN
    IF current_query() NOT ILIKE 'copy%' THEN RETURN 0; END IF;
    FOR i IN 1..600 LOOP
        PERFORM pg_stat_clear_snapshot();
        SELECT count(*) INTO seen FROM pg_stat_activity
        WHERE datname = current_database() AND state = 'active' AND query ILIKE 'copy%pz_peers(%';
        most := greatest(most, seen);
        IF most >= n THEN held := held + 1; END IF;
        EXIT WHEN held > 20;
        PERFORM pg_sleep(0.05);
    END LOOP;
    RETURN most;
END $$;
"""


def _pg_project(root: Path, port: int, db: str, dataset: str, universal: bool, engine: str = "") -> Path:
    return write_project(
        root,
        {
            "project.yml": f"name: parts\nengine: {{ force_universal: {str(universal).lower()}{engine} }}\n",
            "sources/pg.yml": f"""
                connector: postgres
                connection: {{ host: {PG_HOST}, port: {port}, user: {PG_USER}, database: {db} }}
                max_concurrency: {PEERS}
                datasets:
                  t: {dataset}
            """,
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
            "pipelines/copy.sql": COPY % "pg",
        },
    )


def _wh(project: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(project / "out" / "wh.duckdb"), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _last_run(project: Path) -> Path:
    return sorted((project / ".pz" / "runs").iterdir())[-1]


def _node(result: PzResult, name: str) -> dict[str, Any]:
    return result.node(name)


TIERS = [pytest.param(False, id="native"), pytest.param(True, id="universal")]


# -- concurrency, witnessed by the server ------------------------------------------------------------------
@pytest.mark.postgres
@pytest.mark.parametrize("universal", TIERS)
def test_postgres_partitions_run_max_concurrency_at_a_time(project_dir: Path, universal: bool) -> None:
    setup = f"{PG_BARRIER}\nCREATE TABLE t AS SELECT i AS id FROM generate_series(1, {2 * PEERS}) i;"
    with fresh_pg_database(setup) as db:
        _pg_project(project_dir, PG_PORT, db, BARRIER_DATASET, universal)
        result = pz(project_dir, "run")
        assert result.exit_code == 0, result.output
        assert len(_node(result, "src_pg__t")["partitions"]) == 2 * PEERS
        # every partition's read saw exactly max_concurrency reads running at once (itself included):
        # never more, and each wave of partitions ran together
        assert _wh(project_dir, "SELECT id, peers FROM copy ORDER BY id") == [
            (i, PEERS) for i in range(1, 2 * PEERS + 1)
        ]


# -- max_concurrency counts every read against the instance once -------------------------------------------
# The witness of an instance's concurrency: each partition read samples, for up to 2 s, how many partition
# reads of this database run at once, stops early once it saw more than `n`, holds one more second so that the
# others see it too, and returns the most it saw (itself included).
PG_PEAK = """
CREATE FUNCTION pz_peak(n int) RETURNS int LANGUAGE plpgsql VOLATILE AS $$
DECLARE seen int := 0; most int := 0;
BEGIN
    IF current_query() NOT ILIKE 'copy%' THEN RETURN 0; END IF;
    FOR i IN 1..40 LOOP
        PERFORM pg_stat_clear_snapshot();
        SELECT count(*) INTO seen FROM pg_stat_activity
        WHERE datname = current_database() AND state = 'active' AND query ILIKE 'copy%pz_peak(%';
        most := greatest(most, seen);
        EXIT WHEN most > n;
        PERFORM pg_sleep(0.05);
    END LOOP;
    IF most > n THEN PERFORM pg_sleep(1); END IF;
    RETURN most;
END $$;
CREATE TABLE t AS SELECT i AS id FROM generate_series(1, 4) i;
"""


@pytest.mark.postgres
@pytest.mark.parametrize("universal", TIERS)
def test_max_concurrency_counts_partition_reads_of_every_load_of_the_instance_once(
    project_dir: Path, universal: bool
) -> None:
    # two partitioned loads of one source with max_concurrency 2: at most 2 reads against it at any time, not
    # 2 loads x 2 partition workers
    dataset = (
        "{ query: 'SELECT id, pz_peak(2) AS peak FROM t', columns: { id: int, peak: int }, "
        "partitions: { column: id, count: 2 } }"
    )
    tier = str(universal).lower()
    with fresh_pg_database(PG_PEAK) as db:
        write_project(
            project_dir,
            {
                "project.yml": f"name: parts\nengine: {{ force_universal: {tier}, threads: 4 }}\n",
                "sources/pg.yml": f"""
                    connector: postgres
                    connection: {{ host: {PG_HOST}, port: {PG_PORT}, user: {PG_USER}, database: {db} }}
                    max_concurrency: 2
                    datasets:
                      a: {dataset}
                      b: {dataset}
                """,
                "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
                "pipelines/copy.sql": "INSERT INTO {{ sink('wh', 'copy') }} "
                "SELECT * FROM {{ source('pg', 'a') }} UNION ALL SELECT * FROM {{ source('pg', 'b') }}\n",
            },
        )
        result = pz(project_dir, "run")
        assert result.exit_code == 0, result.output
        assert [len(_node(result, f"src_pg__{d}")["partitions"]) for d in "ab"] == [2, 2]
        peaks = [r[0] for r in _wh(project_dir, "SELECT peak FROM copy")]
        assert len(peaks) == 8 and max(peaks) == 2, peaks  # never more than 2, and 2 did run at once


# -- one connection per worker ------------------------------------------------------------------------------
@pytest.mark.postgres
@pytest.mark.parametrize("universal", TIERS)
def test_each_postgres_worker_reads_all_its_partitions_through_one_connection(
    project_dir: Path, universal: bool
) -> None:
    parts = 48
    setup = (
        "CREATE TABLE t AS SELECT i AS id, 'v' || i AS v, (i / 4.0)::numeric(10,2) AS n "
        "FROM generate_series(1, 960) i;"
    )
    with fresh_pg_database(setup) as db, FaultProxy(PG_PORT) as proxy:
        dataset = f"{{ table: t, partitions: {{ column: id, count: {parts} }} }}"
        _pg_project(project_dir, proxy.port, db, dataset, universal)
        result = pz(project_dir, "run")
        assert result.exit_code == 0, result.output
        node = _node(result, "src_pg__t")
        assert [p["rows"] for p in node["partitions"]] == [20] * parts
        assert _wh(project_dir, "SELECT count(*), count(DISTINCT id), sum(id), sum(n) FROM copy") == [
            (960, 960, 960 * 961 // 2, Decimal(960 * 961) / 8)
        ]
        # a connection (or ATTACH) per partition would be 48 and more; per worker, the server sees the
        # run's own few (tier-5 check, partition bounds) and a handful per worker
        assert len(proxy.log) <= 5 + 4 * PEERS, proxy.log
        # the staging table holds the partitions in partition order
        staging = duckdb.connect(str(_last_run(project_dir) / "staging.duckdb"), read_only=True)
        try:
            ids = [r[0] for r in staging.execute("SELECT id FROM src_pg__t ORDER BY rowid").fetchall()]
        finally:
            staging.close()
        assert ids == list(range(1, 961))


# -- a connection lost mid-partition ------------------------------------------------------------------------
# `pz_cut(id)` kills its own server session (as a failover or an operator would) while reading row `id`
# 300, as long as cut.armed is true: the worker's connection dies in the middle of one partition.
PG_CUT = """
CREATE TABLE cut (armed boolean);
INSERT INTO cut VALUES (true);
CREATE FUNCTION pz_cut(id int) RETURNS int LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF id = 300 AND current_query() ILIKE 'copy%' AND (SELECT armed FROM cut) THEN
        PERFORM pg_terminate_backend(pg_backend_pid());
        PERFORM pg_sleep(5);
    END IF;
    RETURN id;
END $$;
CREATE TABLE t AS SELECT i AS id, 'v' || i AS v FROM generate_series(1, 960) i;
"""
CUT_DATASET = (
    "{ query: 'SELECT id, v, pz_cut(id) AS c FROM t', columns: { id: int, v: varchar, c: int }, "
    "partitions: { column: id, count: 24 } }"
)


@pytest.mark.postgres
@pytest.mark.parametrize("universal", TIERS)
def test_a_connection_lost_mid_partition_fails_that_partition_only(
    project_dir: Path, universal: bool
) -> None:
    with fresh_pg_database(PG_CUT) as db:
        _pg_project(project_dir, PG_PORT, db, CUT_DATASET, universal, ", retry: { max_attempts: 1 }")
        failed = pz(project_dir, "run")
        assert failed.exit_code == 1, failed.output
        assert "PZ0505" in failed.output
        parts = _node(failed, "src_pg__t")["partitions"]
        # the worker whose connection died reconnects for its next partition: only the cut one failed
        assert [p["index"] for p in parts if p["status"] != "success"] == [7]  # ids 281..320
        assert sum(p["rows"] for p in parts) == 960 - 40
        with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=db, autocommit=True) as con:
            con.execute("UPDATE cut SET armed = false")
        retry = pz(project_dir, "retry")
        assert retry.exit_code == 0, retry.output
        assert "past 23 partition(s) that landed" in retry.output
        assert _wh(project_dir, "SELECT count(*), count(DISTINCT id), sum(id) FROM copy") == [
            (960, 960, 960 * 961 // 2)
        ]


# -- MariaDB ------------------------------------------------------------------------------------------------
# The same witness as PG_BARRIER, counting this database's connections that run a query (the partition reads;
# pz's own describe connection is idle between them).
MY_BARRIER = """
CREATE FUNCTION pz_peers(n INT) RETURNS INT NOT DETERMINISTIC READS SQL DATA
BEGIN
  DECLARE seen INT DEFAULT 0; DECLARE most INT DEFAULT 0; DECLARE held INT DEFAULT 0; DECLARE i INT DEFAULT 0;
  WHILE i < 600 AND held <= 20 DO
    SELECT COUNT(*) INTO seen FROM information_schema.PROCESSLIST
      WHERE DB = DATABASE() AND COMMAND IN ('Query', 'Execute');
    SET most = GREATEST(most, seen);
    IF most >= n THEN SET held = held + 1; END IF;
    DO SLEEP(0.05);
    SET i = i + 1;
  END WHILE;
  RETURN most;
END
"""


@pytest.fixture
def my_db() -> Iterator[str]:
    name = f"pz_parts_{secrets.token_hex(4)}"
    con = pymysql.connect(host="127.0.0.1", port=3306, user="root", password="", autocommit=True)
    try:
        with con.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}`")
        yield name
    finally:
        with con.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        con.close()


def _my(db: str, *statements: str) -> None:
    con = pymysql.connect(host="127.0.0.1", port=3306, user="root", password="", database=db, autocommit=True)
    try:
        with con.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
    finally:
        con.close()


def _my_project(root: Path, db: str, dataset: str) -> Path:
    return write_project(
        root,
        {
            "project.yml": "name: parts\n",
            "sources/my.yml": f"""
                connector: mysql
                connection: {{ host: 127.0.0.1, port: 3306, user: root, database: {db} }}
                max_concurrency: {PEERS}
                datasets:
                  t: {dataset}
            """,
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
            "pipelines/copy.sql": COPY % "my",
        },
    )


@pytest.mark.mysql
def test_mysql_partitions_run_max_concurrency_at_a_time(project_dir: Path, my_db: str) -> None:
    _my(my_db, MY_BARRIER, "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t SELECT seq FROM seq_1_to_6")
    _my_project(project_dir, my_db, BARRIER_DATASET)
    result = pz(project_dir, "run")
    assert result.exit_code == 0, result.output
    assert len(_node(result, "src_my__t")["partitions"]) == 2 * PEERS
    assert _wh(project_dir, "SELECT id, peers FROM copy ORDER BY id") == [
        (i, PEERS) for i in range(1, 2 * PEERS + 1)
    ]


@pytest.mark.mysql
def test_mysql_partitions_stage_every_row_once(project_dir: Path, my_db: str) -> None:
    _my(
        my_db,
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), n DECIMAL(10,2))",
        "INSERT INTO t SELECT seq, CONCAT('v', seq), seq / 4 FROM seq_1_to_960",
    )
    _my_project(project_dir, my_db, "{ table: t, partitions: { column: id, count: 48 } }")
    result = pz(project_dir, "run")
    assert result.exit_code == 0, result.output
    assert [p["rows"] for p in _node(result, "src_my__t")["partitions"]] == [20] * 48
    assert _wh(project_dir, "SELECT count(*), count(DISTINCT id), sum(id), sum(n), min(v) FROM copy") == [
        (960, 960, 960 * 961 // 2, Decimal(960 * 961) / 8, "v1")
    ]


# -- a transient failure of one partition: the node's retry re-reads that partition only -------------------
@pytest.mark.postgres
@pytest.mark.parametrize("universal", TIERS)
def test_a_retried_partitioned_load_reads_again_only_the_partitions_that_failed(
    project_dir: Path, universal: bool
) -> None:
    setup = "CREATE TABLE t AS SELECT i AS id, repeat('v', 10000) || i AS v FROM generate_series(1, 960) i;"
    with fresh_pg_database(setup) as db, FaultProxy(PG_PORT) as proxy:
        # the connections opened until one of them has carried 100 kB reset there: in the middle of a
        # partition's rows (200 kB each), or while a worker connects; later ones are left alone: a few
        # partitions fail once, transiently
        proxy.policy = lambda _index: Fault.ok() if proxy.fired else Fault.reset(after_bytes=100_000)
        retry = ", retry: { max_attempts: 2, base_delay: 10ms, max_delay: 10ms }"
        dataset = "{ table: t, partitions: { column: id, count: 48 } }"
        _pg_project(project_dir, proxy.port, db, dataset, universal, retry)
        result = pz(project_dir, "run")
        assert result.exit_code == 0, result.output
        assert proxy.fired, proxy.log
        assert "RETRY src_pg__t attempt 2" in result.output
        kept = re.search(r"attempt 2 of src_pg__t keeps the (\d+) partition\(s\) that landed", result.output)
        assert kept is not None and 24 <= int(kept.group(1)) < 48, result.output
        node = _node(result, "src_pg__t")
        assert node["attempts"] == 2 and [p["rows"] for p in node["partitions"]] == [20] * 48
        assert _wh(project_dir, "SELECT count(*), count(DISTINCT id), sum(id), min(v) FROM copy") == [
            (960, 960, 960 * 961 // 2, "v" * 10000 + "1")
        ]


@pytest.mark.mysql
def test_a_mysql_connection_the_server_dropped_between_partitions_is_replaced(
    project_dir: Path, my_db: str
) -> None:
    # each partition read waits for its peers (about 1 s): meanwhile the test kills the idle connections pz
    # keeps in this database (the describe/ping connections), as a server's wait_timeout or a failover would
    _my(my_db, MY_BARRIER, "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t SELECT seq FROM seq_1_to_6")
    _my_project(project_dir, my_db, BARRIER_DATASET)
    killed: list[int] = []
    stop = threading.Event()

    def killer() -> None:
        con = pymysql.connect(host="127.0.0.1", port=3306, user="root", password="", autocommit=True)
        try:
            while not stop.is_set() and not killed:
                with con.cursor() as cur:
                    cur.execute(
                        "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = %s AND COMMAND = 'Sleep' "
                        "AND (SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = %s "
                        "AND COMMAND IN ('Query', 'Execute')) >= %s",
                        (my_db, my_db, PEERS),
                    )
                    for (ident,) in cur.fetchall():
                        cur.execute(f"KILL {int(ident)}")
                        killed.append(int(ident))
                stop.wait(0.05)
        finally:
            con.close()

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        result = pz(project_dir, "run")
    finally:
        stop.set()
        thread.join(10)
    assert killed, "no idle connection of pz was found to kill"
    assert result.exit_code == 0, result.output
    assert _wh(project_dir, "SELECT id, peers FROM copy ORDER BY id") == [
        (i, PEERS) for i in range(1, 2 * PEERS + 1)
    ]


@pytest.mark.mysql
@pytest.mark.parametrize("whole", [True, False], ids=["fetched-whole", "streamed"])
def test_mysql_empty_and_null_partitions_stage_their_columns(
    project_dir: Path, my_db: str, whole: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipelinez.connectors.mysql import source

    if not whole:  # every partition counts as large: streamed
        monkeypatch.setattr(source, "WHOLE_FETCH_ROWS", 0)
    _my(
        my_db,
        "CREATE TABLE t (id INT NULL, v VARCHAR(20), d DATE, n DECIMAL(10,2))",
        "INSERT INTO t VALUES (1, 'a', '2026-01-02', 1.50), (2, NULL, NULL, NULL), (NULL, 'z', NULL, 0), "
        "(100, 'b', '2026-03-04', 2.25)",
    )
    _my_project(project_dir, my_db, "{ table: t, partitions: { column: id, count: 4 } }")
    result = pz(project_dir, "run")
    assert result.exit_code == 0, result.output
    assert [p["rows"] for p in _node(result, "src_my__t")["partitions"]] == [3, 0, 0, 1]
    assert _wh(project_dir, "SELECT id, v, d::VARCHAR, n FROM copy ORDER BY id NULLS FIRST") == [
        (None, "z", None, Decimal("0.00")),
        (1, "a", "2026-01-02", Decimal("1.50")),
        (2, None, None, None),
        (100, "b", "2026-03-04", Decimal("2.25")),
    ]
