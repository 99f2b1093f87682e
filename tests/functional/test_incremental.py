"""Incremental reads end to end (YAML route): the `pz` CLI on small projects against the real PostgreSQL and
MariaDB, plus DuckDB and local files.

Each matrix case: a source table with a cursor of one type; run 1 reads everything; rows are inserted; run
2 reads exactly the new rows (pushed down to the source: the staging backstop trimmed nothing); a row whose
cursor equals the committed watermark is not read (`>`, the YAML route's promise); run 3 reads nothing and
leaves the watermark as it was. The sink appends (`duplicates: accept`), so a row read twice would show up
twice.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import PG_HOST, PG_PORT, PG_USER, fresh_pg_database, pz, write_project

MY_HOST, MY_PORT, MY_USER = "127.0.0.1", 3306, "root"


@dataclass(frozen=True)
class CursorType:
    name: str  # the contract type
    pg: str
    my: str
    value: Callable[[int], str]  # the SQL literal text of the i-th cursor value

    def literal(self, i: int) -> str:
        return f"'{self.value(i)}'"


CURSORS = {
    "int": CursorType("int", "integer", "INT", lambda i: str(i * 10)),
    "bigint": CursorType("bigint", "bigint", "BIGINT", lambda i: str(10**12 + i)),
    "decimal": CursorType("decimal(12,2)", "numeric(12,2)", "DECIMAL(12,2)", lambda i: f"{i}.25"),
    "date": CursorType("date", "date", "DATE", lambda i: f"2024-01-{i:02d}"),
    "timestamp": CursorType(
        "timestamp", "timestamp(6)", "DATETIME(6)", lambda i: f"2024-01-01 10:00:{i:02d}.000001"
    ),
}


# -- backends ------------------------------------------------------------------------------------------
class Backend:
    """A source system holding table `items(id, c, v)` with cursor type `ct`, and the source file for it."""

    name: str

    def create(self, ct: CursorType, ids: range) -> None: ...
    def insert(self, ct: CursorType, rows: list[tuple[int, int | None]]) -> None: ...
    def source_yaml(self, ct: CursorType, sync: str) -> str: ...


def _rows_sql(ct: CursorType, rows: list[tuple[int, int | None]]) -> str:
    return ", ".join(f"({i}, {'NULL' if c is None else ct.literal(c)}, 'v{i}')" for i, c in rows)


class Postgres(Backend):
    def __init__(self, db: str, universal: bool):
        import psycopg

        self.name = "pg_universal" if universal else "pg_native"
        self.db, self.universal = db, universal
        self.con = psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=db, autocommit=True)

    def create(self, ct: CursorType, ids: range) -> None:
        self.con.execute(f"CREATE TABLE items (id integer PRIMARY KEY, c {ct.pg}, v text)")
        self.insert(ct, [(i, i) for i in ids])

    def insert(self, ct: CursorType, rows: list[tuple[int, int | None]]) -> None:
        self.con.execute(f"INSERT INTO items VALUES {_rows_sql(ct, rows)}")  # type: ignore[arg-type]

    def source_yaml(self, ct: CursorType, sync: str) -> str:
        engine = "engine: { force_universal: true }\n" if self.universal else ""
        return (
            f"connector: postgres\nconnection: {{ host: {PG_HOST}, port: {PG_PORT}, user: {PG_USER}, "
            f"database: {self.db} }}\n{engine}datasets:\n  items:\n    table: public.items\n"
            f'    columns: {{ id: int, c: "{ct.name}", v: varchar }}\n    sync: {sync}\n'
        )


class MariaDB(Backend):
    name = "mariadb"

    def __init__(self, db: str):
        import pymysql

        self.db = db
        self.con = pymysql.connect(host=MY_HOST, port=MY_PORT, user=MY_USER, database=db, autocommit=True)

    def create(self, ct: CursorType, ids: range) -> None:
        with self.con.cursor() as cur:
            cur.execute(f"CREATE TABLE items (id INT PRIMARY KEY, c {ct.my} NULL, v VARCHAR(20))")
        self.insert(ct, [(i, i) for i in ids])

    def insert(self, ct: CursorType, rows: list[tuple[int, int | None]]) -> None:
        with self.con.cursor() as cur:
            cur.execute(f"INSERT INTO items VALUES {_rows_sql(ct, rows)}")

    def source_yaml(self, ct: CursorType, sync: str) -> str:
        return (
            f"connector: mysql\nconnection: {{ host: {MY_HOST}, port: {MY_PORT}, user: {MY_USER}, "
            f"database: {self.db} }}\ndatasets:\n  items:\n    table: items\n"
            f'    columns: {{ id: int, c: "{ct.name}", v: varchar }}\n    sync: {sync}\n'
        )


class DuckDBFile(Backend):
    def __init__(self, path: Path, universal: bool):
        self.path, self.universal = path, universal
        self.name = "duckdb_universal" if universal else "duckdb_native"

    def create(self, ct: CursorType, ids: range) -> None:
        with contextlib.closing(duckdb.connect(str(self.path))) as con:
            con.execute(f"CREATE TABLE items (id INTEGER PRIMARY KEY, c {ct.name.upper()}, v VARCHAR)")
        self.insert(ct, [(i, i) for i in ids])

    def insert(self, ct: CursorType, rows: list[tuple[int, int | None]]) -> None:
        with contextlib.closing(duckdb.connect(str(self.path))) as con:
            con.execute(f"INSERT INTO items VALUES {_rows_sql(ct, rows)}")

    def source_yaml(self, ct: CursorType, sync: str) -> str:
        engine = "engine: { force_universal: true }\n" if self.universal else ""
        return (
            f"connector: duckdb\nconnection: {{ path: {self.path} }}\n{engine}datasets:\n  items:\n"
            f'    table: items\n    columns: {{ id: int, c: "{ct.name}", v: varchar }}\n    sync: {sync}\n'
        )


class CsvFiles(Backend):
    """One csv file per insert (a folder of files read by glob): new files, new rows."""

    def __init__(self, folder: Path, universal: bool):
        self.folder, self.universal = folder, universal
        self.name = "csv_universal" if universal else "csv_native"

    def create(self, ct: CursorType, ids: range) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.insert(ct, [(i, i) for i in ids])

    def insert(self, ct: CursorType, rows: list[tuple[int, int | None]]) -> None:
        lines = ["id,c,v", *(f"{i},{'' if c is None else ct.value(c)},v{i}" for i, c in rows)]
        name = f"part_{len(list(self.folder.iterdir())):03d}.csv"
        (self.folder / name).write_text("\n".join(lines) + "\n")

    def source_yaml(self, ct: CursorType, sync: str) -> str:
        engine = "engine: { force_universal: true }\n" if self.universal else ""
        return (
            f"connector: localfiles\nconnection: {{ root: {self.folder} }}\n{engine}datasets:\n  items:\n"
            f"    format: csv\n    path: '*.csv'\n"
            f'    columns: {{ id: int, c: "{ct.name}", v: varchar }}\n    sync: {sync}\n'
        )


@contextlib.contextmanager
def fresh_mariadb() -> Iterator[str]:
    import pymysql

    try:
        admin = pymysql.connect(host=MY_HOST, port=MY_PORT, user=MY_USER, autocommit=True)
    except pymysql.MySQLError as exc:
        pytest.fail(f"MariaDB not reachable on {MY_HOST}:{MY_PORT}: {exc}")
    name = f"pz_test_{secrets.token_hex(4)}"
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
    try:
        yield name
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        admin.close()


@contextlib.contextmanager
def backend(kind: str, tmp: Path) -> Iterator[Backend]:
    if kind.startswith("pg_"):
        with fresh_pg_database() as db:
            pg = Postgres(db, universal=kind == "pg_universal")
            try:
                yield pg
            finally:
                pg.con.close()
    elif kind == "mariadb":
        with fresh_mariadb() as db:
            my = MariaDB(db)
            try:
                yield my
            finally:
                my.con.close()
    elif kind.startswith("duckdb_"):
        yield DuckDBFile(tmp / "src.duckdb", universal=kind == "duckdb_universal")
    else:
        yield CsvFiles(tmp / "csv", universal=kind == "csv_universal")


# -- project -------------------------------------------------------------------------------------------
def make_project(
    root: Path, source_yaml: str, strategy: str = "append", extra: dict[str, str] | None = None
) -> Path:
    output = (
        "{ strategy: append, duplicates: accept }"
        if strategy == "append"
        else "{ strategy: merge, keys: [id] }"
    )
    return write_project(
        root,
        {
            "project.yml": "name: inc\n",
            "sources/src.yml": source_yaml,
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: wh.duckdb }\n"
            f"outputs:\n  items: {output}\n",
            "pipelines/items.sql": "INSERT INTO {{ sink('wh', 'items') }}\n"
            "SELECT * FROM {{ source('src', 'items') }}\n",
            **(extra or {}),
        },
    )


def sink_ids(project: Path, table: str = "items") -> list[int]:
    with contextlib.closing(duckdb.connect(str(project / "wh.duckdb"), read_only=True)) as con:
        return [int(r[0]) for r in con.execute(f"SELECT id FROM {table} ORDER BY id").fetchall()]


def state(project: Path) -> dict[tuple[str, str], str]:
    path = project / ".pz" / "state.duckdb"
    if not path.exists():
        return {}
    with contextlib.closing(duckdb.connect(str(path), read_only=True)) as con:
        return {
            (r[0], r[1]): r[2]
            for r in con.execute("SELECT source, dataset, value FROM watermarks").fetchall()
        }


def load_result(project: Path) -> dict[str, Any]:
    runs = sorted((project / ".pz" / "runs").iterdir())
    data = json.loads((runs[-1] / "run_results.json").read_text())
    return next(n for n in data["nodes"] if n["name"] == "src_src__items")


def run_ok(project: Path, *args: str) -> str:
    result = pz(project, "run", *args)
    assert result.exit_code == 0, result.output
    return result.output


MATRIX = (
    [
        (kind, ct)
        for kind in ("pg_native", "pg_universal", "mariadb")
        for ct in ("int", "bigint", "decimal", "date", "timestamp")
    ]
    + [(kind, ct) for kind in ("duckdb_native", "duckdb_universal") for ct in ("int", "decimal", "timestamp")]
    + [(kind, ct) for kind in ("csv_native", "csv_universal") for ct in ("int", "date", "timestamp")]
)


@pytest.mark.parametrize(("kind", "cursor"), MATRIX, ids=[f"{k}-{c}" for k, c in MATRIX])
def test_rows_arrive_exactly_once(tmp_path: Path, kind: str, cursor: str) -> None:
    ct = CURSORS[cursor]
    with backend(kind, tmp_path) as src:
        src.create(ct, range(1, 6))
        project = make_project(tmp_path / "proj", src.source_yaml(ct, "{ mode: incremental, cursor: c }"))

        run_ok(project)
        first = load_result(project)
        assert first["rows"] == 5
        assert first["watermark"]["committed"] is True
        assert state(project)[("src", "items")] == first["watermark"]["high"]
        assert sink_ids(project) == [1, 2, 3, 4, 5]

        # new rows, and one whose cursor equals the committed watermark (c of row 5): `>` leaves it out
        src.insert(ct, [(6, 6), (7, 7), (8, 8), (50, 5)])
        run_ok(project)
        second = load_result(project)
        assert second["rows"] == 3, second
        assert second["watermark"]["trimmed"] == 0  # the bounds were pushed down: only the delta came back
        assert second["watermark"]["low"] == first["watermark"]["high"]
        assert sink_ids(project) == [1, 2, 3, 4, 5, 6, 7, 8]

        run_ok(project)
        third = load_result(project)
        assert third["rows"] == 0
        assert third["watermark"]["high"] is None and third["watermark"]["committed"] is False
        assert state(project)[("src", "items")] == second["watermark"]["high"]
        assert sink_ids(project) == [1, 2, 3, 4, 5, 6, 7, 8]


# -- commit rule, windows, lag, full refresh, NULL cursors ---------------------------------------------
def _pg_source(db: str, sync: str, columns: str = "{ id: int, c: timestamp, v: varchar }") -> str:
    return (
        f"connector: postgres\nconnection: {{ host: {PG_HOST}, port: {PG_PORT}, user: {PG_USER}, "
        f"database: {db} }}\ndatasets:\n  items:\n    table: public.items\n    columns: {columns}\n"
        f"    sync: {sync}\n"
    )


def test_one_sink_failing_keeps_the_watermark_and_the_next_run_rereads_the_delta(tmp_path: Path) -> None:
    ct = CURSORS["timestamp"]
    with backend("pg_native", tmp_path) as src:
        src.create(ct, range(1, 4))
        blocked = tmp_path / "blocked"
        project = make_project(
            tmp_path / "proj",
            src.source_yaml(ct, "{ mode: incremental, cursor: c }"),
            extra={
                "sinks/lake.yml": f"connector: duckdb\nconnection: {{ path: {blocked}/lake.duckdb }}\n"
                "outputs:\n  items: { strategy: merge, keys: [id] }\n",
                "pipelines/items.sql": "INSERT INTO {{ sink('wh', 'items') }}\n"
                "INSERT INTO {{ sink('lake', 'items') }}\n"
                "SELECT * FROM {{ source('src', 'items') }}\n",
            },
        )
        run_ok(project)
        committed = state(project)[("src", "items")]
        assert committed == ct.value(3)

        src.insert(ct, [(4, 4), (5, 5)])
        shutil.rmtree(blocked)
        blocked.write_text("a file where the lake's folder should be")
        result = pz(project, "run")
        assert result.exit_code == 1, result.output
        assert "FAIL lake.items" in result.output
        assert "ok wh.items 2 rows" in result.output
        assert "watermark c not advanced: sink write lake.items did not commit (failed)" in result.output
        load = load_result(project)
        assert load["watermark"]["high"] == ct.value(5) and load["watermark"]["committed"] is False
        assert state(project)[("src", "items")] == committed  # unchanged

        blocked.unlink()
        run_ok(project)
        again = load_result(project)
        assert again["rows"] == 2  # the same delta, read again
        assert again["watermark"]["low"] == committed and again["watermark"]["committed"] is True
        assert state(project)[("src", "items")] == ct.value(5)
        assert sink_ids(project) == [1, 2, 3, 4, 4, 5, 5]  # the append sink got the re-read: at-least-once
        with contextlib.closing(duckdb.connect(str(blocked / "lake.duckdb"), read_only=True)) as con:
            assert [r[0] for r in con.execute("SELECT id FROM items ORDER BY id").fetchall()] == [4, 5]


def test_a_sink_outside_the_selection_keeps_the_watermark(tmp_path: Path) -> None:
    ct = CURSORS["int"]
    with backend("duckdb_native", tmp_path) as src:
        src.create(ct, range(1, 4))
        project = make_project(
            tmp_path / "proj",
            src.source_yaml(ct, "{ mode: incremental, cursor: c }"),
            extra={
                "sinks/lake.yml": "connector: duckdb\nconnection: { path: lake.duckdb }\n"
                "outputs:\n  copy: { strategy: merge, keys: [id] }\n",
                "pipelines/copy.sql": "INSERT INTO {{ sink('lake', 'copy') }}\n"
                "SELECT * FROM {{ source('src', 'items') }}\n",
            },
        )
        output = run_ok(project, "--select", "items+")
        assert "not advanced: sink write lake.copy did not run in this run" in output
        assert state(project) == {}


def test_windows_advance_one_window_per_run(tmp_path: Path) -> None:
    setup = (
        "CREATE TABLE items (id int PRIMARY KEY, c timestamp(6), v text);"
        "INSERT INTO items SELECT i, timestamp '2024-01-01 00:00:00' + i * interval '6 hours', 'v' "
        "FROM generate_series(1, 12) AS i"  # every 6h from 06:00 on Jan 1 to 00:00 on Jan 4
    )
    with fresh_pg_database(setup) as db:
        sync = '{ mode: incremental, cursor: c, start: "2024-01-01", window: 1d }'
        project = make_project(tmp_path / "proj", _pg_source(db, sync))
        plan = pz(project, "plan")
        assert "next read: c > 2024-01-01 AND c <= 2024-01-02 00:00:00" in plan.output, plan.output
        seen: list[int] = []
        for expected, mark in (([1, 2, 3, 4], "01-02"), ([5, 6, 7, 8], "01-03"), ([9, 10, 11, 12], "01-04")):
            run_ok(project)
            load = load_result(project)
            assert load["rows"] == len(expected), load
            seen += expected
            assert sink_ids(project) == seen
            assert state(project)[("src", "items")] == f"2024-{mark} 00:00:00"
        # a window with no rows that lies in the past still moves on, so backfill never stalls at a gap
        run_ok(project)
        load = load_result(project)
        assert load["rows"] == 0 and load["watermark"]["upper"] == "2024-01-05 00:00:00"
        assert state(project)[("src", "items")] == "2024-01-05 00:00:00"


def test_windowed_staging_is_trimmed_when_a_connector_ignores_the_upper_bound(tmp_path: Path) -> None:
    """The backstop: a csv folder read universally, where the upper bound is also checked by the engine."""
    ct = CURSORS["date"]
    with backend("csv_universal", tmp_path) as src:
        src.create(ct, range(1, 10))
        project = make_project(
            tmp_path / "proj",
            src.source_yaml(ct, '{ mode: incremental, cursor: c, start: "2024-01-02", window: 3d }'),
        )
        run_ok(project)
        load = load_result(project)
        assert load["rows"] == 3 and sink_ids(project) == [3, 4, 5]
        assert load["watermark"]["high"] == "2024-01-05"


def test_lag_rereads_the_overlap_and_merge_makes_it_harmless(tmp_path: Path) -> None:
    setup = "CREATE TABLE items (id int PRIMARY KEY, c timestamp(6), v text)"
    with fresh_pg_database(setup) as db:
        import psycopg

        con = psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=db, autocommit=True)
        con.execute(
            "INSERT INTO items VALUES (1, '2024-01-01 10:00:00', 'a'), (2, '2024-01-01 10:05:00', 'b')"
        )
        project = make_project(
            tmp_path / "proj", _pg_source(db, "{ mode: incremental, cursor: c, lag: 10m }"), strategy="merge"
        )
        run_ok(project)
        # a row that committed late, with a cursor below the watermark but inside the lag
        con.execute(
            "INSERT INTO items VALUES (3, '2024-01-01 10:04:00', 'late'), (4, '2024-01-01 10:06:00', 'd')"
        )
        assert "next read: c > 2024-01-01 09:55:00" in pz(project, "plan").output
        run_ok(project)
        load = load_result(project)
        assert load["rows"] == 4  # the overlap (rows 1-3) and the new row 4
        assert state(project)[("src", "items")] == "2024-01-01 10:06:00"
        assert sink_ids(project) == [1, 2, 3, 4]  # merge: the re-read overlap overwrote itself
        # nothing new: the overlap is read again, the watermark never goes back
        run_ok(project)
        assert load_result(project)["watermark"]["high"] is None
        assert state(project)[("src", "items")] == "2024-01-01 10:06:00"
        con.close()


def test_full_refresh_ignores_the_watermark_for_that_run(tmp_path: Path) -> None:
    ct = CURSORS["int"]
    with backend("pg_universal", tmp_path) as src:
        src.create(ct, range(1, 4))
        project = make_project(
            tmp_path / "proj", src.source_yaml(ct, "{ mode: incremental, cursor: c }"), strategy="merge"
        )
        run_ok(project)
        src.insert(ct, [(4, 4)])
        output = run_ok(project, "--full-refresh")
        assert "--full-refresh: committed watermarks are ignored for this run" in output
        load = load_result(project)
        assert load["rows"] == 4 and load["watermark"]["low"] is None and load["watermark"]["committed"]
        assert state(project)[("src", "items")] == ct.value(4)
        run_ok(project)
        assert load_result(project)["rows"] == 0


def test_null_cursor_rows_are_read_by_every_run_and_never_move_the_watermark(tmp_path: Path) -> None:
    ct = CURSORS["bigint"]
    with backend("mariadb", tmp_path) as src:
        src.create(ct, range(1, 3))
        src.insert(ct, [(90, None)])
        project = make_project(
            tmp_path / "proj", src.source_yaml(ct, "{ mode: incremental, cursor: c }"), strategy="merge"
        )
        output = run_ok(project)
        assert "1 staged row(s) have a NULL c; every incremental run reads such rows again" in output
        assert state(project)[("src", "items")] == ct.value(2)
        output = run_ok(project)
        load = load_result(project)
        assert load["rows"] == 1 and load["watermark"]["null_rows"] == 1 and load["watermark"]["high"] is None
        assert sink_ids(project) == [1, 2, 90]


def test_start_bounds_the_first_read(tmp_path: Path) -> None:
    ct = CURSORS["decimal"]
    with backend("pg_native", tmp_path) as src:
        src.create(ct, range(1, 6))
        project = make_project(
            tmp_path / "proj", src.source_yaml(ct, '{ mode: incremental, cursor: c, start: "3.25" }')
        )
        plan = pz(project, "plan").output
        assert "incremental: cursor c, watermark none committed yet" in plan
        assert "next read: c > 3.25" in plan
        run_ok(project)
        assert sink_ids(project) == [4, 5]


def test_sync_problems_are_reported_together(tmp_path: Path) -> None:
    project = write_project(
        tmp_path / "proj",
        {
            "project.yml": "name: inc\n",
            "sources/src.yml": """
                connector: duckdb
                connection: { path: src.duckdb }
                datasets:
                  a:
                    table: a
                    columns: { id: int, c: varchar }
                    sync: { mode: incremental, cursor: c }
                  b:
                    table: b
                    columns: { id: int }
                    sync: { mode: incremental, cursor: missing }
                  c:
                    table: c
                    columns: { id: int }
                    sync: { mode: incremental, cursor: id, window: 1d, start: 1 }
                  d:
                    table: d
                    sync: { mode: incremental, cursor: ts, lag: 5m }
                  e:
                    table: e
                    columns: { ts: timestamp }
                    sync: { mode: incremental, cursor: ts, window: 1d }
                  f:
                    table: f
                    columns: { day: date }
                    sync: { mode: incremental, cursor: day, start: "2024-13-01", lag: 12h }
            """,
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: wh.duckdb }\n",
            "pipelines/p.sql": "INSERT INTO {{ sink('wh', 'p') }}\nSELECT 1 AS x\n",
        },
    )
    result = pz(project, "validate")
    assert result.exit_code == 2
    out = result.output
    assert "error: PZ0227 sources/src.yml:7:" in out and "cursor column 'c' is declared varchar" in out
    assert "dataset 'b': cursor column 'missing' is not in the dataset's columns: contract" in out
    assert "dataset 'c': window: works on a date or timestamp cursor, and 'id' is integer" in out
    assert "dataset 'd': lag: needs the cursor's type, and 'ts' has no type in columns:" in out
    assert "dataset 'e': window: needs start:" in out
    assert "dataset 'f': start: '2024-13-01' is not a date value" in out
    assert "dataset 'f': lag: 12h on a date cursor must be whole days" in out
    assert "7 errors" in out


def test_retry_finishes_the_run_and_commits_the_watermark(tmp_path: Path) -> None:
    """The failed run committed nothing, so the retry computes the same bounds (same load id), reuses the
    staged delta, carries the committed sink forward and commits the watermark the failed run captured."""
    ct = CURSORS["timestamp"]
    with backend("pg_native", tmp_path) as src:
        src.create(ct, range(1, 4))
        blocked = tmp_path / "blocked"
        project = make_project(
            tmp_path / "proj",
            src.source_yaml(ct, "{ mode: incremental, cursor: c }"),
            strategy="merge",
            extra={
                "sinks/lake.yml": f"connector: duckdb\nconnection: {{ path: {blocked}/lake.duckdb }}\n"
                "outputs:\n  items: { strategy: merge, keys: [id] }\n",
                "pipelines/items.sql": "INSERT INTO {{ sink('wh', 'items') }}\n"
                "INSERT INTO {{ sink('lake', 'items') }}\n"
                "SELECT * FROM {{ source('src', 'items') }}\n",
            },
        )
        run_ok(project)
        src.insert(ct, [(4, 4), (5, 5)])
        shutil.rmtree(blocked)
        blocked.write_text("not a folder")
        failed = pz(project, "run")
        assert failed.exit_code == 1 and state(project)[("src", "items")] == ct.value(3)
        failed_id = load_result(project)["id"]

        blocked.unlink()
        retried = pz(project, "retry")
        assert retried.exit_code == 0, retried.output
        assert "note: reusing staged data for 1 source load(s)" in retried.output
        load = load_result(project)
        assert load["id"] == failed_id and load["provenance"] == "reused"
        assert load["watermark"]["committed"] is True
        assert state(project)[("src", "items")] == ct.value(5)
        assert sink_ids(project) == [1, 2, 3, 4, 5]


@pytest.mark.parametrize(("op", "equal_row_read"), [(">", False), (">=", True)])
def test_sql_route_reads_the_delta_and_keeps_its_comparison(
    tmp_path: Path, op: str, equal_row_read: bool
) -> None:
    """`WHERE c > {{ watermark() }}` in a pipeline: the same pushdown, capture and commit as the YAML route;
    `>=` re-reads rows equal to the watermark (the merge sink absorbs them)."""
    ct = CURSORS["timestamp"]
    with backend("pg_universal", tmp_path) as src:
        src.create(ct, range(1, 4))
        project = make_project(
            tmp_path / "proj",
            src.source_yaml(ct, "{ mode: full }"),
            strategy="merge",
            extra={
                "pipelines/items.sql": "INSERT INTO {{ sink('wh', 'items') }}\n"
                "SELECT * FROM {{ source('src', 'items') }} AS i\n"
                f"WHERE i.c {op} {{{{ watermark('src', 'items') }}}}\n"
            },
        )
        assert "next read: every row (c unbounded)" in pz(project, "plan").output
        run_ok(project)
        assert state(project)[("src", "items")] == ct.value(3)
        src.insert(ct, [(4, 4), (30, 3)])  # a new row, and one equal to the watermark
        assert f"next read: c {op} {ct.value(3)}" in pz(project, "plan").output
        run_ok(project)
        load = load_result(project)
        assert load["rows"] == (3 if equal_row_read else 1) and load["watermark"]["trimmed"] == 0
        assert state(project)[("src", "items")] == ct.value(4)
        assert sink_ids(project) == ([1, 2, 3, 4, 30] if equal_row_read else [1, 2, 3, 4])
