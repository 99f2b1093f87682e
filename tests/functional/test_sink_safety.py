"""Data safety of sink writes, through the CLI, on every connector it applies to (PostgreSQL and MariaDB
live, DuckDB files, parquet folders): no silent narrowing into an existing target (PZ0515), merge with
duplicate keys refused alike everywhere (PZ0516), and the row counts pz prints and records are the rows
the target received."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import duckdb
import psycopg
import pymysql
import pytest

from tests.conftest import PG_HOST, PG_PORT, PG_USER, PzResult, fresh_pg_database, pz, write_project

pytestmark = [pytest.mark.postgres, pytest.mark.mysql]

NARROWING_SQL = """
    INSERT INTO {{ sink('wh', 'out') }}
    SELECT 1 AS id, 120.50::DECIMAL(10,2) AS amount, TIMESTAMP '2026-03-01 10:30:00' AS placed
"""
DUPLICATES_SQL = """
    INSERT INTO {{ sink('wh', 'out') }}
    SELECT * FROM (VALUES (1, 'a'), (2, 'b'), (2, 'c'), (3, 'd'), (3, 'e')) AS t(id, name)
"""
ON_DELETE_SQL = """
    INSERT INTO {{ sink('wh', 'out') }}
    SELECT * FROM (VALUES (1, 'a', false), (2, 'b', NULL), (3, 'c', true)) AS t(id, name, gone)
"""

EVENTS_SQL = "INSERT INTO {{{{ sink('lake', 'events') }}}} SELECT {id} AS id, 'x' AS name"


class Target(Protocol):
    """One sink system: its sink YAML, SQL run directly in it, and its table's rows."""

    name: str

    def sink_yaml(self, strategy: str, extra: str = "") -> str: ...

    def execute(self, sql: str) -> None: ...

    def rows(self, sql: str) -> list[tuple[object, ...]]: ...


class Postgres:
    name = "postgres"

    def __init__(self, database: str):
        self.database = database

    def sink_yaml(self, strategy: str, extra: str = "") -> str:
        return f"""
            connector: postgres
            connection: {{ host: {PG_HOST}, port: {PG_PORT}, user: {PG_USER}, database: {self.database} }}
            outputs:
              out: {{ table: public.target, strategy: {strategy}{extra} }}
        """

    def _con(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(
            host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=self.database, autocommit=True
        )

    def execute(self, sql: str) -> None:
        with self._con() as con:
            con.execute(sql)  # type: ignore[arg-type]

    def rows(self, sql: str) -> list[tuple[object, ...]]:
        with self._con() as con:
            return con.execute(sql).fetchall()  # type: ignore[arg-type]


class MariaDB:
    name = "mysql"

    def __init__(self, database: str):
        self.database = database

    def sink_yaml(self, strategy: str, extra: str = "") -> str:
        return f"""
            connector: mysql
            connection: {{ host: 127.0.0.1, port: 3306, user: root, password: "", database: {self.database} }}
            outputs:
              out: {{ table: target, strategy: {strategy}{extra} }}
        """

    def execute(self, sql: str) -> None:
        con = pymysql.connect(
            host="127.0.0.1", user="root", password="", database=self.database, autocommit=True
        )
        try:
            with con.cursor() as cur:
                cur.execute(sql)
        finally:
            con.close()

    def rows(self, sql: str) -> list[tuple[object, ...]]:
        con = pymysql.connect(host="127.0.0.1", user="root", password="", database=self.database)
        try:
            with con.cursor() as cur:
                cur.execute(sql)
                return list(cur.fetchall())
        finally:
            con.close()


class DuckDBFile:
    name = "duckdb"

    def __init__(self, path: Path):
        self.path = path

    def sink_yaml(self, strategy: str, extra: str = "") -> str:
        return f"""
            connector: duckdb
            connection: {{ path: {self.path} }}
            outputs:
              out: {{ table: target, strategy: {strategy}{extra} }}
        """

    def execute(self, sql: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with duckdb.connect(str(self.path)) as con:
            con.execute(sql)

    def rows(self, sql: str) -> list[tuple[object, ...]]:
        with duckdb.connect(str(self.path), read_only=True) as con:
            return con.execute(sql).fetchall()


@contextlib.contextmanager
def _mariadb() -> Iterator[str]:
    name = f"pz_safety_{secrets.token_hex(4)}"
    con = pymysql.connect(host="127.0.0.1", user="root", password="", autocommit=True)
    try:
        with con.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        yield name
    finally:
        with con.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        con.close()


@pytest.fixture(params=["postgres", "mysql", "duckdb"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    if request.param == "postgres":
        with fresh_pg_database() as database:
            yield Postgres(database)
    elif request.param == "mysql":
        with _mariadb() as database:
            yield MariaDB(database)
    else:
        yield DuckDBFile(tmp_path / "wh.duckdb")


def _run(
    project: Path, target: Target, strategy: str, sql: str, *, extra: str = "", universal: bool = False
) -> PzResult:
    engine = "engine: { force_universal: true }\n" if universal else ""
    write_project(
        project,
        {
            "project.yml": f"name: safety\n{engine}",
            "sinks/wh.yml": target.sink_yaml(strategy, extra),
            "pipelines/p.sql": sql,
        },
    )
    return pz(project, "run")


@pytest.mark.parametrize("strategy", ["merge", "append"])
def test_narrowing_into_an_existing_target_is_refused_before_anything_lands(
    project_dir: Path, target: Target, strategy: str
) -> None:
    kinds = {
        "postgres": "id integer PRIMARY KEY, amount integer, placed date",
        "mysql": "id INT PRIMARY KEY, amount INT, placed DATE",
        "duckdb": "id INTEGER PRIMARY KEY, amount INTEGER, placed DATE",
    }[target.name]
    target.execute(f"CREATE TABLE target ({kinds})")
    target.execute("INSERT INTO target VALUES (7, 7, DATE '2020-01-01')")
    extra = ", keys: [id]" if strategy == "merge" else ""
    for universal in (False, True):
        result = _run(project_dir, target, strategy, NARROWING_SQL, extra=extra, universal=universal)
        assert result.exit_code == 1, result.output
        node = result.node("wh.out")
        assert node["status"] == "failed" and node["error"]["code"] == "PZ0515", node
        message = node["error"]["message"]
        assert "sink 'wh' output 'out'" in message
        assert "column amount is DECIMAL(10,2)" in message and "numeric scale" in message
        assert "column placed is TIMESTAMP" in message and "timestamp -> date" in message
        assert "CAST(amount AS INTEGER)" in message and "alter the target" in message
        assert "PZ0515" in result.output
        assert target.rows("SELECT count(*) FROM target") == [(1,)]


def test_a_fitting_merge_and_append_still_land(project_dir: Path, target: Target) -> None:
    """Wider target columns take the result: no false refusals (text into a bounded column included)."""
    kinds = {
        "postgres": "id bigint PRIMARY KEY, amount numeric(14,4), placed timestamp, name varchar(5)",
        "mysql": "id BIGINT PRIMARY KEY, amount DECIMAL(14,4), placed DATETIME(6), name VARCHAR(5)",
        "duckdb": "id BIGINT PRIMARY KEY, amount DECIMAL(14,4), placed TIMESTAMP, name VARCHAR",
    }[target.name]
    target.execute(f"CREATE TABLE target ({kinds})")
    sql = NARROWING_SQL.replace("AS placed", "AS placed, 'héllo' AS name")
    assert (merged := _run(project_dir, target, "merge", sql, extra=", keys: [id]")).exit_code == 0, (
        merged.output
    )
    sql = sql.replace("SELECT 1 AS id", "SELECT 2 AS id")
    assert (appended := _run(project_dir, target, "append", sql)).exit_code == 0, appended.output
    rows = target.rows("SELECT id, amount, name FROM target ORDER BY id")
    assert [(int(r[0]), float(r[1]), r[2]) for r in rows] == [(1, 120.5, "héllo"), (2, 120.5, "héllo")]  # type: ignore[arg-type]


@pytest.mark.parametrize("target", ["postgres", "mysql"], indirect=True)  # DuckDB's VARCHAR has no length
def test_text_longer_than_the_target_column_is_refused(project_dir: Path, target: Target) -> None:
    target.execute("CREATE TABLE target (id integer, name varchar(3))")
    result = _run(
        project_dir, target, "append", "INSERT INTO {{ sink('wh', 'out') }} SELECT 1 AS id, 'abcd' AS name"
    )
    assert result.exit_code == 1, result.output
    message = result.node("wh.out")["error"]["message"]
    assert "column name is VARCHAR" in message and "4 characters, the column holds 3" in message
    assert "left(name, 3)" in message
    assert target.rows("SELECT count(*) FROM target") == [(0,)]


@pytest.mark.parametrize("target", ["postgres", "mysql"], indirect=True)  # DuckDB's VARCHAR has no length
@pytest.mark.parametrize("strategy", ["merge", "append"])
def test_values_that_are_not_text_are_measured_as_text_for_a_bounded_column(
    project_dir: Path, target: Target, strategy: str
) -> None:
    """A number or a timestamp written into varchar(3) was not checked (MySQL cut it silently without
    strict mode); measured as text now, like text is."""
    target.execute(
        "CREATE TABLE target (id integer PRIMARY KEY, code varchar(3), at varchar(3), ok varchar(4))"
    )
    sql = (
        "INSERT INTO {{ sink('wh', 'out') }} SELECT 1 AS id, 12345 AS code, "
        "TIMESTAMP '2026-03-01 10:30:00' AS at, 42 AS ok"
    )
    extra = ", keys: [id]" if strategy == "merge" else ""
    for universal in (False, True):
        result = _run(project_dir, target, strategy, sql, extra=extra, universal=universal)
        assert result.exit_code == 1, result.output
        error = result.node("wh.out")["error"]
        assert error["code"] == "PZ0515", error
        message = error["message"]
        assert (
            "column code is INTEGER in the result but "
            + ("character varying(3)" if target.name == "postgres" else "varchar(3)")
            + " in the target: written as text its longest value has 5 characters, the column holds 3 "
            "(text length); write left(CAST(code AS VARCHAR), 3) in the pipeline"
        ) in message, message
        assert "column at is TIMESTAMP" in message and "has 19 characters" in message
        assert "column ok" not in message
        assert target.rows("SELECT count(*) FROM target") == [(0,)]
    fits = "INSERT INTO {{ sink('wh', 'out') }} SELECT 1 AS id, 123 AS code, 4.5 AS ok"
    assert _run(project_dir, target, strategy, fits, extra=extra).exit_code == 0
    assert target.rows("SELECT code, ok FROM target") == [("123", "4.5")]


def test_merge_with_duplicate_keys_is_refused_alike(project_dir: Path, target: Target) -> None:
    for universal in (False, True):
        result = _run(project_dir, target, "merge", DUPLICATES_SQL, extra=", keys: [id]", universal=universal)
        assert result.exit_code == 1, result.output
        error = result.node("wh.out")["error"]
        assert error["code"] == "PZ0516"
        assert error["message"] == (
            "sink 'wh' output 'out': merge needs one row per key (id), but 2 key value(s) repeat in the "
            "result, e.g. id = 2 (2 rows); nothing was written. Deduplicate the pipeline's result (e.g. "
            "QUALIFY row_number() OVER (PARTITION BY the keys ORDER BY …) = 1)"
        )
    # nothing landed: not even the target table was created
    missing = {
        "postgres": "SELECT count(*) FROM pg_tables WHERE tablename = 'target'",
        "mysql": "SELECT count(*) FROM information_schema.TABLES WHERE TABLE_NAME = 'target' "
        "AND TABLE_SCHEMA = DATABASE()",
        "duckdb": "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'target'",
    }[target.name]
    if not isinstance(target, DuckDBFile) or target.path.exists():
        assert target.rows(missing) == [(0,)]


@pytest.mark.parametrize("strategy", ["merge", "append"])
def test_result_columns_the_target_lacks_are_refused_alike(
    project_dir: Path, target: Target, strategy: str
) -> None:
    """One rule for every connector and tier: merge and append never change the target's definition
    (duckdb used to add the column, postgres and mysql failed on the server with PZ0501)."""
    target.execute("CREATE TABLE target (id integer, name varchar(20))")
    sql = "INSERT INTO {{ sink('wh', 'out') }} SELECT 1 AS id, 'a' AS name, 2.5 AS score, 'x' AS note"
    extra = ", keys: [id]" if strategy == "merge" else ""
    for universal in (False, True):
        result = _run(project_dir, target, strategy, sql, extra=extra, universal=universal)
        assert result.exit_code == 1, result.output
        error = result.node("wh.out")["error"]
        assert error["code"] == "PZ0517", error
        assert error["message"] == (
            "sink 'wh' output 'out': the result has column(s) score, note that the existing target does not "
            f"have (it has: id, name); {strategy} never changes the target's definition, so nothing was "
            "written. Leave them out of the pipeline's SELECT, add them to the target (ADD COLUMN score "
            "DECIMAL(2,1); ADD COLUMN note VARCHAR), or write with strategy replace"
        ), error["message"]
    assert target.rows("SELECT count(*) FROM target") == [(0,)]
    fewer = "INSERT INTO {{ sink('wh', 'out') }} SELECT 1 AS id"  # target columns the result lacks: NULL
    assert _run(project_dir, target, strategy, fewer, extra=extra).exit_code == 0
    assert target.rows("SELECT id, name FROM target") == [(1, None)]


REQUIRED_COLUMNS = {
    "postgres": "id integer, name varchar(20) NOT NULL, made varchar(5) NOT NULL DEFAULT 'x', "
    "n bigint GENERATED ALWAYS AS IDENTITY",
    "mysql": "id INT, name VARCHAR(20) NOT NULL, made VARCHAR(5) NOT NULL DEFAULT 'x', "
    "n BIGINT NOT NULL AUTO_INCREMENT, KEY (n)",
    "duckdb": "id INTEGER, name VARCHAR NOT NULL, made VARCHAR NOT NULL DEFAULT 'x'",
}


@pytest.mark.parametrize("strategy", ["merge", "append"])
def test_target_columns_the_result_must_fill_are_refused_alike(
    project_dir: Path, target: Target, strategy: str
) -> None:
    """A NOT NULL column without a default that the result lacks: the server refused it (PZ0501) on
    postgres and mysql after loading, duckdb differently; one engine rule before anything is written now.
    Columns with a default, identity or auto-increment are left to the target."""
    target.execute(f"CREATE TABLE target ({REQUIRED_COLUMNS[target.name]})")
    extra = ", keys: [id]" if strategy == "merge" else ""
    lacking = "INSERT INTO {{ sink('wh', 'out') }} SELECT 1 AS id, 2 AS score"
    for universal in (False, True):
        result = _run(project_dir, target, strategy, lacking, extra=extra, universal=universal)
        assert result.exit_code == 1, result.output
        error = result.node("wh.out")["error"]
        assert error["code"] == "PZ0517", error
        has = "id, name, made" + (", n" if target.name != "duckdb" else "")
        assert error["message"] == (
            "sink 'wh' output 'out': the result has column(s) score that the existing target does not have "
            f"(it has: {has}); the result does not have the target's column(s) name, which every written "
            "row must fill (NOT NULL without a default, or a column of the parquet files already there); "
            f"{strategy} never changes the target's definition, so nothing was written. Leave them out of "
            "the pipeline's SELECT, add them to the target (ADD COLUMN score INTEGER), select name in the "
            "pipeline (or give the target column(s) a default), or write with strategy replace"
        ), error["message"]
    assert target.rows("SELECT count(*) FROM target") == [(0,)]
    fills = "INSERT INTO {{ sink('wh', 'out') }} SELECT 1 AS id, 'a' AS name"
    assert (ok := _run(project_dir, target, strategy, fills, extra=extra)).exit_code == 0, ok.output
    assert target.rows("SELECT id, name, made FROM target") == [(1, "a", "x")]


def test_a_parquet_folder_needs_every_column_of_its_files(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            "project.yml": "name: lake\n",
            "sinks/lake.yml": """
            connector: localfiles
            connection: { root: out }
            outputs:
              events: { format: parquet, strategy: append }
        """,
            "pipelines/events.sql": EVENTS_SQL.format(id="1"),
        },
    )
    assert pz(project_dir, "run").exit_code == 0
    write_project(
        project_dir, {"pipelines/events.sql": "INSERT INTO {{ sink('lake', 'events') }} SELECT 2 AS id"}
    )
    result = pz(project_dir, "run")
    assert result.exit_code == 1, result.output
    error = result.node("lake.events")["error"]
    assert error["code"] == "PZ0517" and error["message"] == (
        "sink 'lake' output 'events': the result does not have the target's column(s) name, which every "
        "written row must fill (NOT NULL without a default, or a column of the parquet files already there); "
        "append never changes the target's definition, so nothing was written. Select name in the pipeline "
        "(or give the target column(s) a default), or write with strategy replace"
    ), error["message"]
    assert len(list((project_dir / "out" / "events.parquet").glob("*.parquet"))) == 1


FOLDING_TARGETS = {
    "postgres": [
        "CREATE EXTENSION IF NOT EXISTS citext",
        "CREATE COLLATION pz_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)",
        "CREATE TABLE target (k citext, j varchar(10) COLLATE pz_ci, p char(4), v integer, "
        "PRIMARY KEY (k, j, p))",
    ],
    "mysql": [
        "CREATE TABLE target (k VARCHAR(10) COLLATE utf8mb4_general_ci, j VARCHAR(10) COLLATE "
        "utf8mb4_unicode_520_nopad_ci, p VARCHAR(4) COLLATE utf8mb4_bin, v INT, PRIMARY KEY (k, j, p))"
    ],
    "duckdb": [
        "CREATE TABLE target (k VARCHAR COLLATE NOCASE, j VARCHAR COLLATE NOCASE, p VARCHAR, v INTEGER, "
        "PRIMARY KEY (k, j, p))"
    ],
}


def test_merge_keys_a_collation_folds_together_are_duplicates(project_dir: Path, target: Target) -> None:
    """A case-insensitive (or PAD SPACE, citext, char(n)) key column folds keys the result holds apart:
    the target kept one of the rows and pz counted both. Refused (PZ0516) as the target compares."""
    for statement in FOLDING_TARGETS[target.name]:
        target.execute(statement)
    sql = """
        INSERT INTO {{ sink('wh', 'out') }}
        SELECT * FROM (VALUES ('a', 'x', 'p', 1), ('A', 'X', 'p', 2), ('b', 'y', 'p', 3), ('c', 'z', 'p', 4))
            AS t(k, j, p, v)
    """
    for universal in (False, True):
        result = _run(project_dir, target, "merge", sql, extra=", keys: [k, j, p]", universal=universal)
        assert result.exit_code == 1, result.output
        error = result.node("wh.out")["error"]
        assert error["code"] == "PZ0516", error
        message = error["message"]
        assert message.startswith(
            "sink 'wh' output 'out': merge needs one row per key (k, j, p), but 1 key value(s) repeat in the "
            "result as the existing target compares keys (k ("
        ), message
        assert "k = 'A', j = 'X', p = 'p' and k = 'a', j = 'x', p = 'p'" in message, message
        assert "nothing was written" in message
    assert target.rows("SELECT count(*) FROM target") == [(0,)]
    if target.name != "duckdb":  # trailing spaces: PAD SPACE (mysql utf8mb4_bin) and char(4) (postgres)
        spaced = sql.replace("('A', 'X', 'p', 2)", "('a', 'x', 'p  ', 2)")
        result = _run(project_dir, target, "merge", spaced, extra=", keys: [k, j, p]")
        assert result.node("wh.out")["error"]["code"] == "PZ0516", result.output
        assert "ignoring trailing spaces" in result.node("wh.out")["error"]["message"]
    distinct = sql.replace("('A', 'X', 'p', 2)", "('a', 'x', 'q', 2)")
    assert _run(project_dir, target, "merge", distinct, extra=", keys: [k, j, p]").exit_code == 0
    assert target.rows("SELECT count(*) FROM target") == [(4,)]


def test_tables_pz_creates_keep_keys_apart_that_differ_in_case_or_spaces(
    project_dir: Path, target: Target
) -> None:
    sql = """
        INSERT INTO {{ sink('wh', 'out') }}
        SELECT * FROM (VALUES ('a', 1), ('A', 2), ('a ', 3), ('é', 4), ('e', 5)) AS t(k, v)
    """
    for _ in range(2):  # created, then merged into
        result = _run(project_dir, target, "merge", sql, extra=", keys: [k]")
        assert result.exit_code == 0, result.output
        assert result.node("wh.out")["rows"] == 5
    assert target.rows("SELECT count(*) FROM target") == [(5,)]


NULL_KEYS_SQL = """
    INSERT INTO {{ sink('wh', 'out') }}
    SELECT * FROM (VALUES (1, 'a', 'x'), (NULL, 'b', 'y'), (3, NULL, 'z'), (NULL, 'c', 'w'))
        AS t(id, k2, name)
"""


def test_merge_with_null_keys_is_refused_alike(project_dir: Path, target: Target) -> None:
    """Postgres refused NULL keys, DuckDB and MySQL matched NULL to NULL: one engine rule now (PZ0520)."""
    for universal in (False, True):
        result = _run(
            project_dir, target, "merge", NULL_KEYS_SQL, extra=", keys: [id, k2]", universal=universal
        )
        assert result.exit_code == 1, result.output
        error = result.node("wh.out")["error"]
        assert error["code"] == "PZ0520", error
        assert error["message"] == (
            "sink 'wh' output 'out': merge keys (id, k2) must not be NULL, but 3 row(s) of the result have a "
            "NULL key, e.g. id = NULL, k2 = 'b'; nothing was written. Filter them out (WHERE … IS NOT NULL) "
            "or give them a key (COALESCE) in the pipeline"
        ), error["message"]
        assert result.node("wh.out")["rows"] == 0


@pytest.mark.parametrize("universal", [False, True], ids=["native", "universal"])
def test_merge_rows_are_the_rows_upserted_not_the_deleted_ones(
    project_dir: Path, target: Target, universal: bool
) -> None:
    result = _run(
        project_dir,
        target,
        "merge",
        ON_DELETE_SQL,
        extra=", keys: [id], on_delete: { column: gone }",
        universal=universal,
    )
    assert result.exit_code == 0, result.output
    assert result.node("wh.out")["rows"] == 2
    assert any("wh.out" in line and "2 rows" in line for line in result.lines), result.output
    assert target.rows("SELECT count(*) FROM target") == [(2,)]


def test_append_rows_are_the_rows_inserted(project_dir: Path, target: Target) -> None:
    sql = "INSERT INTO {{ sink('wh', 'out') }} SELECT range AS id FROM range(5)"
    for expected in (5, 10):
        result = _run(project_dir, target, "append", sql)
        assert result.exit_code == 0, result.output
        assert result.node("wh.out")["rows"] == 5
        assert target.rows("SELECT count(*) FROM target") == [(expected,)]


def test_appending_other_types_to_a_parquet_folder_is_refused(project_dir: Path) -> None:
    files = {
        "project.yml": "name: lake\n",
        "sinks/lake.yml": """
            connector: localfiles
            connection: { root: out }
            outputs:
              events: { format: parquet, strategy: append }
        """,
        "pipelines/events.sql": EVENTS_SQL.format(id="1::INTEGER"),
    }
    write_project(project_dir, files)
    assert pz(project_dir, "run").exit_code == 0
    assert pz(project_dir, "run").exit_code == 0  # the same types append again
    write_project(
        project_dir,
        {
            "pipelines/events.sql": EVENTS_SQL.format(id="3000000000"),
        },
    )
    result = pz(project_dir, "run")
    assert result.exit_code == 1, result.output
    error = result.node("lake.events")["error"]
    assert error["code"] == "PZ0515" and "column id is BIGINT" in error["message"], error
    assert len(list((project_dir / "out" / "events.parquet").glob("*.parquet"))) == 2


def test_appending_other_columns_to_a_parquet_folder_is_refused(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            "project.yml": "name: lake\n",
            "sinks/lake.yml": """
            connector: localfiles
            connection: { root: out }
            outputs:
              events: { format: parquet, strategy: append }
        """,
            "pipelines/events.sql": EVENTS_SQL.format(id="1"),
        },
    )
    assert pz(project_dir, "run").exit_code == 0
    write_project(
        project_dir,
        {"pipelines/events.sql": "INSERT INTO {{ sink('lake', 'events') }} SELECT 'x' AS name, 1 AS id"},
    )
    result = pz(project_dir, "run")
    assert result.exit_code == 1, result.output
    error = result.node("lake.events")["error"]
    assert (
        error["code"] == "PZ0517" and "columns (id, name) but the result has (name, id)" in error["message"]
    )
    assert len(list((project_dir / "out" / "events.parquet").glob("*.parquet"))) == 1


@pytest.mark.parametrize("universal", [False, True], ids=["native", "universal"])
def test_sums_append_to_parquet_exactly_and_again(project_dir: Path, universal: bool) -> None:
    """sum() is HUGEINT: written as DECIMAL(38,0) by both tiers (DuckDB's parquet writer would round it to
    DOUBLE), so the values are exact and the next append fits."""
    write_project(
        project_dir,
        {
            "project.yml": "name: lake\n" + ("engine: { force_universal: true }\n" if universal else ""),
            "sinks/lake.yml": """
            connector: localfiles
            connection: { root: out }
            outputs:
              totals: { format: parquet, strategy: append }
        """,
            "pipelines/totals.sql": """
            INSERT INTO {{ sink('lake', 'totals') }}
            SELECT sum(x) AS total FROM (VALUES (9007199254740993::BIGINT), (0::BIGINT)) AS t(x)
        """,
        },
    )
    for _ in range(2):
        result = pz(project_dir, "run")
        assert result.exit_code == 0, result.output
    with duckdb.connect() as con:
        rows = con.execute(
            f"SELECT total::VARCHAR FROM read_parquet('{project_dir / 'out' / 'totals.parquet'}/*.parquet')"
        ).fetchall()
    assert rows == [("9007199254740993",), ("9007199254740993",)]


KEY_ONLY_SQL = """
    INSERT INTO {{ sink('wh', 'out') }}
    SELECT * FROM (VALUES (1, 'a', false), (2, 'b', false), (3, 'c', true)) AS t(id, k2, gone)
"""


def test_a_merge_of_key_columns_only_lands_alike(project_dir: Path, target: Target) -> None:
    """A result holding only its keys (and the on_delete flag): mysql generated `ON DUPLICATE KEY UPDATE
    id = id`, ambiguous in INSERT … SELECT (error 1052), on the run that met an existing key."""
    cases = [
        (", keys: [id, k2], on_delete: { column: gone }", [(1, "a"), (2, "b")]),
        (", keys: [id, k2, gone]", [(1, "a"), (2, "b"), (3, "c")]),
    ]
    for extra, expected in cases:
        for _ in range(2):  # the second run upserts keys that are there
            result = _run(project_dir, target, "merge", KEY_ONLY_SQL, extra=extra)
            assert result.exit_code == 0, result.output
            assert result.node("wh.out")["rows"] == len(expected)
            assert [(int(r[0]), r[1]) for r in target.rows("SELECT id, k2 FROM target ORDER BY id")] == (  # type: ignore[call-overload]
                expected
            )
        target.execute("DROP TABLE target")
