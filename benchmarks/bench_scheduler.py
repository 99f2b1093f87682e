"""Scheduling overhead: `pz run` of a many-branch project (one small CSV source, N independent pipelines),
where the nodes do almost nothing, so the time is pz's own: validation, planning, scheduling, events and
run_results.json. With `--baseline DIR` (another pz source tree, e.g. `git worktree add /tmp/base <commit>`),
runs alternate baseline/current (A B A B …) and the figure is the median of per-pair ratios.

    .venv/bin/python benchmarks/bench_scheduler.py --branches 200 --pairs 5 --baseline /tmp/base
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import textwrap
import time
from pathlib import Path

from pz_command import pz_command

HERE = Path(__file__).resolve().parent
DATA = HERE / ".data"


def write_project(root: Path, branches: int, threads: int) -> None:
    if root.exists():
        shutil.rmtree(root)
    files = {
        "project.yml": f"name: branches\nengine: {{ threads: {threads} }}\nretention: {{ keep_last: 1 }}\n",
        "sources/files.yml": """
            connector: localfiles
            connection: { root: data }
            datasets:
              orders:
                format: csv
                path: orders.csv
                columns: { id: bigint, amount: double }
        """,
        "data/orders.csv": "id,amount\n" + "".join(f"{i},{i / 10}\n" for i in range(1000)),
    }
    for i in range(branches):
        source = "{{ source('files', 'orders') }}"
        files[f"pipelines/branch_{i:04d}.sql"] = (
            f"SELECT count(*) AS n, sum(amount) AS s, {i} AS b FROM {source}"
        )
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def one_run(project: Path, source_tree: Path | None) -> float:
    env = dict(os.environ)
    if source_tree is not None:
        env["PYTHONPATH"] = str(source_tree)
    cmd = [*pz_command(), "-p", str(project), "--quiet", "run"]
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"pz run failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--branches", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--baseline", type=Path, default=None, help="another pz source tree to compare with")
    args = parser.parse_args()
    project = DATA / f"branches_{args.branches}"
    write_project(project, args.branches, args.threads)
    nodes = args.branches + 1
    one_run(project, None)  # warm the file cache and the staging extension load
    rows = []
    for pair in range(args.pairs):
        base = one_run(project, args.baseline) if args.baseline else None
        current = one_run(project, None)
        rows.append((base, current))
        ratio = f"{current / base:.3f}" if base else "-"
        print(f"pair {pair + 1}: baseline {base or 0:.2f}s  current {current:.2f}s  ratio {ratio}")
    median = statistics.median(c for _, c in rows)
    print(f"\n{nodes} nodes, threads {args.threads}: current median {median:.2f}s", end="")
    print(f" ({median / nodes * 1000:.1f} ms per node, validation included)")
    if args.baseline:
        ratios = [c / b for b, c in rows if b]
        print(f"median ratio current/baseline over {len(ratios)} pairs: {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
