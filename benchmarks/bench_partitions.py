"""Partitioned source loads: `pz run` on a PostgreSQL table split into K partitions
(`partitions: { column: id, count: K }`), whole process, native and universal tier, with the instance's
max_concurrency. Prints wall time, the source load node's time and peak RSS per K.

    .venv/bin/python benchmarks/bench_partitions.py --rows 10000 --counts 1,64,1024 --concurrency 4

The table pz_bench.parts_<rows> is created once and reused; remove it with `DROP SCHEMA pz_bench CASCADE`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_postgres import DATA, SCHEMA, Conn, timed

NODE = "src_pg__parts"


def ensure_table(conn: Conn, rows: int) -> str:
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


def write_project(root: Path, conn: Conn, table: str, count: int, universal: bool, concurrency: int) -> None:
    if root.exists():
        shutil.rmtree(root)
    files = {
        "project.yml": f"name: bench_parts\nretention: {{ keep_last: 1 }}\n"
        f"engine: {{ force_universal: {str(universal).lower()} }}\n",
        "sources/pg.yml": f"""
            connector: postgres
            connection: {{ host: {conn.host}, port: {conn.port}, database: {conn.database},
                          user: {conn.user} }}
            max_concurrency: {concurrency}
            datasets:
              parts: {{ table: {SCHEMA}.{table}, partitions: {{ column: id, count: {count} }} }}
        """,
        "pipelines/counted.sql": "SELECT count(*) AS n FROM {{ source('pg', 'parts') }}\n",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--counts", default="1,64,1024")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--tiers", default="native,universal")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5432)
    parser.add_argument("--user", default="postgres")
    parser.add_argument("--database", default="test")
    args = parser.parse_args()
    conn = Conn(args.host, args.port, args.user, args.database)
    table = ensure_table(conn, args.rows)
    DATA.mkdir(parents=True, exist_ok=True)
    print(f"{args.rows:,} rows, max_concurrency {args.concurrency}")
    head = f"{'partitions':>10} {'tier':<10} {'wall s':>7} {'load s':>7} {'parts':>6} {'peak RSS MiB':>13}"
    print(head)
    print("-" * len(head))
    for count in (int(c) for c in args.counts.split(",")):
        for tier in args.tiers.split(","):
            project = DATA / f"parts_project_{tier}_{count}"
            write_project(project, conn, table, count, tier == "universal", args.concurrency)
            wall, rss, _ = timed(
                [sys.executable, "-m", "pipelinez.cli.main", "-p", str(project), "run"], DATA
            )
            run = sorted((project / ".pz" / "runs").iterdir())[-1]
            node = next(
                n for n in json.loads((run / "run_results.json").read_text())["nodes"] if n["name"] == NODE
            )
            assert node["rows"] == args.rows, node
            parts = len(node.get("partitions") or []) or 1
            print(
                f"{count:>10} {tier:<10} {wall:>7.2f} {node['duration_ms'] / 1000:>7.2f} {parts:>6} {rss:>13}"
            )
            shutil.rmtree(project)


if __name__ == "__main__":
    main()
