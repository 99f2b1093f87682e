"""Core benchmark: `pz run` on a generated N-row CSV → pipeline → Parquet sink, against plain DuckDB doing
the same CSV → Parquet COPY. Runs alternate (A B A B …) because machine speed drifts; the figure reported
is the median of per-pair ratios, with each tool's peak RSS.

    .venv/bin/python benchmarks/bench_core.py --rows 10000000 --pairs 3
    .venv/bin/python benchmarks/bench_core.py --rows 10000000 --pairs 3 --staging-compression fast,auto

With several `--staging-compression` modes each round runs the reference, then pz once per mode; a mode's
ratio is its time over that round's reference run. The staging file's size is printed per mode.
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

from pz_command import pz_command

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


def write_project(root: Path, csv: Path, compression: str | None = None) -> None:
    if root.exists():
        shutil.rmtree(root)
    engine = f"engine: {{ staging_compression: {compression} }}\n" if compression else ""
    files = {
        "project.yml": "name: bench\nretention: { keep_last: 1 }\n" + engine,
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


def timed(cmd: list[str], cwd: Path) -> tuple[float, int, float]:
    """(seconds, peak RSS in MiB, CPU seconds: user + system) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd} failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    return elapsed, usage.ru_maxrss // 1024, usage.ru_utime + usage.ru_stime


def staging_mib(project: Path) -> float:
    runs = sorted(p for p in (project / ".pz" / "runs").iterdir() if p.is_dir())
    files = [runs[-1] / "staging.duckdb", runs[-1] / "staging.duckdb.wal"]
    return sum(f.stat().st_size for f in files if f.exists()) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument(
        "--staging-compression", default="", help="comma-separated engine.staging_compression modes"
    )
    args = parser.parse_args()
    csv = DATA / f"orders_{args.rows}.csv"
    generate_csv(csv, args.rows)
    modes = [m for m in args.staging_compression.split(",") if m] or [""]
    projects = {}
    for mode in modes:
        projects[mode] = DATA / (f"bench_project_{mode}" if mode else "bench_project")
        write_project(projects[mode], csv, mode or None)
    ref_out = DATA / "reference.parquet"
    reference = [
        sys.executable,
        "-c",
        "import duckdb; duckdb.sql(\"COPY (SELECT * FROM read_csv('" + str(csv) + "', header=true, "
        "columns={'id': 'BIGINT', 'customer': 'VARCHAR', 'amount': 'DECIMAL(10,1)', "
        "'ordered_at': 'DATE', 'status': 'VARCHAR'})) TO '" + str(ref_out) + "' (FORMAT parquet)\")",
    ]
    names = {mode: f"pz run {mode}".strip() for mode in modes}
    rows: dict[str, list[tuple[float, int, float]]] = {
        "plain duckdb COPY": [],
        **{n: [] for n in names.values()},
    }
    ratios: dict[str, list[float]] = {n: [] for n in names.values()}
    cpu_ratios: dict[str, list[float]] = {n: [] for n in names.values()}
    sizes: dict[str, float] = {}
    for _ in range(args.pairs):
        ref = timed(reference, DATA)
        rows["plain duckdb COPY"].append(ref)
        for mode in modes:
            pz = [*pz_command(), "-p", str(projects[mode]), "run"]
            mine = timed(pz, DATA)
            rows[names[mode]].append(mine)
            ratios[names[mode]].append(mine[0] / ref[0])
            cpu_ratios[names[mode]].append(mine[2] / ref[2])
            sizes[names[mode]] = staging_mib(projects[mode])
            print(
                f"  {names[mode]}: {mine[0]:.2f}s ratio {ratios[names[mode]][-1]:.2f} (COPY {ref[0]:.2f}s); "
                f"CPU {mine[2]:.2f}s ratio {cpu_ratios[names[mode]][-1]:.2f}; load {os.getloadavg()[0]:.1f}"
            )
    print(f"{args.rows:,} rows CSV → Parquet, {args.pairs} alternating rounds")
    print(
        f"{'tool':<24} {'median s':>9} {'ratio':>7} {'cpu s':>7} {'cpu ratio':>9} {'peak RSS MiB':>13} "
        f"{'staging MiB':>12}"
    )
    for tool, runs in rows.items():
        median = statistics.median(t for t, _, _ in runs)
        cpu = statistics.median(c for _, _, c in runs)
        ratio = statistics.median(ratios[tool]) if tool in ratios else 1.0
        cpu_ratio = statistics.median(cpu_ratios[tool]) if tool in cpu_ratios else 1.0
        size = f"{sizes[tool]:>12.0f}" if tool in sizes else f"{'-':>12}"
        peak = max(r for _, r, _ in runs)
        print(f"{tool:<24} {median:>9.2f} {ratio:>7.2f} {cpu:>7.2f} {cpu_ratio:>9.2f} {peak:>13} {size}")


if __name__ == "__main__":
    main()
