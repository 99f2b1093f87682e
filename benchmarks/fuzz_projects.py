"""Fuzz `pz validate` / `pz run` with N generated projects and print the outcome table.

    .venv/bin/python benchmarks/fuzz_projects.py                 # 10,000 cases, 2 workers, seed 0
    .venv/bin/python benchmarks/fuzz_projects.py -n 300 --seed 7
    .venv/bin/python benchmarks/fuzz_projects.py --replay fuzz-failures/timeout/0001/case.json

Cases come from the hypothesis strategies in tests/fuzz/mutations.py (valid seed projects with zero to three
mutations: YAML shape, types, identifiers, SQL text, file-system oddities, data files; a quarter of them also
get one of tests/fuzz/surfaces.py: incremental cursors, overlapping outputs, a misbehaving http API, a signal
during the run) and run in worker processes (CLI in-process, a time limit per command; a signalled command
runs as a `pz` process of its own). Outcomes: clean exit 0, refused before running (exit 2)
per PZ code, failed at run time (exit 1) per PZ code, and violations of the error contract. Each violation
is saved (case.json, output.txt, README) under --out for reproduction with --replay.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pz_command import pz_command  # noqa: E402

from tests.fuzz.harness import VIOLATIONS, Case, Outcome, Worker, materialize, run_case  # noqa: E402


class Tally:
    def __init__(self, out: Path, keep: int):
        self.out, self.keep = out, keep
        self.lock = threading.Lock()
        self.kinds: collections.Counter[str] = collections.Counter()
        self.codes: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self.violations: collections.Counter[str] = collections.Counter()
        self.signatures: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self.saved: collections.Counter[str] = collections.Counter()
        self.seconds = 0.0

    def add(self, case: Case, outcome: Outcome, seconds: float) -> None:
        with self.lock:
            self.seconds += seconds
            self.kinds[outcome.kind] += 1
            for code in set(outcome.codes):
                self.codes[outcome.kind][code] += 1
            for cls in {c for c, _ in outcome.violations}:
                self.violations[cls] += 1
            for cls, detail in outcome.violations:
                self.signatures[cls][_signature(detail)] += 1
            self._save(case, outcome)

    def _save(self, case: Case, outcome: Outcome) -> None:
        for cls in dict.fromkeys(c for c, _ in outcome.violations):
            sig = _signature(next(d for c, d in outcome.violations if c == cls))
            if self.saved[cls] >= self.keep or self.signatures[cls][sig] > 2:
                continue
            self.saved[cls] += 1
            folder = self.out / _slug(cls) / f"{self.saved[cls]:04d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "case.json").write_text(json.dumps(case.to_json(), indent=1))
            (folder / "output.txt").write_text(
                "\n".join(
                    f"$ pz {' '.join(r.args)}\nexit {r.exit_code} {r.abnormal}\n{r.output}"
                    + (f"\n--- crash log ---\n{r.crash_log}" if r.crash_log else "")
                    for r in outcome.results
                )
            )
            (folder / "README").write_text(
                f"violation: {cls}\nseed: {case.seed}\nmutations:\n"
                + "".join(f"  - {m}\n" for m in case.mutations)
                + "".join(f"detail: {d}\n" for c, d in outcome.violations if c == cls)
                + f"replay: .venv/bin/python benchmarks/fuzz_projects.py --replay {folder}/case.json\n"
            )


def _signature(detail: str) -> str:
    text = re.sub(r"/tmp/\S+|'[^']*'|\"[^\"]*\"", "…", detail)
    return re.sub(r"\d+", "#", text)[:150]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def generate(n: int, seed: int, sink: queue.Queue[Case | None], deadline: float) -> None:
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import seed as hseed

    from tests.fuzz.mutations import cases

    @settings(
        max_examples=n,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
    )
    @hseed(seed)
    @given(cases())
    def produce(case: Case) -> None:
        if time.perf_counter() > deadline:
            raise _TimeUp
        sink.put(case)

    with contextlib.suppress(_TimeUp):
        produce()


class _TimeUp(Exception):
    """Raised inside the generator to stop hypothesis at --max-minutes."""


def consume(cases: queue.Queue[Case | None], tally: Tally, timeout: float, scratch: Path, idx: int) -> None:
    worker = Worker(scratch / f"home{idx}")
    (scratch / f"home{idx}").mkdir(parents=True, exist_ok=True)
    try:
        while (case := cases.get()) is not None:
            t0 = time.perf_counter()
            outcome = run_case(case, worker, scratch / f"case{idx}", timeout)
            tally.add(case, outcome, time.perf_counter() - t0)
    finally:
        worker.stop()


def table(tally: Tally, total: int, elapsed: float, command: str) -> str:
    from pipelinez.core.codes import REGISTRY

    names = {c.code: c.name for c in REGISTRY}
    lines = [f"command: {command}", f"cases: {total}, wall time {elapsed:.0f}s", ""]
    lines += ["| outcome | cases |", "| --- | ---: |"]
    lines.append(f"| clean exit 0 | {tally.kinds['ok']} |")
    for kind, label in (("refused", "clean refusal, exit 2"), ("failed", "FAIL at run time, exit 1")):
        lines.append(f"| {label} | {tally.kinds[kind]} |")
        for code, count in sorted(tally.codes[kind].items()):
            lines.append(f"| &nbsp;&nbsp;{code} {names.get(code, '?')} | {count} |")
    lines.append(f"| **violations** (cases) | {tally.kinds['violation']} |")
    for cls in VIOLATIONS:
        lines.append(f"| &nbsp;&nbsp;{cls} | {tally.violations[cls]} |")
    lines.append("")
    lines.append(
        "(a case with several codes counts once under each; a violation case is not counted above it)"
    )
    for cls, sigs in tally.signatures.items():
        lines.append(f"\n{cls}:")
        lines += [f"  {count:>5}  {sig}" for sig, count in sigs.most_common(12)]
    return "\n".join(lines)


def replay(path: Path, keep: bool) -> None:
    """Run a saved case as a user would (one `pz` process per command) and print what each command printed."""
    import shutil

    from tests.fuzz.guards import run_signalled
    from tests.fuzz.harness import clear_project, placeholders

    case = Case.from_json(json.loads(path.read_text()))
    root = Path(tempfile.mkdtemp(prefix="pz-fuzz-replay-"))
    project = root / "project"
    print(f"seed {case.seed}; mutations:\n" + "".join(f"  - {m}\n" for m in case.mutations))
    base = ""
    if "__FZ_HTTP__" in placeholders(case.tree) | placeholders(case.prelude or {}):
        from tests.fuzz.misbehaving_http import api

        base = api().base(1)
    if case.prelude is not None:
        materialize(project, case.prelude, base)
        _pz(root, ["run"], case.env)
        clear_project(project)
    materialize(project, case.tree, base)
    if case.signal is not None:
        print(f"$ pz -p {project} {' '.join(case.first)}   # {case.signal[0]} after {case.signal[1]}")
        (root / "home").mkdir()
        exit_code, output, abnormal = run_signalled(
            root, case.first, case.env, case.signal, root / "home", 120
        )
        print(output + f"exit {exit_code} {abnormal}\n")
        code = exit_code if exit_code is not None else -1
    else:
        code = _pz(root, case.first, case.env)
    if case.then is not None and (code == 0 or case.force_then):
        _pz(root, case.then, case.env)
    if keep:
        print(f"project kept at {project}")
    else:
        shutil.rmtree(root, ignore_errors=True)


def _pz(root: Path, args: list[str], env: dict[str, str]) -> int:
    cmd = [*pz_command(), "-p", str(root / "project"), *args]
    print(f"$ pz -p {root / 'project'} {' '.join(args)}")
    try:
        proc = subprocess.run(
            cmd, env={**_env(), **env}, cwd=root, text=True, capture_output=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        print("timed out after 120s\n")
        return -1
    print(proc.stdout + proc.stderr + f"exit {proc.returncode}\n")
    return proc.returncode


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "FZ_TOKEN"}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", "--cases", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per command")
    parser.add_argument("--out", type=Path, default=Path("fuzz-failures"))
    parser.add_argument("--keep", type=int, default=20, help="violation examples saved per class")
    parser.add_argument("--max-minutes", type=float, default=0, help="start no case after this (0: no limit)")
    parser.add_argument(
        "--surface-chance",
        type=float,
        default=None,
        help="share of cases that get an issue-20 surface (tests/fuzz/surfaces.py; default 0.25)",
    )
    parser.add_argument("--replay", type=Path, help="run one saved case.json as a subprocess and print")
    parser.add_argument("--keep-project", action="store_true", help="with --replay: keep the project folder")
    args = parser.parse_args()
    if args.replay:
        replay(args.replay, args.keep_project)
        return
    if args.surface_chance is not None:
        from tests.fuzz import mutations

        mutations.SURFACE_CHANCE = args.surface_chance
    tally = Tally(args.out, args.keep)
    pending: queue.Queue[Case | None] = queue.Queue(maxsize=4 * args.workers)
    scratch = Path(tempfile.mkdtemp(prefix="pz-fuzz-"))
    threads = [
        threading.Thread(target=consume, args=(pending, tally, args.timeout, scratch, i), daemon=True)
        for i in range(args.workers)
    ]
    for t in threads:
        t.start()
    t0 = time.perf_counter()
    command = (
        f"python benchmarks/fuzz_projects.py -n {args.cases} --workers {args.workers} --seed {args.seed}"
        + (f" --surface-chance {args.surface_chance}" if args.surface_chance is not None else "")
    )
    reporter = threading.Thread(
        target=_progress, args=(tally, args.cases, t0, args.out, command), daemon=True
    )
    reporter.start()
    generate(args.cases, args.seed, pending, t0 + args.max_minutes * 60 if args.max_minutes else float("inf"))
    for _ in threads:
        pending.put(None)
    for t in threads:
        t.join()
    report = table(tally, sum(tally.kinds.values()), time.perf_counter() - t0, command)
    print(report)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "outcome-table.md").write_text(report + "\n")
    import shutil

    shutil.rmtree(scratch, ignore_errors=True)


def _progress(tally: Tally, n: int, t0: float, out: Path, command: str) -> None:
    """A progress line every minute on stderr; every five, the table so far in outcome-table.partial.md."""
    minute = 0
    while True:
        time.sleep(60)
        minute += 1
        with tally.lock:
            done = sum(tally.kinds.values())
            print(
                f"[{time.perf_counter() - t0:.0f}s] {done}/{n} cases: "
                + ", ".join(f"{k}={v}" for k, v in sorted(tally.kinds.items())),
                file=sys.stderr,
                flush=True,
            )
            if minute % 5 == 0:
                out.mkdir(parents=True, exist_ok=True)
                partial = table(tally, done, time.perf_counter() - t0, command + "  (in progress)")
                (out / "outcome-table.partial.md").write_text(partial + "\n")


if __name__ == "__main__":
    main()
