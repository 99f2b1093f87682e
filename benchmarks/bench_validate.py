"""Validation benchmark: whole cold `pz validate` processes (tiers 1-4, every pipeline bound, no
`.pz/target/` cache) on generated diamond-DAG projects of several shapes, against dbt-core's
`dbt parse --no-partial-parse` on the same models.

Each size and shape runs in pairs, the two tools back to back with the order swapped every pair, because the
machine's speed drifts; the ratio reported is the median of the per-pair ratios (dbt time / pz time), with
each tool's peak RSS. Shapes: `base` is gen_diamond_project.py's (each pipeline also joins a source, leaves
write to sinks), the others gen_shaped_project.py's (`joins`, `wide`, `cte`, `checks`). Both sides run with
compiled bytecode (pz's package and dbt's virtualenv are compiled first). The projects are (re)generated in
benchmarks/.data/: run one instance at a time. dbt runs from its own virtualenv (dbt-core 1.10 with
dbt-duckdb), offline:

    python3 -m venv ../dbt-venv && ../dbt-venv/bin/pip install 'dbt-core==1.10.*' dbt-duckdb
    .venv/bin/python benchmarks/bench_validate.py --shapes joins,wide,cte --sizes 2000,10000 --pairs 3 \\
        --dbt ../dbt-venv/bin/dbt
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import gen_diamond_project
import gen_shaped_project
from pz_command import pz_command

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


def generate(out: Path, shape: str, size: int, spread: int, checks_every: int, dbt: bool) -> None:
    if shape == "base":
        gen_diamond_project.generate(out, size, spread, checks_every, dbt=dbt)
    else:
        gen_shaped_project.generate(out, shape, size, spread, dbt=dbt)


def compile_bytecode(dbt: str | None) -> None:
    """pz's bytecode compiled first, as `pip install` does for an installed package: with
    PYTHONDONTWRITEBYTECODE set (this machine) every process would otherwise compile every module it imports;
    dbt's virtualenv the same way (pip compiled it when it installed, this makes sure)."""
    compileall.compile_dir(Path(__file__).resolve().parents[1] / "pipelinez", quiet=1)
    if dbt:
        python = Path(dbt).resolve().parent / "python"
        if python.exists():
            subprocess.run(
                [
                    str(python),
                    "-c",
                    "import compileall, site; [compileall.compile_dir(p, quiet=1) "
                    "for p in site.getsitepackages()]",
                ],
                check=True,
            )


def run_pairs(out: Path, pairs: int, dbt: str | None, env: dict[str, str]) -> tuple[list[Timing], ...]:
    """`pairs` alternating pairs of a cold `pz validate` (its .pz/ removed first) and `dbt parse`."""
    pz_cmd = [*pz_command(), "-p", str(out / "pz"), "validate"]
    dbt_cmd = [dbt or "dbt", "parse", "--no-partial-parse", "--profiles-dir", ".", "--project-dir", "."]
    pz_runs: list[Timing] = []
    dbt_runs: list[Timing] = []
    for pair in range(pairs):
        for tool in ["pz", "dbt"] if pair % 2 == 0 else ["dbt", "pz"]:
            if tool == "pz":
                shutil.rmtree(out / "pz" / ".pz", ignore_errors=True)  # cold: no bind or compile cache
                pz_runs.append(timed(pz_cmd, out, env, "project is valid"))
            elif dbt:
                shutil.rmtree(out / "dbt" / "target", ignore_errors=True)
                dbt_runs.append(timed(dbt_cmd, out / "dbt", env, "Performance info"))
    return pz_runs, dbt_runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500,2000,5000,10000", help="pipeline counts, comma-separated")
    parser.add_argument("--shapes", default="base", help="comma-separated: base,joins,wide,cte,checks")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--spread", type=int, default=10, help="see gen_diamond_project.py; 1 = densest")
    parser.add_argument("--checks-every", type=int, default=0, help="base shape: every K-th has two checks")
    parser.add_argument("--dbt", default=shutil.which("dbt") or "dbt", help="the dbt executable")
    parser.add_argument("--no-dbt", action="store_true", help="time pz alone")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    shapes = args.shapes.split(",")
    dbt = None if args.no_dbt else args.dbt
    compile_bytecode(dbt)
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DO_NOT_TRACK": "1"}
    if dbt:
        version = subprocess.run([dbt, "--version"], capture_output=True, text=True, env=env).stdout
        print(" ".join(line.strip() for line in version.splitlines()[:2]))

    rows = []
    for shape in shapes:
        for size in sizes:
            out = DATA / f"{shape}_{size}_s{args.spread}_c{args.checks_every}"
            generate(out, shape, size, args.spread, args.checks_every, dbt is not None)
            pz_runs, dbt_runs = run_pairs(out, args.pairs, dbt, env)
            ratios = [d.wall / p.wall for p, d in zip(pz_runs, dbt_runs, strict=False)]
            rows.append((shape, size, pz_runs, dbt_runs, ratios))
            print(
                f"  {shape} {size:>6,} pipelines: pz {[round(r.wall, 2) for r in pz_runs]} s, "
                f"dbt {[round(r.wall, 2) for r in dbt_runs]} s",
                flush=True,
            )
    print_table(rows, args.pairs, args.spread)


def print_table(
    rows: list[tuple[str, int, list[Timing], list[Timing], list[float]]], pairs: int, spread: int
) -> None:
    print(
        f"\ncold pz validate vs dbt parse --no-partial-parse, {pairs} alternating pairs per row, spread "
        f"{spread}; s = median wall seconds, cpu = median user+sys seconds, dbt/pz = median of the per-pair "
        "wall ratios, cpu ratio = ratio of the median CPU seconds"
    )
    head = (
        f"{'shape':<7} {'pipelines':>9} {'pz s':>7} {'pz cpu':>7} {'pz ms/pipe':>10} {'pz RSS MiB':>10} "
        f"{'dbt s':>7} {'dbt cpu':>7} {'dbt RSS MiB':>11} {'dbt/pz':>7} {'cpu ratio':>9}"
    )
    print(head)
    print("-" * len(head))
    for shape, size, pz_runs, dbt_runs, ratios in rows:
        pz_s = statistics.median(r.wall for r in pz_runs)
        pz_cpu = statistics.median(r.cpu for r in pz_runs)
        pz_rss = max(r.rss for r in pz_runs)
        line = f"{shape:<7} {size:>9,} {pz_s:>7.2f} {pz_cpu:>7.2f} {pz_s / size * 1000:>10.3f} {pz_rss:>10}"
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
