"""End-to-end benchmark: a whole `pz run` of PostgreSQL table → one pipeline (`SELECT *`) → a sink, against
the plain tool doing the same move, each as its own child process (wall time and peak RSS from os.wait4).
Runs alternate (R A R B …) because machine speed drifts; a tool's ratio is its time over the mean of the
reference runs before and after it, and the median over rounds is reported.

Targets and their references:
- duckdb: a DuckDB file; reference: plain DuckDB `CREATE TABLE AS SELECT * FROM postgres_scan(…)`.
- postgres: a table in another PostgreSQL database; reference: `psql \\copy (…) TO STDOUT (FORMAT binary)`
  piped into `psql … COPY … FROM STDIN (FORMAT binary)`.
- mariadb: a table in MariaDB; reference: `psql \\copy … TO STDOUT (FORMAT csv)` piped into the mysql client's
  `LOAD DATA LOCAL INFILE '/dev/stdin'`.

    .venv/bin/python benchmarks/bench_e2e.py --rows 10000000 --rounds 2 --targets duckdb,postgres,mariadb
    .venv/bin/python benchmarks/bench_e2e.py --rss-sweep 1000000,10000000,30000000 --targets duckdb
    .venv/bin/python benchmarks/bench_e2e.py --rss-sweep 1000000,10000000 --targets duckdb --memory-limit 64MB

The source table pz_bench.orders_<N> (see bench_postgres.py) is created once and reused.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_postgres import DATA, SCHEMA, Conn, ensure_table, extension_path, timed
from pz_command import pz_command

SINK_DB = "pz_bench_sink"  # the PostgreSQL database the postgres target writes into
MARIA_DB = "pz_bench"
TARGETS = ("duckdb", "postgres", "mariadb")
COPY_OUT = "\\copy ({select}) TO STDOUT (FORMAT {fmt})"  # psql's client-side COPY


@dataclass
class Run:
    wall_s: float
    rss_mib: int


@dataclass
class Series:
    runs: list[Run] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)


def _psql(conn: Conn, database: str) -> str:
    return f"psql -X -q -v ON_ERROR_STOP=1 -h {conn.host} -p {conn.port} -U {conn.user} -d {database}"


def prepare_targets(conn: Conn, targets: list[str]) -> None:
    import psycopg
    import pymysql

    if "postgres" in targets:
        with psycopg.connect(conn.libpq(), autocommit=True) as con:
            found = con.execute("SELECT 1 FROM pg_database WHERE datname = %s", [SINK_DB]).fetchone()
            if not found:
                con.execute(f"CREATE DATABASE {SINK_DB}")
    if "mariadb" in targets:
        my = pymysql.connect(host="127.0.0.1", user="root", password="", autocommit=True)
        with my.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {MARIA_DB}")
        my.close()


# -- references: one shell command each --------------------------------------------------------------------
def reference_command(conn: Conn, target: str, table: str, out: Path) -> list[str]:
    source = f"{SCHEMA}.{table}"
    if target == "duckdb":
        script = (
            "import duckdb, sys; con = duckdb.connect(sys.argv[1]); "
            f"con.execute(\"LOAD '{extension_path()}'\"); "
            f"con.execute(\"CREATE OR REPLACE TABLE t AS SELECT * FROM postgres_scan('{conn.libpq()}', "
            f"'{SCHEMA}', '{table}')\"); con.close()"
        )
        return [sys.executable, "-c", script, str(out)]
    if target == "postgres":
        create = (
            "DROP TABLE IF EXISTS ref_orders; CREATE TABLE ref_orders (id bigint, customer_id bigint, "
            "customer text, amount numeric(12,2), quantity bigint, status text, placed_at timestamptz, "
            "ship_date date, is_paid boolean, note text);"
        )
        export = COPY_OUT.format(select=f"SELECT * FROM {source}", fmt="binary")
        pipe = (
            f"{_psql(conn, SINK_DB)} -c {_q(create)} && {_psql(conn, conn.database)} -c {_q(export)} | "
            f"{_psql(conn, SINK_DB)} -c {_q('COPY ref_orders FROM STDIN (FORMAT binary)')}"
        )
        return ["bash", "-o", "pipefail", "-c", pipe]
    create = (
        "DROP TABLE IF EXISTS ref_orders; CREATE TABLE ref_orders (id BIGINT, customer_id BIGINT, "
        "customer TEXT, amount DECIMAL(12,2), quantity BIGINT, status TEXT, placed_at DATETIME(6), "
        "ship_date DATE, is_paid TINYINT, note TEXT)"
    )
    select = (
        "SELECT id, customer_id, customer, amount, quantity, status, placed_at AT TIME ZONE 'UTC', "
        "ship_date, "
        f"is_paid::int, note FROM {source}"
    )
    load = (
        "LOAD DATA LOCAL INFILE '/dev/stdin' INTO TABLE ref_orders FIELDS TERMINATED BY ',' "
        "OPTIONALLY ENCLOSED BY '\"' (id, customer_id, customer, amount, quantity, status, placed_at, "
        "ship_date, is_paid, @note) SET note = NULLIF(@note, '')"
    )
    mysql = f"mysql --local-infile=1 -h 127.0.0.1 -u root {MARIA_DB}"
    export = COPY_OUT.format(select=select, fmt="csv")
    pipe = f"{mysql} -e {_q(create)} && {_psql(conn, conn.database)} -c {_q(export)} | {mysql} -e {_q(load)}"
    return ["bash", "-o", "pipefail", "-c", pipe]


def _q(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


# -- pz projects --------------------------------------------------------------------------------------
def sink_yaml(conn: Conn, target: str, out: Path) -> str:
    if target == "duckdb":
        return f"connector: duckdb\nconnection: {{ path: {out} }}\n"
    if target == "postgres":
        return (
            f"connector: postgres\nconnection: {{ host: {conn.host}, port: {conn.port}, database: {SINK_DB}, "
            f"user: {conn.user} }}\noutputs:\n  orders_copy: {{ table: public.pz_orders }}\n"
        )
    return (
        f"connector: mysql\nconnection: {{ host: 127.0.0.1, port: 3306, user: root, password: '', "
        f"database: {MARIA_DB} }}\noutputs:\n  orders_copy: {{ table: pz_orders }}\n"
    )


def write_project(
    root: Path,
    conn: Conn,
    table: str,
    target: str,
    universal: bool,
    out: Path,
    memory_limit: str | None = None,
) -> None:
    if root.exists():
        shutil.rmtree(root)
    limit = f", memory_limit: {memory_limit}" if memory_limit else ""
    files = {
        "project.yml": f"name: bench_e2e\nretention: {{ keep_last: 1 }}\n"
        f"engine: {{ force_universal: {str(universal).lower()}{limit} }}\n",
        "sources/pg.yml": f"""
            connector: postgres
            connection: {{ host: {conn.host}, port: {conn.port}, database: {conn.database},
                          user: {conn.user} }}
            datasets:
              orders: {{ table: {SCHEMA}.{table} }}
        """,
        "sinks/wh.yml": sink_yaml(conn, target, out),
        "pipelines/orders_copy.sql": """
            INSERT INTO {{ sink('wh', 'orders_copy') }}
            SELECT * FROM {{ source('pg', 'orders') }}
        """,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def pz_rows(project: Path) -> int:
    run = sorted((project / ".pz" / "runs").iterdir())[-1]
    results = json.loads((run / "run_results.json").read_text())
    node = next(n for n in results["nodes"] if n["name"] == "wh.orders_copy")
    if node["status"] != "success":
        raise SystemExit(f"pz run in {project}: {node['status']}: {node.get('error')}")
    return int(node["rows"])


def run_pz(project: Path, rows: int) -> Run:
    wall, rss, _ = timed([*pz_command(), "-p", str(project), "run"], DATA)
    got = pz_rows(project)
    if got != rows:
        raise SystemExit(f"{project}: wrote {got} rows, expected {rows}")
    return Run(wall, rss)


def run_reference(conn: Conn, target: str, table: str) -> Run:
    out = DATA / "e2e_reference.duckdb"
    for stale in (out, out.with_suffix(".duckdb.wal")):
        stale.unlink(missing_ok=True)
    wall, rss, _ = timed(reference_command(conn, target, table, out), DATA)
    return Run(wall, rss)


def measure(
    conn: Conn, rows: int, rounds: int, target: str, tiers: list[str], memory_limit: str | None = None
) -> dict[str, Series]:
    table = ensure_table(conn, rows)
    projects = {}
    for tier in tiers:
        out = DATA / f"e2e_{target}_{tier}.duckdb"
        projects[tier] = DATA / f"e2e_project_{target}_{tier}"
        write_project(projects[tier], conn, table, target, tier == "universal", out, memory_limit)
    series = {name: Series() for name in ["reference", *tiers]}
    ref = run_reference(conn, target, table)
    series["reference"].runs.append(ref)
    for index in range(rounds):
        for tier in tiers:
            mine = run_pz(projects[tier], rows)
            after = run_reference(conn, target, table)
            series[tier].runs.append(mine)
            series[tier].ratios.append(mine.wall_s / ((ref.wall_s + after.wall_s) / 2))
            series["reference"].runs.append(after)
            ref = after
            print(
                f"  {target} round {index + 1}: pz {tier:<9} {mine.wall_s:7.2f}s ratio "
                f"{series[tier].ratios[-1]:5.2f} {mine.rss_mib:>5} MiB (reference {after.wall_s:6.2f}s "
                f"{after.rss_mib} MiB)",
                flush=True,
            )
    return series


def print_table(rows: int, rounds: int, results: dict[str, dict[str, Series]]) -> None:
    print(f"\n{rows:,} rows PostgreSQL → pipeline → sink, whole processes, {rounds} alternating round(s)")
    head = f"{'target':<9} {'run':<22} {'median s':>9} {'ratio':>6} {'rows/s':>11} {'peak RSS MiB':>13}"
    print(head)
    print("-" * len(head))
    for target, series in results.items():
        for name, data in series.items():
            median = statistics.median(r.wall_s for r in data.runs)
            ratio = f"{statistics.median(data.ratios):6.2f}" if data.ratios else "     -"
            label = "reference (plain tool)" if name == "reference" else f"pz run {name}"
            rss = max(r.rss_mib for r in data.runs)
            print(f"{target:<9} {label:<22} {median:>9.2f} {ratio} {rows / median:>11,.0f} {rss:>13}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--tiers", default="native,universal")
    parser.add_argument("--rss-sweep", help="comma-separated row counts: peak RSS of pz per target and tier")
    parser.add_argument(
        "--memory-limit",
        help="engine.memory_limit of pz's project (default: pz's own budget, 320MB or a quarter of RAM)",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5432)
    parser.add_argument("--user", default="postgres")
    parser.add_argument("--database", default="test")
    args = parser.parse_args()
    conn = Conn(args.host, args.port, args.user, args.database)
    DATA.mkdir(parents=True, exist_ok=True)
    targets = [t for t in args.targets.split(",") if t]
    tiers = [t for t in args.tiers.split(",") if t]
    prepare_targets(conn, targets)
    if args.rss_sweep:
        counts = [int(c.replace("_", "")) for c in args.rss_sweep.split(",") if c]
        settings = f"engine.memory_limit {args.memory_limit}" if args.memory_limit else "default settings"
        print(f"\nPeak RSS of `pz run` by rows (MiB; wall seconds in brackets), {settings}")
        head = f"{'rows':>12} " + " ".join(f"{f'{t} {tier}':>24}" for t in targets for tier in tiers)
        lines = []
        for rows in counts:
            table = ensure_table(conn, rows)
            cells = []
            for target in targets:
                for tier in tiers:
                    project = DATA / f"e2e_sweep_{target}_{tier}"
                    out = DATA / f"e2e_sweep_{target}.duckdb"
                    write_project(project, conn, table, target, tier == "universal", out, args.memory_limit)
                    run = run_pz(project, rows)
                    cells.append(f"{run.rss_mib:>6} ({run.wall_s:7.1f}s)")
                    print(f"  {rows:,} {target} {tier}: {run.rss_mib} MiB {run.wall_s:.1f}s", flush=True)
            lines.append(f"{rows:>12,} " + " ".join(f"{c:>24}" for c in cells))
        print(head)
        print("-" * len(head))
        print("\n".join(lines))
        return
    results = {
        target: measure(conn, args.rows, args.rounds, target, tiers, args.memory_limit) for target in targets
    }
    print_table(args.rows, args.rounds, results)


if __name__ == "__main__":
    main()
