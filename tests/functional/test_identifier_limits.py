"""Table names past a server's identifier limit are refused at validate (PZ0304): PostgreSQL would cut them
to 63 bytes (so two outputs differing after byte 63 wrote one table, both `ok`), MySQL refused them only when
the write ran. Names at the limit work, also for the work tables pz derives from them (shortened with a
hash, never colliding)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pymysql
import pytest

from tests.conftest import PG_HOST, PG_PORT, PG_USER, fresh_pg_database, pz, write_project

pytestmark = [pytest.mark.postgres, pytest.mark.mysql]

HEAD = "orders_" + "x" * 56  # 63 bytes: PostgreSQL's limit
PG = f"connection: {{ host: {PG_HOST}, port: {PG_PORT}, user: {PG_USER}, database: DB }}\n"
MY = "connection: { host: 127.0.0.1, port: 3306, user: root, password: '', database: DB }\n"


@pytest.fixture
def mariadb() -> Iterator[str]:
    name = f"pz_limits_{secrets.token_hex(4)}"
    con = pymysql.connect(host="127.0.0.1", user="root", password="", autocommit=True)
    try:
        with con.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        yield name
    finally:
        with con.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        con.close()


def _writes(*outputs: str) -> dict[str, str]:
    return {
        f"pipelines/w{i}.sql": f"INSERT INTO {{{{ sink('{sink}', '{output}') }}}}\nSELECT {i} AS id\n"
        for i, (sink, output) in enumerate(o.split(".", 1) for o in outputs)
    }


def test_names_past_the_limit_are_refused_at_validate_and_cut_names_clash(tmp_path: Path) -> None:
    long_a, long_b = HEAD + "_a", HEAD + "_b"  # differ after byte 63: one table on the server
    accents = "é" * 32  # 32 characters, 64 bytes
    files = {
        "project.yml": "name: limits\n",
        "sinks/pg.yml": "connector: postgres\n"
        + PG.replace("DB", "test")
        + f"outputs:\n  declared: {{ table: public.{accents} }}\n  {HEAD}_unwritten: {{}}\n",
        "sinks/my.yml": "connector: mysql\n" + MY.replace("DB", "test"),
        **_writes(f"pg.{long_a}", f"pg.{long_b}", "pg.declared", f"my.{'m' * 65}", f"my.{'n' * 64}"),
    }
    result = pz(write_project(tmp_path / "proj", files), "validate")
    assert result.exit_code == 2, result.output
    refused = [line for line in result.lines if "PZ0304" in line]
    assert len(refused) == 5, result.output
    for output in (long_a, long_b):
        line = next(line for line in refused if f"output '{output}'" in line)
        assert "(65 bytes) is longer than PostgreSQL's 63 bytes (the server would cut it" in line, line
        assert line.startswith("error: PZ0304 pipelines/w"), line  # at the pipeline's sink() call
    declared = next(line for line in refused if "output 'declared'" in line)
    assert declared.startswith("error: PZ0304 sinks/pg.yml:4:15:"), declared  # at its table: key
    assert "(64 bytes) is longer than PostgreSQL's 63 bytes" in declared, declared
    unwritten = next(line for line in refused if "_unwritten'" in line)  # declared, named after itself
    assert unwritten.startswith("error: PZ0304 sinks/pg.yml:5:3:"), unwritten
    mysql = next(line for line in refused if "sink 'my'" in line)
    assert f"output '{'m' * 65}'" in mysql and "is longer than MySQL's 64 characters" in mysql, mysql
    clash = [line for line in result.lines if "PZ0228" in line]
    assert len(clash) == 1 and f"'pg.{long_a}'" in clash[0] and f"'pg.{long_b}'" in clash[0], result.output
    assert f"both write table public.{HEAD} in database test" in clash[0], clash
    assert not any(f"'{HEAD}'" in line or "n" * 64 in line for line in refused + clash), result.output


def test_names_at_the_limit_replace_and_merge_through_their_work_tables(tmp_path: Path, mariadb: str) -> None:
    """63-byte (PostgreSQL) and 64-character (MySQL) names: the work tables pz derives from them are cut and
    hashed to fit, and a second write replaces and merges into the same tables."""
    at_limit_my = "m" * 64
    with fresh_pg_database() as database:
        files = {
            "project.yml": "name: limits\n",
            "sinks/pg.yml": "connector: postgres\n"
            + PG.replace("DB", database)
            + f"outputs:\n  merged: {{ table: {HEAD}_m, strategy: merge, keys: [id] }}\n".replace(
                f"{HEAD}_m", HEAD[:-2] + "_m"
            ),
            "sinks/my.yml": "connector: mysql\n"
            + MY.replace("DB", mariadb)
            + f"outputs:\n  merged: {{ table: {at_limit_my[:-2]}_m, strategy: merge, keys: [id] }}\n",
            **_writes(f"pg.{HEAD}", "pg.merged", f"my.{at_limit_my}", "my.merged"),
        }
        project = write_project(tmp_path / "proj", files)
        for _ in range(2):
            result = pz(project, "run")
            assert result.exit_code == 0, result.output
        with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=database) as con:
            tables = [
                r[0] for r in con.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            ]
            assert sorted(tables) == sorted([HEAD, HEAD[:-2] + "_m"]), tables
    con = pymysql.connect(host="127.0.0.1", user="root", password="", database=mariadb)
    try:
        with con.cursor() as cur:
            cur.execute("SHOW TABLES")
            assert sorted(r[0] for r in cur.fetchall()) == sorted([at_limit_my, at_limit_my[:-2] + "_m"])
    finally:
        con.close()
