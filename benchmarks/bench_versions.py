"""A/B of two pz source trees on the same work: whole `pz` processes, alternating A B B A …, because the
machine's speed drifts. Reports the median of per-pair ratios (B time / A time) for wall and CPU, with each
tree's median wall time and peak RSS. Used to show a refactor costs nothing (issue 21):

    git archive <old-commit> | (mkdir -p /tmp/old && tar -x -C /tmp/old)
    .venv/bin/python benchmarks/bench_versions.py --a /tmp/old --b . --pairs 5

Every process starts cold: the project's `.pz/target/` (the re-validation caches) is removed first, so both
trees do the whole validation. Work measured: `pz validate` of a generated diamond project (`--pipelines`,
gen_diamond_project.py), and `pz run` of the core benchmark's CSV → pipeline → Parquet project (`--rows`,
bench_core.py). Both trees run with this interpreter; each process gets PYTHONPATH=<tree> and runs from a
neutral folder. With `--edit`, also `pz validate` after one leaf pipeline's SQL is edited, the caches warm
(each tree on its own copy of the project); with `--warm`, of the unchanged project (answered from
`.pz/target/`); `--no-cold` leaves out the cold validate.
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
from pathlib import Path

from bench_core import generate_csv, write_project
from gen_diamond_project import generate

HERE = Path(__file__).resolve().parent
DATA = HERE / ".data"


def timed(tree: Path, args: list[str], expect: str, cold: bool = True) -> tuple[float, float, int]:
    project = Path(args[args.index("-p") + 1])
    if cold:  # no re-validation cache (issue 22)
        shutil.rmtree(project / ".pz" / "target", ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pipelinez.cli.entry import main; sys.argv[0] = 'pz'; main()",
            *args,
        ],
        cwd=DATA,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0 or expect not in out:
        raise SystemExit(f"{tree}: pz {' '.join(args)} failed:\n{out[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024


def compare(name: str, a: Path, b: Path, args: list[str], expect: str, pairs: int) -> str:
    walls: dict[str, list[float]] = {"a": [], "b": []}
    ratios_wall: list[float] = []
    ratios_cpu: list[float] = []
    rss = {"a": 0, "b": 0}
    timed(a, args, expect), timed(b, args, expect)  # warm the page cache and bytecode
    for i in range(pairs):
        order = [("a", a), ("b", b)] if i % 2 == 0 else [("b", b), ("a", a)]
        got = {key: timed(tree, args, expect) for key, tree in order}
        for key in ("a", "b"):
            walls[key].append(got[key][0])
            rss[key] = max(rss[key], got[key][2])
        ratios_wall.append(got["b"][0] / got["a"][0])
        ratios_cpu.append(got["b"][1] / got["a"][1])
    return (
        f"| {name} | {statistics.median(walls['a']):.2f} s | {statistics.median(walls['b']):.2f} s "
        f"| {statistics.median(ratios_wall):.3f}x | {statistics.median(ratios_cpu):.3f}x "
        f"| {rss['a']} / {rss['b']} MiB |"
    )


def compare_edit(a: Path, b: Path, diamond: Path, pipelines: int, pairs: int, edit: bool = True) -> str:
    """`pz validate` after editing one leaf pipeline's SQL (warmed by an untimed validate first), or with
    `edit` False of the unchanged project (answered from `.pz/target/`), each tree on its own copy of the
    project (the caches are keyed by pz's own files)."""
    copies = {}
    for key in ("a", "b"):
        copies[key] = DATA / f"versions_{'edit' if edit else 'warm'}_{key}"
        shutil.rmtree(copies[key], ignore_errors=True)
        shutil.copytree(diamond / "pz", copies[key])
    leaf = Path("pipelines") / f"p_{pipelines - 1:05d}.sql"
    original = (copies["a"] / leaf).read_text(encoding="utf-8")
    flips = [0]

    def edited(key: str, tree: Path) -> tuple[float, float, int]:
        args = ["validate", "-p", str(copies[key])]
        timed(tree, args, "valid", cold=False)  # warm: the edit is the only change
        if edit:
            flips[0] += 1
            text = original.replace("WHERE", f"WHERE a.id > {-flips[0]} AND", 1)
            (copies[key] / leaf).write_text(text, encoding="utf-8")
        return timed(tree, args, "valid", cold=False)

    walls: dict[str, list[float]] = {"a": [], "b": []}
    ratios_wall: list[float] = []
    ratios_cpu: list[float] = []
    rss = {"a": 0, "b": 0}
    for i in range(pairs):
        order = [("a", a), ("b", b)] if i % 2 == 0 else [("b", b), ("a", a)]
        got = {key: edited(key, tree) for key, tree in order}
        for key in ("a", "b"):
            walls[key].append(got[key][0])
            rss[key] = max(rss[key], got[key][2])
        ratios_wall.append(got["b"][0] / got["a"][0])
        ratios_cpu.append(got["b"][1] / got["a"][1])
    work = "validate after one leaf edit" if edit else "validate, unchanged (warm)"
    return (
        f"| {work} | {statistics.median(walls['a']):.2f} s "
        f"| {statistics.median(walls['b']):.2f} s | {statistics.median(ratios_wall):.3f}x "
        f"| {statistics.median(ratios_cpu):.3f}x | {rss['a']} / {rss['b']} MiB |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", type=Path, required=True, help="the reference tree (holds pipelinez/)")
    ap.add_argument("--b", type=Path, required=True, help="the tree measured against it")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--pipelines", type=int, default=2000)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--validate-only", action="store_true", help="measure `pz validate` only")
    ap.add_argument("--edit", action="store_true", help="also `pz validate` after one edit (warm caches)")
    ap.add_argument("--warm", action="store_true", help="also `pz validate` of the unchanged project")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold `pz validate`")
    ns = ap.parse_args()
    DATA.mkdir(parents=True, exist_ok=True)
    for tree in (ns.a, ns.b):
        compileall.compile_dir(str(tree / "pipelinez"), quiet=1)
    diamond = DATA / f"versions_diamond_{ns.pipelines}"
    if not (diamond / "pz" / "project.yml").exists():
        generate(diamond, ns.pipelines, dbt=False)
    print(f"A = {ns.a}, B = {ns.b}, {ns.pairs} alternating pairs; ratios are B / A (below 1: B faster)\n")
    print("| work | A wall | B wall | wall B/A | CPU B/A | peak RSS A / B |")
    print("| --- | --- | --- | --- | --- | --- |")
    if not ns.no_cold:
        args = ["validate", "-p", str(diamond / "pz")]
        print(compare(f"validate {ns.pipelines} pipelines", ns.a, ns.b, args, "valid", ns.pairs))
    if ns.warm:
        print(compare_edit(ns.a, ns.b, diamond, ns.pipelines, ns.pairs, edit=False))
    if ns.edit:
        print(compare_edit(ns.a, ns.b, diamond, ns.pipelines, ns.pairs))
    if ns.validate_only:
        return
    csv = DATA / f"orders_{ns.rows}.csv"
    generate_csv(csv, ns.rows)
    core = DATA / "versions_core"
    write_project(core, csv)
    print(
        compare(
            f"run CSV {ns.rows:,} rows → Parquet",
            ns.a,
            ns.b,
            ["run", "-p", str(core), "--quiet"],
            "",
            ns.pairs,
        )
    )


if __name__ == "__main__":
    main()
