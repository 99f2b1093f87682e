"""Crash safety: `kill -9` at each step of a run, then `pz retry`, on PostgreSQL, MariaDB, DuckDB and parquet
sinks.

One project writes one pipeline's result to four sinks (threads: 1, so the order is fixed: dk, fs, my, pg).
Each case runs it cleanly (data v1), changes the data (v2), runs again with a kill at one step, and checks:
- the killed run's run_results.json is readable (write-then-rename), or absent when the kill came before the
  first write, and `pz retry` refuses it with PZ0503 (its statuses can't be trusted) and changes nothing;
- `pz run` then leaves every target exactly as one clean run of v2 would: replace holds v2, merge holds v1's
  untouched keys plus v2, with no lost and no duplicated rows. Appends are at-least-once (documented): the
  batches the killed attempt committed stay, and the full result is appended again.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pymysql
import pytest

from tests.conftest import PG_HOST, PG_PORT, PG_USER, fresh_pg_database, pz, pz_subprocess, write_project

pytestmark = [pytest.mark.postgres, pytest.mark.mysql]

V1 = {1: ("a", 10), 2: ("b", 20), 3: ("c", 30), 4: ("d", 40)}
V2 = {3: ("C", 31), 4: ("D", 41), 5: ("e", 50), 6: ("f", 60)}
SINKS = ("dk", "fs", "my", "pg")


@contextlib.contextmanager
def _mariadb() -> Iterator[str]:
    name = f"pz_crash_{secrets.token_hex(4)}"
    con = pymysql.connect(host="127.0.0.1", user="root", password="", autocommit=True)
    try:
        with con.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}`")
        yield name
    finally:
        with con.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        con.close()


def _data(rows: dict[int, tuple[str, int]]) -> dict[str, str]:
    names = "id,name\n" + "".join(f"{i},{n}\n" for i, (n, _) in rows.items())
    amounts = "id,amount\n" + "".join(f"{i},{a}\n" for i, (_, a) in rows.items())
    return {"data/names.csv": names, "data/amounts.csv": amounts}


def _project(root: Path, pg_db: str, my_db: str, strategy: str) -> None:
    keys = ", keys: [id]" if strategy == "merge" else ""
    out = f"{{ table: target, strategy: {strategy}{keys} }}"
    files_strategy = "replace" if strategy == "merge" else strategy  # localfiles has no merge
    write_project(
        root,
        {
            "project.yml": "name: crash\nengine: { threads: 1, retry: { max_attempts: 1 } }\n",
            "sources/files.yml": """
                connector: localfiles
                connection: { root: data }
                datasets:
                  names: { format: csv, path: names.csv, columns: { id: bigint, name: varchar } }
                  amounts: { format: csv, path: amounts.csv, columns: { id: bigint, amount: bigint } }
            """,
            "sinks/dk.yml": "connector: duckdb\nconnection: { path: out/dk.duckdb }\n"
            f"outputs:\n  out: {out}\n",
            "sinks/fs.yml": "connector: localfiles\nconnection: { root: out/fs }\n"
            f"outputs:\n  out: {{ format: parquet, strategy: {files_strategy} }}\n",
            "sinks/my.yml": f"""
                connector: mysql
                connection: {{ host: 127.0.0.1, port: 3306, user: root, password: "", database: {my_db} }}
                outputs:
                  out: {out}
            """,
            "sinks/pg.yml": f"""
                connector: postgres
                connection: {{ host: {PG_HOST}, port: {PG_PORT}, user: {PG_USER}, database: {pg_db} }}
                outputs:
                  out: {{ table: public.target, strategy: {strategy}{keys} }}
            """,
            "pipelines/joined.sql": """
                INSERT INTO {{ sink('dk', 'out') }}
                INSERT INTO {{ sink('fs', 'out') }}
                INSERT INTO {{ sink('my', 'out') }}
                INSERT INTO {{ sink('pg', 'out') }}
                SELECT n.id, n.name, a.amount
                FROM {{ source('files', 'names') }} AS n JOIN {{ source('files', 'amounts') }} AS a USING (id)
            """,
            **_data(V1),
        },
    )


def _targets(root: Path, pg_db: str, my_db: str) -> dict[str, list[tuple[Any, ...]]]:
    query = "SELECT id, name, amount FROM {} ORDER BY id, name"
    with duckdb.connect(str(root / "out" / "dk.duckdb"), read_only=True) as con:
        dk = con.execute(query.format("target")).fetchall()
    with duckdb.connect() as con:
        fs = con.execute(
            query.format(f"read_parquet('{root / 'out' / 'fs' / 'out.parquet'}/*.parquet')")
        ).fetchall()
    my_con = pymysql.connect(host="127.0.0.1", user="root", password="", database=my_db)
    try:
        with my_con.cursor() as cur:
            cur.execute(query.format("target"))
            my = list(cur.fetchall())
    finally:
        my_con.close()
    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=pg_db) as con:
        pg = con.execute(query.format("public.target")).fetchall()  # type: ignore[arg-type]
    return {
        name: [(int(i), str(n), int(a)) for i, n, a in rows]
        for name, rows in {"dk": dk, "fs": fs, "my": my, "pg": pg}.items()
    }


def _rows(data: dict[int, tuple[str, int]]) -> list[tuple[int, str, int]]:
    return sorted((i, n, a) for i, (n, a) in data.items())


def _expected(strategy: str, sink: str) -> list[tuple[int, str, int]]:
    if strategy == "merge" and sink != "fs":
        return _rows({**V1, **V2})
    return _rows(V2)


KILLS = [
    pytest.param("source.landed@src_files__amounts:kill", id="during-extraction"),
    pytest.param("pipeline.start:kill", id="after-staging"),
    *[pytest.param(f"sink.before_swap@{s}.out:kill", id=f"mid-replace-{s}") for s in SINKS],
    pytest.param("sink.committed@dk.out:kill", id="between-two-sink-commits"),
    pytest.param("results.before_rename@1:kill", id="first-run-results-write"),
    pytest.param("results.before_rename@6:kill", id="a-later-run-results-write"),
]
MERGE_KILLS = [
    *[pytest.param(f"sink.before_merge@{s}.out:kill", id=f"mid-merge-{s}") for s in ("dk", "my", "pg")],
    pytest.param("sink.committed@my.out:kill", id="between-two-sink-commits"),
]


@pytest.fixture
def databases() -> Iterator[tuple[str, str]]:
    with fresh_pg_database() as pg_db, _mariadb() as my_db:
        yield pg_db, my_db


def _crash_then_rerun(project: Path, pg_db: str, my_db: str, strategy: str, failpoint: str) -> None:
    _project(project, pg_db, my_db, strategy)
    assert pz(project, "run").exit_code == 0
    write_project(project, _data(V2))
    runs_before = sorted((project / ".pz" / "runs").iterdir())
    killed = pz_subprocess(project, "run", env={"PZ_FAILPOINTS": failpoint})
    assert killed.exit_code == 137, killed.output
    run = sorted((project / ".pz" / "runs").iterdir())[-1]
    assert run not in runs_before
    record = run / "run_results.json"
    if failpoint.startswith("results.before_rename@1"):
        assert not record.exists()
    else:
        assert json.loads(record.read_text())["status"] == "running"  # readable, never half written
    before_retry = _targets(project, pg_db, my_db)
    v1 = _rows(V1)
    for sink in SINKS:  # right after the kill: each target holds one clean result, never a partial write
        assert before_retry[sink] in (v1, _expected(strategy, sink)), (sink, before_retry[sink])
    if failpoint.startswith(("source.", "pipeline.")):
        assert before_retry == {s: v1 for s in SINKS}
    elif failpoint.startswith("sink."):
        seam, killed = failpoint.split(":")[0].split("@")
        killed_sink = killed.split(".")[0]
        committed = [s for s in SINKS if s < killed_sink or (s == killed_sink and seam == "sink.committed")]
        assert before_retry == {s: _expected(strategy, s) if s in committed else v1 for s in SINKS}
    retry = pz(project, "retry")
    assert retry.exit_code == 2 and "PZ0503" in retry.lines[0], retry.output
    assert _targets(project, pg_db, my_db) == before_retry
    rerun = pz(project, "run")
    assert rerun.exit_code == 0, rerun.output
    found = _targets(project, pg_db, my_db)
    assert found == {s: _expected(strategy, s) for s in SINKS}


@pytest.mark.parametrize("failpoint", KILLS)
def test_kill_then_retry_replace(project_dir: Path, databases: tuple[str, str], failpoint: str) -> None:
    _crash_then_rerun(project_dir, *databases, "replace", failpoint)


@pytest.mark.parametrize("failpoint", MERGE_KILLS)
def test_kill_then_retry_merge(project_dir: Path, databases: tuple[str, str], failpoint: str) -> None:
    _crash_then_rerun(project_dir, *databases, "merge", failpoint)


@pytest.mark.parametrize("sink", ["my", "pg"])
def test_a_killed_append_is_at_least_once(project_dir: Path, databases: tuple[str, str], sink: str) -> None:
    pg_db, my_db = databases
    _project(project_dir, pg_db, my_db, "append")
    write_project(project_dir, _data(V2))
    killed = pz_subprocess(project_dir, "run", env={"PZ_FAILPOINTS": f"sink.after_batch@{sink}.out:kill"})
    assert killed.exit_code == 137
    assert pz(project_dir, "retry").exit_code == 2
    assert pz(project_dir, "run").exit_code == 0
    found = _targets(project_dir, pg_db, my_db)
    # sinks are written in name order: those up to the killed one committed in the killed run, and the rerun
    # appends everything again (duplicates); those after it were written once
    assert found == {s: sorted(_rows(V2) * (2 if s <= sink else 1)) for s in SINKS}


def test_a_killed_retry_is_refused_and_a_run_finishes_the_job(
    project_dir: Path, databases: tuple[str, str]
) -> None:
    pg_db, my_db = databases
    _project(project_dir, pg_db, my_db, "merge")
    assert pz(project_dir, "run").exit_code == 0
    write_project(project_dir, _data(V2))
    assert pz(project_dir, "run", env={"PZ_FAILPOINTS": "sink.write@pg.out"}).exit_code == 1
    killed = pz_subprocess(project_dir, "retry", env={"PZ_FAILPOINTS": "sink.before_merge@pg.out:kill"})
    assert killed.exit_code == 137
    retry = pz(project_dir, "retry")
    assert retry.exit_code == 2 and "PZ0503" in retry.lines[0]
    assert pz(project_dir, "run").exit_code == 0
    assert _targets(project_dir, pg_db, my_db) == {s: _expected("merge", s) for s in SINKS}
