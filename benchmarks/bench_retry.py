"""`pz retry` benchmark: the retry article's scenario on an N-row PostgreSQL table (default 10M rows). Two
source datasets (orders, N rows; customers, 100k rows) feed one pipeline (orders per customer) written to a
parquet "lake" and a PostgreSQL "warehouse". Each round, paired on the same machine state:

1. `pz run` that succeeds: the full run (whole-process wall time);
2. `pz run` whose warehouse write fails (failpoint `sink.write@warehouse.by_customer`);
3. `pz retry`: copies both loads from the failed run's staging, carries the lake write forward, re-runs the
   pipeline and writes the warehouse once (whole-process wall time).

The figure is retry / full run, per round, median over rounds (goal: at most 5%). The source-load node times
(extraction in the full run, local copy in the retry) are shown beside it.

    .venv/bin/python benchmarks/bench_retry.py --rows 10000000 --rounds 3

The table pz_bench.orders_<N> is shared with bench_postgres.py (created once, reused; drop it with
`DROP SCHEMA pz_bench CASCADE`); the warehouse writes to schema pz_bench_retry, dropped at the end.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_postgres import SCHEMA, Conn, ensure_table  # noqa: E402

WAREHOUSE = "pz_bench_retry"
LOADS = ("src_pg__orders", "src_pg__customers")


def write_project(root: Path, conn: Conn, table: str, memory_limit: str) -> None:
    connection = f"{{ host: {conn.host}, port: {conn.port}, database: {conn.database}, user: {conn.user} }}"
    files = {
        "project.yml": f"""
            name: bench_retry
            retention: {{ keep_last: 2 }}
            engine: {{ memory_limit: {memory_limit} }}
        """,
        "sources/pg.yml": f"""
            connector: postgres
            connection: {connection}
            datasets:
              orders:
                table: {SCHEMA}.{table}
                columns: {{ id: bigint, customer_id: bigint, customer: varchar, amount: "decimal(12,2)",
                           quantity: bigint, status: varchar, placed_at: timestamptz, ship_date: date,
                           is_paid: boolean, note: varchar }}
              customers:
                query: SELECT DISTINCT customer_id AS id, customer AS name FROM {SCHEMA}.{table}
                       WHERE id <= 100000
                columns: {{ id: bigint, name: varchar }}
        """,
        "sinks/lake.yml": "connector: localfiles\nconnection: { root: lake }\n",
        "sinks/warehouse.yml": f"""
            connector: postgres
            connection: {connection}
            outputs:
              by_customer: {{ table: {WAREHOUSE}.by_customer }}
        """,
        "pipelines/by_customer.sql": """
            INSERT INTO {{ sink('lake', 'by_customer') }}
            INSERT INTO {{ sink('warehouse', 'by_customer') }}
            SELECT c.id AS customer_id, c.name, count(*) AS orders, sum(o.amount) AS amount,
                   max(o.placed_at) AS last_order
            FROM {{ source('pg', 'orders') }} AS o JOIN {{ source('pg', 'customers') }} AS c
              ON c.id = o.customer_id
            GROUP BY ALL
        """,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def pz(project: Path, *args: str, env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """(wall seconds, exit code, output) of one `pz` process."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pipelinez.cli.main", "-p", str(project), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    return time.perf_counter() - start, proc.returncode, proc.stdout + proc.stderr


def last_nodes(project: Path) -> dict[str, dict[str, object]]:
    run = sorted((project / ".pz" / "runs").iterdir())[-1]
    return {n["name"]: n for n in json.loads((run / "run_results.json").read_text())["nodes"]}


def load_seconds(nodes: dict[str, dict[str, object]]) -> float:
    return sum(int(nodes[n]["duration_ms"]) for n in LOADS) / 1000  # type: ignore[call-overload]


def seconds(nodes: dict[str, dict[str, object]], name: str) -> float:
    return int(nodes[name]["duration_ms"]) / 1000  # type: ignore[call-overload]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--memory-limit", default="2GB")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5432)
    parser.add_argument("--user", default="postgres")
    parser.add_argument("--database", default="test")
    args = parser.parse_args()
    conn = Conn(args.host, args.port, args.user, args.database)
    table = ensure_table(conn, args.rows)
    import psycopg

    with psycopg.connect(conn.libpq(), autocommit=True) as con:
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {WAREHOUSE}")
    root = Path(tempfile.mkdtemp(prefix="pz_bench_retry_"))
    rows: list[tuple[float, ...]] = []
    try:
        write_project(root, conn, table, args.memory_limit)
        for i in range(args.rounds):
            full_s, code, out = pz(root, "run")
            if code != 0:
                raise SystemExit(f"the full run failed:\n{out}")
            full_loads = load_seconds(last_nodes(root))
            _, code, out = pz(root, "run", env={"PZ_FAILPOINTS": "sink.write@warehouse.by_customer"})
            if code != 1:
                raise SystemExit(f"the failing run did not fail as planned:\n{out}")
            retry_s, code, out = pz(root, "retry")
            nodes = last_nodes(root)
            if code != 0 or "carrying forward 1 committed sink write(s)" not in out:
                raise SystemExit(f"the retry did not reuse and carry forward:\n{out}")
            assert all(nodes[n].get("provenance") == "reused" for n in LOADS), out
            retry_loads = load_seconds(nodes)
            rest = (
                retry_s
                - retry_loads
                - seconds(nodes, "by_customer")
                - seconds(nodes, "warehouse.by_customer")
            )
            rows.append(
                (
                    full_s,
                    retry_s,
                    retry_s / full_s,
                    full_loads,
                    retry_loads,
                    seconds(nodes, "by_customer"),
                    seconds(nodes, "warehouse.by_customer"),
                    rest,
                )
            )
            ratio = retry_s / full_s
            print(f"round {i + 1}: full {full_s:.2f}s, retry {retry_s:.2f}s ({ratio:.1%})", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        with psycopg.connect(conn.libpq(), autocommit=True) as con:
            con.execute(f"DROP SCHEMA IF EXISTS {WAREHOUSE} CASCADE")
    print()
    print(f"pz retry vs full pz run, {args.rows:,} + 100,000 source rows, {args.rounds} paired round(s)")
    head = (
        "round",
        "full run",
        "retry",
        "retry/full",
        "loads: extract",
        "reuse",
        "pipeline",
        "write",
        "rest",
    )
    widths = (5, 9, 7, 10, 14, 6, 8, 6, 6)
    print("  ".join(f"{h:>{w}}" for h, w in zip(head, widths, strict=True)))
    for i, (full_s, retry_s, ratio, *parts) in enumerate(rows, 1):
        cells = (f"{i}", f"{full_s:.2f}s", f"{retry_s:.2f}s", f"{ratio:.1%}", *(f"{p:.2f}s" for p in parts))
        print("  ".join(f"{c:>{w}}" for c, w in zip(cells, widths, strict=True)))
    print(
        "reuse: the two source loads' node time in the retry (row-count checks of the seeded tables);\n"
        "pipeline and write: the retry's by_customer and warehouse.by_customer nodes; rest: process start,\n"
        "validation, seeding the staging from the failed run's file, and the run's bookkeeping."
    )
    ratios = [r[2] for r in rows]
    print(f"median retry/full: {statistics.median(ratios):.1%} (goal: at most 5%)")


if __name__ == "__main__":
    main()
