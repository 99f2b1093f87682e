"""Partitioned source loads: `pz run` on a table split into K partitions
(`partitions: { column: id, count: K }`) with the instance's max_concurrency, PostgreSQL native and universal
tier and MariaDB, each against a plain reference doing the same work in one process: the same K ranges read
one after another into K DuckDB tables and combined (PostgreSQL: DuckDB's postgres extension, one ATTACH,
`postgres_query` per range; MariaDB: ConnectorX per range), and beside it the whole table read once
by the same plain tool.

Every run is its own child process (peak RSS and CPU seconds, user + system, from os.wait4: on a loaded
machine CPU seconds say what the work costs better than wall time). Runs alternate, pz then reference,
`--pairs` times; the ratio is pz's wall time over its paired reference's, median over pairs.

    .venv/bin/python benchmarks/bench_partitions.py --rows 10000 --counts 256,1024 --pairs 3

The tables pz_bench.parts_<rows> (PostgreSQL database `test`, MariaDB database `pz_bench`) are created once
and reused; remove them with `DROP SCHEMA pz_bench CASCADE` / `DROP DATABASE pz_bench`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_postgres import DATA, SCHEMA, Conn
from pz_command import pz_command

CPU = [0.0]  # CPU seconds (user + system) of the last child process timed


def timed(cmd: list[str], cwd: Path) -> tuple[float, int, str]:
    """(seconds, peak RSS in MiB, stdout) of one child process; its CPU seconds in CPU[0]."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{stdout}\n{stderr[-4000:]}")
    CPU[0] = usage.ru_utime + usage.ru_stime
    return elapsed, usage.ru_maxrss // 1024, stdout


SYSTEMS = ("pg-native", "pg-universal", "mysql")


def ensure_pg_table(conn: Conn, rows: int) -> str:
    import psycopg

    table = f"parts_{rows}"
    with psycopg.connect(conn.libpq(), autocommit=True) as con:
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        found = con.execute("SELECT to_regclass(%s) IS NOT NULL", [f"{SCHEMA}.{table}"]).fetchone()
        if not (found and found[0]):
            con.execute(f"CREATE TABLE {SCHEMA}.{table} (id bigint PRIMARY KEY, v text, n numeric(10,2))")
            con.execute(
                f"INSERT INTO {SCHEMA}.{table} "
                f"SELECT i, 'v' || i, i / 100.0 FROM generate_series(1, {rows}) i"
            )
            con.execute(f"VACUUM (FREEZE, ANALYZE) {SCHEMA}.{table}")
    return table


def ensure_my_table(rows: int, host: str, port: int) -> str:
    import pymysql

    table = f"parts_{rows}"
    con = pymysql.connect(host=host, port=port, user="root", autocommit=True)
    try:
        with con.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {SCHEMA}")
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {SCHEMA}.{table} "
                "(id BIGINT PRIMARY KEY, v VARCHAR(32), n DECIMAL(10,2))"
            )
            cur.execute(f"SELECT count(*) FROM {SCHEMA}.{table}")
            row = cur.fetchone()
            if not row or row[0] != rows:
                cur.execute(f"DELETE FROM {SCHEMA}.{table}")
                cur.execute(
                    f"INSERT INTO {SCHEMA}.{table} SELECT seq, CONCAT('v', seq), seq / 100 "
                    f"FROM {SCHEMA}.seq_1_to_{rows}"
                )
                cur.execute(f"ANALYZE TABLE {SCHEMA}.{table}")
    finally:
        con.close()
    return table


def write_project(
    root: Path, system: str, conn: Conn, my: tuple[str, int], table: str, count: int, conc: int
) -> None:
    if root.exists():
        shutil.rmtree(root)
    universal = system == "pg-universal"
    if system == "mysql":
        source = f"""
            connector: mysql
            connection: {{ host: {my[0]}, port: {my[1]}, database: {SCHEMA}, user: root }}
            max_concurrency: {conc}
            datasets:
              parts: {{ table: {table}, partitions: {{ column: id, count: {count} }} }}
        """
    else:
        source = f"""
            connector: postgres
            connection: {{ host: {conn.host}, port: {conn.port}, database: {conn.database},
                          user: {conn.user} }}
            max_concurrency: {conc}
            datasets:
              parts: {{ table: {SCHEMA}.{table}, partitions: {{ column: id, count: {count} }} }}
        """
    files = {
        "project.yml": f"name: bench_parts\nretention: {{ keep_last: 1 }}\n"
        f"engine: {{ force_universal: {str(universal).lower()} }}\n",
        "sources/src.yml": source,
        "pipelines/counted.sql": "SELECT count(*) AS n FROM {{ source('src', 'parts') }}\n",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def edges(rows: int, count: int) -> list[tuple[int, int]]:
    """The K [lower, upper) id ranges over 1..rows, as pz splits an integer column."""
    cuts = [1 + (rows * i) // count for i in range(count)] + [rows + 1]
    return [(cuts[i], cuts[i + 1]) for i in range(count)]


REFERENCE = r"""
import json, sys, time
import duckdb
system, path, target, table, rows, count, mode = sys.argv[1:8]
rows, count = int(rows), int(count)
cuts = [1 + (rows * i) // count for i in range(count)] + [rows + 1]
ranges = [(cuts[i], cuts[i + 1]) for i in range(count)]
con = duckdb.connect(path)
start = time.perf_counter()
if system == "mysql":
    import connectorx as cx
    if mode == "whole":
        t = cx.read_sql(target, f"SELECT * FROM {table}", return_type="arrow")
        con.execute("CREATE TABLE whole AS SELECT * FROM t")
    else:
        for i, (lo, hi) in enumerate(ranges):
            q = f"SELECT * FROM {table} WHERE id >= {lo} AND id < {hi}"
            t = cx.read_sql(target, q, return_type="arrow")
            con.execute(f"CREATE TABLE p{i} AS SELECT * FROM t")
else:
    import duckdb_extension_postgres_scanner as pkg, glob, os
    folder = os.path.join(os.path.dirname(pkg.__file__), "extensions")
    ext = sorted(glob.glob(os.path.join(folder, "*", "*.duckdb_extension")))[-1]
    con.execute(f"LOAD '{ext}'")
    con.execute(f"ATTACH '{target}' AS pg (TYPE postgres, READ_ONLY)")
    if mode == "whole":
        con.execute(f"CREATE TABLE whole AS SELECT * FROM pg.{table}")
    else:
        for i, (lo, hi) in enumerate(ranges):
            q = f"SELECT * FROM {table} WHERE id >= {lo} AND id < {hi}"
            con.execute(f"CREATE TABLE p{i} AS SELECT * FROM postgres_query('pg', '{q}')")
if mode != "whole":
    con.execute("CREATE TABLE whole AS SELECT * FROM p0")
    for i in range(1, count):
        con.execute(f"INSERT INTO whole SELECT * FROM p{i}")
n = con.execute("SELECT count(*) FROM whole").fetchone()[0]
print(json.dumps({"seconds": time.perf_counter() - start, "rows": n}))
"""


def run_pz(project: Path) -> tuple[float, int, float, int, float]:
    """(wall s, peak RSS MiB, load node s, rows, CPU s) of one `pz run`."""
    wall, rss, _ = timed([*pz_command(), "-p", str(project), "run"], DATA)
    run = sorted((project / ".pz" / "runs").iterdir())[-1]
    nodes = json.loads((run / "run_results.json").read_text())["nodes"]
    node = next(n for n in nodes if n["name"] == "src_src__parts")
    return wall, rss, node["duration_ms"] / 1000, int(node["rows"]), CPU[0]


def run_reference(
    system: str, target: str, table: str, rows: int, count: int, mode: str
) -> tuple[float, int, float]:
    path = DATA / "parts_reference.duckdb"
    for leftover in (path, Path(f"{path}.wal")):
        leftover.unlink(missing_ok=True)
    wall, rss, out = timed(
        [sys.executable, "-c", REFERENCE, system, str(path), target, table, str(rows), str(count), mode], DATA
    )
    assert json.loads(out.strip().splitlines()[-1])["rows"] == rows, out
    return wall, rss, CPU[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--counts", default="256,1024")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--pg-host", default="127.0.0.1")
    parser.add_argument("--pg-port", type=int, default=5432)
    parser.add_argument("--pg-database", default="test")
    parser.add_argument("--my-host", default="127.0.0.1")
    parser.add_argument("--my-port", type=int, default=3306)
    args = parser.parse_args()
    conn = Conn(args.pg_host, args.pg_port, "postgres", args.pg_database)
    systems = args.systems.split(",")
    pg_table = ensure_pg_table(conn, args.rows) if any(s.startswith("pg") for s in systems) else ""
    my_table = ensure_my_table(args.rows, args.my_host, args.my_port) if "mysql" in systems else ""
    DATA.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(
        f"{args.rows:,} rows, max_concurrency {args.concurrency}, {args.pairs} pair(s); "
        f"load average at start {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores"
    )
    head = (
        f"{'partitions':>10} {'system':<13} {'pz wall s':>9} {'load s':>7} {'ref K s':>8} {'pz/ref':>7} "
        f"{'ref whole s':>11} {'pz cpu s':>8} {'ref cpu s':>9} {'pz RSS':>7} {'ref RSS':>8}"
    )
    print(head)
    print("-" * len(head))
    for count in (int(c) for c in args.counts.split(",")):
        for system in systems:
            table = my_table if system == "mysql" else f"{SCHEMA}.{pg_table}"
            target = (
                f"mysql://root@{args.my_host}:{args.my_port}/{SCHEMA}" if system == "mysql" else conn.libpq()
            )
            project = DATA / f"parts_project_{system}_{count}"
            bare = my_table if system == "mysql" else pg_table
            write_project(project, system, conn, (args.my_host, args.my_port), bare, count, args.concurrency)
            pz_runs, ref_runs, ratios = [], [], []
            for _ in range(args.pairs):
                pz = run_pz(project)
                assert pz[3] == args.rows, pz
                ref = run_reference(system, target, table, args.rows, count, "ranges")
                pz_runs.append(pz)
                ref_runs.append(ref)
                ratios.append(pz[0] / ref[0])
            whole = run_reference(system, target, table, args.rows, count, "whole")
            print(
                f"{count:>10} {system:<13} {statistics.median(r[0] for r in pz_runs):>9.2f} "
                f"{statistics.median(r[2] for r in pz_runs):>7.2f} "
                f"{statistics.median(r[0] for r in ref_runs):>8.2f} {statistics.median(ratios):>7.2f} "
                f"{whole[0]:>11.2f} {statistics.median(r[4] for r in pz_runs):>8.2f} "
                f"{statistics.median(r[2] for r in ref_runs):>9.2f} "
                f"{max(r[1] for r in pz_runs):>7} {max(r[1] for r in ref_runs):>8}",
                flush=True,
            )
            shutil.rmtree(project)
    load = os.getloadavg()
    print(f"load average at end {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")


if __name__ == "__main__":
    main()
