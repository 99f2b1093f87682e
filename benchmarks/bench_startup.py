"""Start-up benchmark (issue 22): whole `pz --version` and `pz validate` processes of the quickstart, this
checkout against another pz source tree, alternating, with compiled bytecode.

Each round runs every command once per tree, the order of the trees swapped every round because the
machine's speed drifts; the table gives each tree's median and fastest wall time, its median CPU time
(user + system: steadier than wall time on a loaded machine) and the median of the per-round wall-time ratios
(before / after). Both trees are byte-compiled first (`compileall`), as an installed pz is.
Each tree validates its own copy of examples/quickstart, in a neutral folder.

    .venv/bin/python benchmarks/bench_startup.py                         # this checkout only
    .venv/bin/python benchmarks/bench_startup.py --before-rev a2e81e6 --rounds 20
    .venv/bin/python benchmarks/bench_startup.py --before /tmp/old-pz    # a folder holding pipelinez/
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "examples" / "quickstart"
# what the `pz` console script runs
PZ = "import sys; from pipelinez.cli.entry import main; sys.exit(main())"


Runs = dict[tuple[str, str], list[tuple[float, float]]]  # (command, tree) → (wall, CPU) of each round


def tree_at(rev: str, into: Path) -> Path:
    """The pipelinez package of git revision `rev`, extracted into `into`."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "pipelinez"], capture_output=True, check=True
    ).stdout
    into.mkdir(parents=True)
    subprocess.run(["tar", "x"], input=archive, cwd=into, check=True)
    return into


def commands(project: Path) -> dict[str, list[str]]:
    return {"pz --version": ["--version"], "pz validate quickstart": ["validate", "-p", str(project)]}


def once(tree: Path, args: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one whole `pz` process."""
    env = {**os.environ, "PYTHONPATH": str(tree), "NO_COLOR": "1"}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", PZ, *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"pz {' '.join(args)} with {tree} failed:\n{output}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a folder holding an older pipelinez/ package")
    parser.add_argument("--before-rev", help="a git revision of this repository to compare against")
    parser.add_argument("--rounds", type=int, default=15)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pz-startup-") as tmp_name:
        tmp = Path(tmp_name)
        trees: dict[str, Path] = {}
        if opts.before_rev:
            trees["before"] = tree_at(opts.before_rev, tmp / "before-tree")
        elif opts.before:
            trees["before"] = opts.before.resolve()
        trees["after"] = ROOT
        runs: Runs = {}
        plans: dict[str, dict[str, list[str]]] = {}
        for label, tree in trees.items():
            compileall.compile_dir(tree / "pipelinez", quiet=1)
            project = tmp / f"quickstart-{label}"
            shutil.copytree(QUICKSTART, project, ignore=shutil.ignore_patterns(".pz", "out", "*.duckdb"))
            plans[label] = commands(project)
            for name, args in plans[label].items():  # a warm-up: the OS file cache, DuckDB's first load
                once(tree, args, tmp)
                runs[(name, label)] = []
        order = list(trees)
        for round_no in range(opts.rounds):
            for name in plans["after"]:
                for label in order if round_no % 2 == 0 else reversed(order):
                    runs[(name, label)].append(once(trees[label], plans[label][name], tmp))
        report(runs, list(plans["after"]), order)


def report(runs: Runs, names: list[str], order: list[str]) -> None:
    print(f"{'command':<24} {'tree':<7} {'median s':>9} {'fastest s':>10} {'CPU s':>7} {'before/after':>13}")
    for name in names:
        for label in order:
            walls = [wall for wall, _ in runs[(name, label)]]
            cpus = [cpu for _, cpu in runs[(name, label)]]
            ratio = ""
            if label == "after" and "before" in order:
                pairs = zip(runs[(name, "before")], runs[(name, label)], strict=True)
                ratio = f"{statistics.median(b[0] / a[0] for b, a in pairs):.2f}x"
            print(
                f"{name:<24} {label:<7} {statistics.median(walls):>9.3f} {min(walls):>10.3f} "
                f"{statistics.median(cpus):>7.3f} {ratio:>13}"
            )


if __name__ == "__main__":
    main()
