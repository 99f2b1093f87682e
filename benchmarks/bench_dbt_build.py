"""`pz run` of a dbt project imported with `pz import dbt`, against `dbt build` of the original: whole
processes, alternating (dbt, pz, pz, dbt, …), wall and CPU (user + sys of the child), median of per-pair
ratios. The warehouse file is removed before every run, so each builds from the seeds.

    .venv/bin/python benchmarks/bench_dbt_build.py --dbt-project ../jaffle_shop_duckdb \\
        --dbt /tmp/dbtvenv/bin/dbt --pairs 5

dbt runs from its own virtualenv (dbt-core 1.10 with dbt-duckdb); the dbt project's profiles.yml must sit in
the project folder (as in jaffle_shop_duckdb). The pz project is imported into a temporary folder first.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from pz_command import pz_command


def timed(cmd: list[str], cwd: Path) -> tuple[float, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out[-3000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def _clean(folder: Path) -> None:
    for path in folder.glob("*.duckdb*"):
        path.unlink()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dbt-project", type=Path, required=True)
    ap.add_argument("--dbt", required=True, help="the dbt executable (dbt-core 1.10 + dbt-duckdb)")
    ap.add_argument("--pairs", type=int, default=5)
    ns = ap.parse_args()
    pz = pz_command()
    with tempfile.TemporaryDirectory() as tmp:
        dbt_dir = Path(tmp) / "dbt"
        shutil.copytree(ns.dbt_project, dbt_dir, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb"))
        pz_dir = Path(tmp) / "pz"
        timed([*pz, "import", "dbt", str(dbt_dir), "--out", str(pz_dir)], Path(tmp))
        dbt_cmd = [ns.dbt, "build", "--profiles-dir", str(dbt_dir), "--project-dir", str(dbt_dir)]
        pz_cmd = [*pz, "run", "-p", str(pz_dir), "--quiet"]
        results: dict[str, list[tuple[float, float]]] = {"dbt": [], "pz": []}
        for i in range(ns.pairs + 1):  # the first pair warms caches and is not counted
            order = ["dbt", "pz"] if i % 2 == 0 else ["pz", "dbt"]
            for tool in order:
                folder = dbt_dir if tool == "dbt" else pz_dir
                _clean(folder)
                got = timed(dbt_cmd if tool == "dbt" else pz_cmd, folder)
                if i:
                    results[tool].append(got)
    wall = statistics.median(d[0] / p[0] for d, p in zip(results["dbt"], results["pz"], strict=True))
    cpu = statistics.median(d[1] / p[1] for d, p in zip(results["dbt"], results["pz"], strict=True))
    print(f"{ns.pairs} alternating pairs on {ns.dbt_project.name}\n")
    print("| tool | wall (median) | CPU (median) |")
    print("| --- | --- | --- |")
    for tool in ("dbt", "pz"):
        print(
            f"| {tool} | {statistics.median(r[0] for r in results[tool]):.2f} s "
            f"| {statistics.median(r[1] for r in results[tool]):.2f} s |"
        )
    print(f"\ndbt build / pz run: wall {wall:.2f}x, CPU {cpu:.2f}x (median of per-pair ratios)")


if __name__ == "__main__":
    main()
