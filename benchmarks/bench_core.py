"""Core benchmark: `pz run` on a generated N-row CSV → pipeline → Parquet sink, against plain DuckDB doing
the same CSV → Parquet COPY. Runs alternate (A B A B …) because machine speed drifts; the figure reported
is the median of per-pair ratios, with each tool's peak RSS.

    .venv/bin/python benchmarks/bench_core.py --rows 10000000 --pairs 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / ".data"


def generate_csv(path: Path, rows: int) -> None:
    import duckdb

    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    duckdb.sql(f"""
        COPY (SELECT i AS id, 'customer_' || (i % 100000) AS customer, (i % 1000) / 10.0 AS amount,
                     DATE '2024-01-01' + CAST(i % 700 AS INTEGER) AS ordered_at,
                     CASE i % 3 WHEN 0 THEN 'open' WHEN 1 THEN 'shipped' ELSE 'returned' END AS status
              FROM range({rows}) t(i)) TO '{path}' (FORMAT csv, HEADER)
    """)


def write_project(root: Path, csv: Path) -> None:
    if root.exists():
        shutil.rmtree(root)
    files = {
        "project.yml": "name: bench\nretention: { keep_last: 1 }\n",
        "sources/files.yml": f"""
            connector: localfiles
            connection: {{ root: "{csv.parent}" }}
            datasets:
              orders:
                format: csv
                path: {csv.name}
                columns: {{ id: bigint, customer: varchar, amount: "decimal(10,1)", ordered_at: date,
                            status: varchar }}
        """,
        "sinks/lake.yml": """
            connector: localfiles
            connection: { root: out }
            outputs:
              orders: { format: parquet }
        """,
        "pipelines/orders.sql": """
            INSERT INTO {{ sink('lake', 'orders') }}
            SELECT * FROM {{ source('files', 'orders') }}
        """,
    }
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def timed(cmd: list[str], cwd: Path) -> tuple[float, int]:
    """(seconds, peak RSS in MiB) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd} failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    return elapsed, usage.ru_maxrss // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    csv = DATA / f"orders_{args.rows}.csv"
    generate_csv(csv, args.rows)
    project = DATA / "bench_project"
    write_project(project, csv)
    ref_out = DATA / "reference.parquet"
    reference = [
        sys.executable,
        "-c",
        "import duckdb; duckdb.sql(\"COPY (SELECT * FROM read_csv('" + str(csv) + "', header=true, "
        "columns={'id': 'BIGINT', 'customer': 'VARCHAR', 'amount': 'DECIMAL(10,1)', "
        "'ordered_at': 'DATE', 'status': 'VARCHAR'})) TO '" + str(ref_out) + "' (FORMAT parquet)\")",
    ]
    pz = [sys.executable, "-m", "pipelinez.cli.main", "-p", str(project), "run"]
    rows: dict[str, list[tuple[float, int]]] = {"plain duckdb COPY": [], "pz run": []}
    ratios = []
    for _ in range(args.pairs):
        ref = timed(reference, DATA)
        mine = timed(pz, DATA)
        rows["plain duckdb COPY"].append(ref)
        rows["pz run"].append(mine)
        ratios.append(mine[0] / ref[0])
    print(f"{args.rows:,} rows CSV → Parquet, {args.pairs} alternating pairs")
    print(f"{'tool':<20} {'median s':>9} {'ratio':>7} {'peak RSS MiB':>13}")
    for tool, runs in rows.items():
        median = statistics.median(t for t, _ in runs)
        ratio = statistics.median(ratios) if tool == "pz run" else 1.0
        print(f"{tool:<20} {median:>9.2f} {ratio:>7.2f} {max(r for _, r in runs):>13}")


if __name__ == "__main__":
    main()
