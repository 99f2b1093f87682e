"""Re-validation benchmark: whole `pz validate` processes on a generated diamond-DAG project, cold (no
`.pz/target/` cache), warm (unchanged since the last validate) and after one edit: a leaf pipeline's SQL
(same result columns, nothing reads it), the result columns of the pipeline with the most readers (they
bind again), a sidecar's check list; the kinds alternate in a rotated order every round. Each process must
print `project is valid`; what a measurement starts from (the cache emptied, or warmed by an untimed
validate, then the edit) is set up before its clock starts.

    .venv/bin/python benchmarks/bench_revalidate.py --pipelines 2000 --rounds 5
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from bench_validate import Timing, timed
from gen_diamond_project import generate, inputs
from pz_command import pz_command

HERE = Path(__file__).resolve().parent
DATA = HERE / ".data"
KINDS = ["cold", "warm", "edit leaf sql", "edit hub columns", "edit check"]
CHECK_COLUMNS = ["id", "grp", "amount", "name", "updated_at"]  # the checked pipeline's result columns


class Project:
    def __init__(self, root: Path, pipelines: int, spread: int, checks_every: int):
        self.root = root
        self.cmd = [*pz_command(), "-p", str(root), "validate"]
        self.env = dict(os.environ)
        readers = Counter(r for refs in inputs(pipelines, spread) for r in refs)
        hub = max(readers, key=lambda i: (readers[i], i))
        self.hub_readers = readers[hub]
        self.files = {
            "leaf": root / "pipelines" / f"p_{pipelines - 1:05d}.sql",
            "hub": root / "pipelines" / f"p_{hub:05d}.sql",
            "check": root / "pipelines" / f"p_{(pipelines // 2) // checks_every * checks_every:05d}.yml",
        }
        self.originals = {kind: path.read_text(encoding="utf-8") for kind, path in self.files.items()}
        self.flips = 0

    def validate(self) -> Timing:
        return timed(self.cmd, self.root, self.env, "project is valid")

    def empty_cache(self) -> None:
        shutil.rmtree(self.root / ".pz" / "target", ignore_errors=True)

    def edit(self, kind: str) -> None:
        """Another text each time (so the cache never knows it): the leaf's WHERE, the hub's columns (one
        more), the check's columns (another subset of the pipeline's columns each time, up to 31 edits)."""
        self.validate()  # warm first: the edit is the only change
        self.flips += 1
        text = self.originals[kind]
        if kind == "check":  # a column list not seen before (31 subsets), so no cache knows the sidecar
            seen = [c for i, c in enumerate(CHECK_COLUMNS) if (self.flips % 31 + 1) >> i & 1]
            text = text.replace("[id, amount]", f"[{', '.join(seen)}]", 1)
        else:
            extra = f", {self.flips} AS extra_{self.flips}\nFROM" if kind == "hub" else "\nFROM"
            where = f"WHERE a.id > {-self.flips} AND" if kind == "leaf" else "WHERE"
            text = text.replace("\nFROM", extra, 1).replace("WHERE", where, 1)
        assert text != self.originals[kind] or kind == "check"
        self.files[kind].write_text(text, encoding="utf-8")

    def restore(self) -> None:
        for kind, path in self.files.items():
            path.write_text(self.originals[kind], encoding="utf-8")


def measure(project: Project, kind: str) -> Timing:
    setups: dict[str, Callable[[], None]] = {
        "cold": project.empty_cache,
        "warm": lambda: (project.validate(), None)[1],
        "edit leaf sql": lambda: project.edit("leaf"),
        "edit hub columns": lambda: project.edit("hub"),
        "edit check": lambda: project.edit("check"),
    }
    setups[kind]()
    return project.validate()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipelines", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--spread", type=int, default=10, help="see gen_diamond_project.py")
    parser.add_argument("--checks-every", type=int, default=10, help="every K-th pipeline has two checks")
    args = parser.parse_args()
    compileall.compile_dir(HERE.parent / "pipelinez", quiet=1)  # as an installed package has it
    out = DATA / f"revalidate_{args.pipelines}_s{args.spread}_c{args.checks_every}"
    generate(out, args.pipelines, args.spread, args.checks_every, dbt=False)
    project = Project(out / "pz", args.pipelines, args.spread, args.checks_every)
    runs: dict[str, list[Timing]] = {kind: [] for kind in KINDS}
    for round_ in range(args.rounds):
        order = KINDS[round_ % len(KINDS) :] + KINDS[: round_ % len(KINDS)]
        for kind in order:
            runs[kind].append(measure(project, kind))
        times = ", ".join(f"{k} {runs[k][-1].wall:.2f} s ({runs[k][-1].cpu:.2f} cpu)" for k in KINDS)
        print(f"  round {round_ + 1}: {times}", flush=True)
    project.restore()

    print(
        f"\npz validate at {args.pipelines:,} pipelines (spread {args.spread}, checks every "
        f"{args.checks_every or '-'}; the hub has {project.hub_readers} readers), {args.rounds} rounds of "
        "whole processes in rotated order; "
        "s = median wall seconds, cpu = median user+sys seconds"
    )
    head = f"{'kind':<17} {'s':>6} {'min s':>6} {'cpu':>6} {'RSS MiB':>8} {'vs cold':>8}"
    print(head)
    print("-" * len(head))
    cold = statistics.median(r.wall for r in runs["cold"])
    for kind in KINDS:
        wall = statistics.median(r.wall for r in runs[kind])
        cpu = statistics.median(r.cpu for r in runs[kind])
        rss = max(r.rss for r in runs[kind])
        low = min(r.wall for r in runs[kind])
        print(f"{kind:<17} {wall:>6.2f} {low:>6.2f} {cpu:>6.2f} {rss:>8} {wall / cold:>8.2f}")


if __name__ == "__main__":
    main()
