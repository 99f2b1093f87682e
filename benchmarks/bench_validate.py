"""Validation benchmark: whole `pz validate` processes (tiers 1-4, every pipeline bound) on generated
diamond-DAG projects, against dbt-core's `dbt parse --no-partial-parse` on the same models.

Each size runs in pairs, the two tools back to back with the order swapped every pair, because the
machine's speed drifts; the ratio reported is the median of the per-pair ratios (dbt time / pz time), with
each tool's peak RSS. The projects are (re)generated in benchmarks/.data/: run one instance at a time.
dbt runs from its own virtualenv (dbt-core 1.10 with dbt-duckdb):

    python3 -m venv ../dbt-venv && ../dbt-venv/bin/pip install 'dbt-core==1.10.*' dbt-duckdb
    .venv/bin/python benchmarks/bench_validate.py --sizes 500,2000,5000,10000 --pairs 3 \\
        --dbt ../dbt-venv/bin/dbt
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gen_diamond_project import generate

HERE = Path(__file__).resolve().parent
DATA = HERE / ".data"


@dataclass(frozen=True)
class Timing:
    wall: float  # seconds
    cpu: float  # user + system seconds of the process and its children
    rss: int  # peak RSS, MiB


def timed(cmd: list[str], cwd: Path, env: dict[str, str], expect: str) -> Timing:
    """One child process, which must exit 0 and print `expect`."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0 or expect not in output:
        raise SystemExit(f"{' '.join(cmd)} (in {cwd}) failed:\n{output[-3000:]}")
    if "PZ0406" in output:
        raise SystemExit(f"{' '.join(cmd)}: some pipelines were parsed, not bound:\n{output[-3000:]}")
    return Timing(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500,2000,5000,10000", help="pipeline counts, comma-separated")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--spread", type=int, default=10, help="see gen_diamond_project.py; 1 = densest")
    parser.add_argument("--checks-every", type=int, default=0, help="every K-th pipeline has two checks")
    parser.add_argument("--dbt", default=shutil.which("dbt") or "dbt", help="the dbt executable")
    parser.add_argument("--no-dbt", action="store_true", help="time pz alone")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    # pz's bytecode compiled first, as `pip install` does for an installed package (and did for dbt's): with
    # PYTHONDONTWRITEBYTECODE set (this machine) every process would otherwise compile every module it imports
    compileall.compile_dir(Path(__file__).resolve().parents[1] / "pipelinez", quiet=1)
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DO_NOT_TRACK": "1"}
    if not args.no_dbt:
        version = subprocess.run([args.dbt, "--version"], capture_output=True, text=True, env=env).stdout
        print(" ".join(line.strip() for line in version.splitlines()[:2]))

    rows = []
    for size in sizes:
        out = DATA / f"diamond_{size}_s{args.spread}_c{args.checks_every}"
        generate(out, size, args.spread, args.checks_every, dbt=not args.no_dbt)
        pz_cmd = [sys.executable, "-m", "pipelinez.cli.main", "-p", str(out / "pz"), "validate"]
        dbt_cmd = [args.dbt, "parse", "--no-partial-parse", "--profiles-dir", ".", "--project-dir", "."]
        pz_runs: list[Timing] = []
        dbt_runs: list[Timing] = []
        ratios: list[float] = []
        for pair in range(args.pairs):
            order = ["pz", "dbt"] if pair % 2 == 0 else ["dbt", "pz"]
            for tool in order:
                if tool == "pz":
                    pz_runs.append(timed(pz_cmd, out, env, "project is valid"))
                elif not args.no_dbt:
                    dbt_runs.append(timed(dbt_cmd, out / "dbt", env, "Performance info"))
            if dbt_runs:
                ratios.append(dbt_runs[-1].wall / pz_runs[-1].wall)
        rows.append((size, pz_runs, dbt_runs, ratios))
        print(
            f"  {size:>6,} pipelines: pz {[round(r.wall, 2) for r in pz_runs]} s, "
            f"dbt {[round(r.wall, 2) for r in dbt_runs]} s",
            flush=True,
        )

    print(
        f"\npz validate vs dbt parse --no-partial-parse, {args.pairs} alternating pairs per size, "
        f"spread {args.spread}, checks every {args.checks_every or '-'}; s = median wall seconds, "
        "cpu = median user+sys seconds, dbt/pz = median of the per-pair wall ratios"
    )
    head = (
        f"{'pipelines':>9} {'pz s':>7} {'pz cpu':>7} {'pz ms/pipe':>10} {'pz RSS MiB':>10} "
        f"{'dbt s':>7} {'dbt cpu':>7} {'dbt RSS MiB':>11} {'dbt/pz':>7} {'cpu ratio':>9}"
    )
    print(head)
    print("-" * len(head))
    for size, pz_runs, dbt_runs, ratios in rows:
        pz_s = statistics.median(r.wall for r in pz_runs)
        pz_cpu = statistics.median(r.cpu for r in pz_runs)
        pz_rss = max(r.rss for r in pz_runs)
        line = f"{size:>9,} {pz_s:>7.2f} {pz_cpu:>7.2f} {pz_s / size * 1000:>10.3f} {pz_rss:>10}"
        if dbt_runs:
            dbt_cpu = statistics.median(r.cpu for r in dbt_runs)
            line += (
                f" {statistics.median(r.wall for r in dbt_runs):>7.2f} {dbt_cpu:>7.2f}"
                f" {max(r.rss for r in dbt_runs):>11} {statistics.median(ratios):>7.2f}"
                f" {dbt_cpu / pz_cpu:>9.2f}"
            )
        print(line)


if __name__ == "__main__":
    main()
