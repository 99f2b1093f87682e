"""The error contract holds for generated broken projects: exit 0/1/2, a PZ code on every error, no PZ0512,
no traceback, no hang. A bounded, deterministic sample for CI; `benchmarks/fuzz_projects.py` runs 10,000.

PZ_FUZZ_EXAMPLES overrides the number of generated cases (e.g. 1000 locally).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.fuzz.harness import Case, CommandResult, Outcome, Worker, classify, run_case
from tests.fuzz.mutations import cases
from tests.fuzz.seeds import ENV, SEEDS
from tests.fuzz.surfaces import SURFACES

EXAMPLES = int(os.environ.get("PZ_FUZZ_EXAMPLES", "100"))
TIMEOUT = 90.0  # seconds per command; a case normally takes well under one (the machine may be busy)

pytestmark = pytest.mark.fuzz


def _report(failures: list[tuple[Case, Outcome]]) -> str:
    lines = [f"{len(failures)} generated project(s) broke the error contract:"]
    for case, outcome in failures[:15]:
        lines.append(f"- seed {case.seed}; mutations: {'; '.join(case.mutations) or 'none'}")
        lines += [f"    {cls}: {detail}" for cls, detail in outcome.violations]
        for r in outcome.results:
            lines.append(f"    $ pz {' '.join(r.args)} -> exit {r.exit_code} {r.abnormal}")
            lines += [f"      | {line[:200]}" for line in r.output.splitlines()[-8:]]
    return "\n".join(lines)


def test_generated_projects_keep_the_error_contract(tmp_path: Path) -> None:
    worker = Worker(tmp_path / "home")
    (tmp_path / "home").mkdir()
    outcomes: list[tuple[Case, Outcome]] = []
    seen: set[str] = set()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(cases())
    def one(case: Case) -> None:
        # hypothesis draws some cases twice (the same random seed): each runs once, which keeps the
        # sample's time flat now that some cases run a signalled pz process
        key = repr((case.seed, case.mutations, case.first, case.then, case.signal, case.env))
        if key not in seen:
            seen.add(key)
            outcomes.append((case, run_case(case, worker, tmp_path / "case", TIMEOUT)))

    try:
        one()
    finally:
        worker.stop()
    failures = [(c, o) for c, o in outcomes if o.violations]
    if failures:
        pytest.fail(_report(failures), pytrace=False)
    # the sample reaches every kind of outcome, so a harness that stopped running pz would fail here
    kinds = {o.kind for _, o in outcomes}
    assert {"ok", "refused", "failed"} <= kinds, kinds
    # and every issue-20 surface (tests/fuzz/surfaces.py) is in it
    used = {m.split(":")[0] for case, _ in outcomes for m in case.mutations}
    assert used >= {op.__name__ for op in SURFACES}, used


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_every_seed_project_runs_clean(seed: str, tmp_path: Path) -> None:
    worker = Worker(tmp_path / "home")
    (tmp_path / "home").mkdir()
    case = Case(seed=seed, tree=SEEDS[seed](), mutations=[], first=["validate"], then=["run"], env=dict(ENV))
    try:
        outcome = run_case(case, worker, tmp_path / "case", TIMEOUT)
    finally:
        worker.stop()
    assert outcome.kind == "ok", _report([(case, outcome)])
    assert [r.exit_code for r in outcome.results] == [0, 0]
    assert any(line.startswith("ok ") for line in outcome.results[1].output.splitlines())


def _result(
    exit_code: int | None, output: str, args: tuple[str, ...] = ("run",), abnormal: str = ""
) -> Outcome:
    return classify([CommandResult(list(args), exit_code, output, abnormal)])


def test_classifier_accepts_clean_outcomes() -> None:
    assert _result(0, "ok src_a__b 3 rows 5ms\nok p 3 rows 1ms\n").kind == "ok"
    refused = _result(
        2,
        "error: PZ0201 pipelines/a.sql:1:13: sink() names undeclared sink 'wh'\n  next: do it\n1 error\n",
    )
    assert (refused.kind, refused.codes) == ("refused", ["PZ0201"])
    failed = _result(
        1, "FAIL wh.t 0 rows 5ms\n  PZ0501: sink 'wh' output 't': disk full\nSKIP x (upstream)\n"
    )
    assert (failed.kind, failed.codes) == ("failed", ["PZ0501"])
    json_error = '{"event": "error", "ts": "x", "code": "PZ0101", "message": "bad"}\n'
    retried = (  # the RETRY and BREAKER lines of docs/cli.md's text output are pz's own
        "RETRY src_a__b attempt 2 in 0.4s\n  PZ0505: source 'a' dataset 'b': HTTP 502\n"
        "BREAKER source:a closed -> open: 2 transient failures in a row; next probe in 1.0s\n"
        "FAIL src_a__b 0 rows 5ms\n  PZ0505: source 'a' dataset 'b': HTTP 502\n"
    )
    assert _result(1, retried).kind == "failed"
    assert _result(2, json_error, ("--log-format", "json", "validate")).kind == "refused"


@pytest.mark.parametrize(
    ("exit_code", "output", "violation"),
    [
        (2, "error: PZ0512 pz hit an internal error; please report it with /x/.pz/pz-crash.log\n", "PZ0512"),
        (
            1,
            "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nKeyError: 'a'\n",
            "trace",
        ),
        (0, "thread '<unnamed>' panicked at src/lib.rs:1:1:\nboom\n", "trace"),
        (2, "Usage: pz run [OPTIONS]\nError: No such option: --bogus\n", "without PZ code"),
        (1, "FAIL wh.t 0 rows 5ms\n  sink failed\n", "without PZ code"),
        (2, "", "exit code without error"),
        (1, "FAIL s 0 rows 1ms\n  PZ0505: Conversion Error: CSV Error\nOriginal Line: 1,a\n", "stray"),
        (2, "error: PZ0401 p.sql:1:1: bad\nLINE 1: SELECT\n               ^\n1 error\n", "stray"),
        (139, "", "bad exit code"),
        (2, "error: PZ0199 x: y\n", "unregistered"),
        (None, "", "timeout"),
    ],
)
def test_classifier_flags_each_violation(exit_code: int | None, output: str, violation: str) -> None:
    abnormal = "no answer within 1s" if exit_code is None else ""
    outcome = _result(exit_code, output, abnormal=abnormal)
    assert outcome.kind == "violation"
    assert any(violation in cls for cls, _ in outcome.violations), outcome.violations
