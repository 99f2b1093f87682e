"""State backend overhead: whole `pz run` and `pz validate` processes of one generated 100-node project
(diamond DAG, benchmarks/gen_diamond_project.py), kept locally (.pz/) against a PostgreSQL state backend
(`state: { backend: postgres }`, a database created for the benchmark on 127.0.0.1:5432 and dropped after).

The two variants run back to back, the order swapped every pair (the machine's speed drifts); the table gives
each variant's median wall time and the median per-pair ratio (postgres / local).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_state_backend.py --pipelines 80 --pairs 5
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psycopg
from gen_diamond_project import DATASETS, generate

HERE = Path(__file__).resolve().parent
DATA = HERE / ".data" / "state_backend"


def timed(project: Path, *args: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pipelinez.cli.main", "-p", str(project), *args],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"pz {' '.join(args)} in {project} failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return wall


def write_data(folder: Path) -> None:
    """The generated sources' Parquet files: 1,000 rows each."""
    import duckdb

    folder.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    for i in range(DATASETS):
        con.execute(
            "COPY (SELECT range::BIGINT AS id, (range % 7)::INTEGER AS grp, (range / 3)::DECIMAL(12,2) AS "
            "amount, 'n' || range AS name, TIMESTAMP '2026-01-01' + INTERVAL (range) SECOND AS updated_at "
            f"FROM range(1000)) TO '{folder / f'raw_{i}.parquet'}' (FORMAT parquet)"
        )
    con.close()


def nodes(project: Path) -> int:
    proc = subprocess.run(
        [sys.executable, "-m", "pipelinez.cli.main", "-p", str(project), "ls"], capture_output=True, text=True
    )
    return len([line for line in proc.stdout.splitlines() if line.strip()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipelines", type=int, default=80)
    parser.add_argument("--pairs", type=int, default=5)
    opts = parser.parse_args()
    generate(DATA, opts.pipelines, dbt=False)
    write_data(DATA / "pz" / "data")
    local, shared = DATA / "local", DATA / "postgres"
    shutil.copytree(DATA / "pz", local)
    shutil.copytree(DATA / "pz", shared)
    db = f"pz_bench_{secrets.token_hex(4)}"
    admin = psycopg.connect(host="127.0.0.1", user="postgres", dbname="postgres", autocommit=True)
    admin.execute(f'CREATE DATABASE "{db}"')  # type: ignore[arg-type]
    try:
        text = (shared / "project.yml").read_text(encoding="utf-8")
        block = (
            "state:\n  backend: postgres\n"
            f"  connection: {{ host: 127.0.0.1, user: postgres, database: {db} }}\n"
        )
        (shared / "project.yml").write_text(text.rstrip("\n") + "\n" + block, encoding="utf-8")
        print(f"{nodes(local)} nodes; {opts.pairs} pairs")
        rows = []
        for command in (("run",), ("validate",)):
            times: dict[str, list[float]] = {"local": [], "postgres": []}
            ratios = []
            for pair in range(opts.pairs):
                order = [("local", local), ("postgres", shared)]
                if pair % 2:
                    order.reverse()
                got = {name: timed(project, *command) for name, project in order}
                for name, wall in got.items():
                    times[name].append(wall)
                ratios.append(got["postgres"] / got["local"])
            rows.append(
                (
                    f"pz {' '.join(command)}",
                    statistics.median(times["local"]),
                    statistics.median(times["postgres"]),
                    statistics.median(ratios),
                )
            )
        print(f"{'command':<14} {'local s':>9} {'postgres s':>11} {'ratio':>7}")
        for name, a, b, r in rows:
            print(f"{name:<14} {a:>9.2f} {b:>11.2f} {r:>7.2f}")
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')  # type: ignore[arg-type]
        admin.close()


if __name__ == "__main__":
    main()
