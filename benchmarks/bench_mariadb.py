"""MariaDB table → DuckDB file: a whole `pz run` (mysql source → pipeline `SELECT *` → duckdb sink) against
ConnectorX → DuckDB, the move pz's mysql connector makes with the same driver, each its own child process
(wall time and peak RSS from os.wait4). Runs alternate R P R P … R (R the reference); a run's ratio is its
time over the mean of the reference runs on either side, and the median of those ratios is reported.

Reference (offline: ConnectorX and DuckDB are pz's own dependencies): `connectorx.read_sql(url, "SELECT * FROM
orders_N", return_type="arrow_stream", batch_size=65536)` streamed into a DuckDB file with one `CREATE TABLE t
AS SELECT * FROM <reader>`.

    .venv/bin/python benchmarks/bench_mariadb.py --rows 2000000 --rounds 3

The source table pz_bench.orders_<N> in MariaDB (127.0.0.1:3306, root, no password) is generated server-side
once (MariaDB's seq_1_to_N) with the columns of bench_postgres.py's table, and reused.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import textwrap
from pathlib import Path

from pz_command import pz_command

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_postgres import DATA, timed

SCHEMA = "pz_bench"
COLUMNS = (
    "id BIGINT PRIMARY KEY, customer_id BIGINT NOT NULL, customer VARCHAR(64) NOT NULL, amount DECIMAL(12,2) "
    "NOT NULL, quantity BIGINT NOT NULL, status VARCHAR(16) NOT NULL, placed_at DATETIME(6) NOT NULL, "
    "ship_date DATE NOT NULL, is_paid BOOLEAN NOT NULL, note TEXT NULL"
)
GENERATE = (
    "INSERT INTO {schema}.{table} SELECT seq, seq % 100000, CONCAT('customer_', seq % 100000), "
    "(seq % 10000) / 100, seq % 7 + 1, ELT(seq % 4 + 1, 'new', 'paid', 'shipped', 'cancelled'), "
    "TIMESTAMP '2024-01-01 00:00:00' + INTERVAL seq SECOND, DATE '2024-01-01' + INTERVAL (seq % 365) DAY, "
    "seq % 2 = 0, IF(seq % 10 = 0, NULL, CONCAT('note for order ', seq)) FROM {schema}.seq_1_to_{rows}"
)
REFERENCE = """
import sys, connectorx as cx, duckdb
url, table, out = sys.argv[1:4]
reader = cx.read_sql(url, f"SELECT * FROM {table}", return_type="arrow_stream", batch_size=65536)
con = duckdb.connect(out)
con.execute("CREATE TABLE t AS SELECT * FROM reader")
con.close()
"""


def ensure_table(rows: int, host: str, port: int) -> str:
    import pymysql

    table = f"orders_{rows}"
    con = pymysql.connect(host=host, port=port, user="root", autocommit=True)
    try:
        with con.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {SCHEMA}")
            cur.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.{table} ({COLUMNS})")
            cur.execute(f"SELECT count(*) FROM {SCHEMA}.{table}")
            row = cur.fetchone()
            if not row or row[0] != rows:
                print(f"creating MariaDB {SCHEMA}.{table} ({rows:,} rows) …", flush=True)
                cur.execute(f"DELETE FROM {SCHEMA}.{table}")
                cur.execute(GENERATE.format(schema=SCHEMA, table=table, rows=rows))
                cur.execute(f"ANALYZE TABLE {SCHEMA}.{table}")
    finally:
        con.close()
    return table


def write_project(root: Path, table: str, host: str, port: int) -> None:
    """The mysql connector reads in the universal tier (no native path): ConnectorX → staging → the sink."""
    if root.exists():
        shutil.rmtree(root)
    files = {
        "project.yml": "name: bench_mariadb\nretention: { keep_last: 1 }\n",
        "sources/my.yml": f"""
            connector: mysql
            connection: {{ host: {host}, port: {port}, database: {SCHEMA}, user: root }}
            datasets:
              orders: {{ table: {table} }}
        """,
        "sinks/wh.yml": f"connector: duckdb\nconnection: {{ path: {root / 'out.duckdb'} }}\n",
        "pipelines/orders_copy.sql": """
            INSERT INTO {{ sink('wh', 'orders_copy') }}
            SELECT * FROM {{ source('my', 'orders') }}
        """,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def run_pz(project: Path, rows: int) -> tuple[float, int]:
    wall, rss, _ = timed([*pz_command(), "-p", str(project), "run"], DATA)
    run = sorted((project / ".pz" / "runs").iterdir())[-1]
    results = json.loads((run / "run_results.json").read_text())
    node = next(n for n in results["nodes"] if n["name"] == "wh.orders_copy")
    if node["status"] != "success" or int(node["rows"]) != rows:
        raise SystemExit(f"pz run in {project}: {node['status']} {node.get('rows')}: {node.get('error')}")
    return wall, rss


def run_reference(url: str, table: str) -> tuple[float, int]:
    out = DATA / "mariadb_reference.duckdb"
    for stale in (out, out.with_suffix(".duckdb.wal")):
        stale.unlink(missing_ok=True)
    wall, rss, _ = timed([sys.executable, "-c", REFERENCE, url, table, str(out)], DATA)
    return wall, rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3306)
    args = parser.parse_args()
    DATA.mkdir(parents=True, exist_ok=True)
    table = ensure_table(args.rows, args.host, args.port)
    url = f"mysql://root@{args.host}:{args.port}/{SCHEMA}"
    project = DATA / "mariadb_project"
    write_project(project, table, args.host, args.port)
    refs = [run_reference(url, table)]
    mine: list[tuple[float, int]] = []
    ratios: list[float] = []
    for index in range(args.rounds):
        mine.append(run_pz(project, args.rows))
        refs.append(run_reference(url, table))
        ratios.append(mine[-1][0] / ((refs[-2][0] + refs[-1][0]) / 2))
        print(
            f"  round {index + 1}: pz {mine[-1][0]:6.2f}s {mine[-1][1]} MiB, reference {refs[-1][0]:6.2f}s "
            f"{refs[-1][1]} MiB, ratio {ratios[-1]:.2f}",
            flush=True,
        )
    load = os.getloadavg()
    print(f"\n{args.rows:,} rows MariaDB → DuckDB file, whole processes, {args.rounds} alternating round(s)")
    head = f"{'run':<34} {'median s':>9} {'ratio':>6} {'rows/s':>11} {'peak RSS MiB':>13}"
    print(head)
    print("-" * len(head))
    for label, runs, ratio in (
        ("connectorx arrow_stream → duckdb", refs, "     -"),
        ("pz run (mysql → pipeline → duckdb)", mine, f"{statistics.median(ratios):6.2f}"),
    ):
        median = statistics.median(r[0] for r in runs)
        print(
            f"{label:<34} {median:>9.2f} {ratio} {args.rows / median:>11,.0f} {max(r[1] for r in runs):>13}"
        )
    print(
        f"ratios per round: {', '.join(f'{r:.2f}' for r in ratios)}; load average {load[0]:.1f} {load[1]:.1f}"
    )


if __name__ == "__main__":
    main()
