"""Two pz trees side by side on the bulk data path: whole `pz run`s of `before` and `after` (each a folder
holding a `pipelinez` package, put first on PYTHONPATH) alternating with the plain-tool reference, R B R A R
B R A … R, so both trees meet the same machine. A run's ratio is its time over the mean of the references on
either side; the medians are reported with each run's peak RSS and node durations.

    git archive <commit> pipelinez | tar -x -C /tmp/before
    .venv/bin/python benchmarks/ab_bulk.py --before /tmp/before --after . --rows 10000000 --rounds 2
    .venv/bin/python benchmarks/ab_bulk.py --before /tmp/before --after . --source mariadb --rows 2000000

Sources: `postgres` (bench_e2e's project and reference: PostgreSQL → pipeline → DuckDB file, `--tier`) or
`mariadb` (bench_mariadb's: MariaDB → pipeline → DuckDB file against ConnectorX → DuckDB).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_e2e
import bench_mariadb
from bench_postgres import DATA, Conn, ensure_table


def _nodes(project: Path) -> dict[str, int]:
    run = sorted((project / ".pz" / "runs").iterdir())[-1]
    results = json.loads((run / "run_results.json").read_text())
    return {n["name"]: n.get("duration_ms") for n in results["nodes"]}


def _setup(args: argparse.Namespace, sides: dict[str, str]) -> tuple[Callable, Callable]:
    """(run the reference, run pz for a side): each returns (wall s, peak RSS MiB)."""
    if args.source == "mariadb":
        table = bench_mariadb.ensure_table(args.rows, "127.0.0.1", 3306)
        url = f"mysql://root@127.0.0.1:3306/{bench_mariadb.SCHEMA}"
        for side in sides:
            bench_mariadb.write_project(DATA / f"ab_mariadb_{side}", table, "127.0.0.1", 3306)
        return (
            lambda: bench_mariadb.run_reference(url, table),
            lambda side: bench_mariadb.run_pz(DATA / f"ab_mariadb_{side}", args.rows),
        )
    conn = Conn("127.0.0.1", 5432, "postgres", "test")
    table = ensure_table(conn, args.rows)
    for side in sides:
        out = DATA / f"ab_{side}_{args.tier}.duckdb"
        project = DATA / f"ab_postgres_{side}_{args.tier}"
        bench_e2e.write_project(project, conn, table, "duckdb", args.tier == "universal", out)

    def reference() -> tuple[float, int]:
        run = bench_e2e.run_reference(conn, "duckdb", table)
        return run.wall_s, run.rss_mib

    def pz(side: str) -> tuple[float, int]:
        run = bench_e2e.run_pz(DATA / f"ab_postgres_{side}_{args.tier}", args.rows)
        return run.wall_s, run.rss_mib

    return reference, pz


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True)
    parser.add_argument("--after", required=True)
    parser.add_argument("--source", choices=("postgres", "mariadb"), default="postgres")
    parser.add_argument("--tier", choices=("native", "universal"), default="native")
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    DATA.mkdir(parents=True, exist_ok=True)
    sides = {"before": str(Path(args.before).resolve()), "after": str(Path(args.after).resolve())}
    reference, pz = _setup(args, sides)
    ref = reference()
    ratios: dict[str, list[float]] = {side: [] for side in sides}
    for _ in range(args.rounds):
        for side, path in sides.items():
            os.environ["PYTHONPATH"] = path
            wall, rss = pz(side)
            after = reference()
            ratios[side].append(wall / ((ref[0] + after[0]) / 2))
            project = DATA / (
                f"ab_mariadb_{side}" if args.source == "mariadb" else f"ab_postgres_{side}_{args.tier}"
            )
            print(
                f"{side:<7} {wall:7.2f} s {rss:>4} MiB ratio {ratios[side][-1]:.2f} "
                f"(reference {after[0]:.2f} s) nodes {_nodes(project)} load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            ref = after
    for side, found in ratios.items():
        rounds = ", ".join(f"{r:.2f}" for r in found)
        print(f"{side}: median ratio {statistics.median(found):.2f} (rounds {rounds})")


if __name__ == "__main__":
    main()
