"""The issue-20 generators and invariants of the fuzz harness: cases are the same for the same seed, every
surface is reached, the misbehaving API ends whatever a client does, and the new invariants (project files
untouched, no secret to another origin, a signalled pz ends with an exit code) see what they must."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings

from tests.fuzz import misbehaving_http, surfaces
from tests.fuzz.guards import overwritten, snapshot
from tests.fuzz.harness import Case, Worker, run_case
from tests.fuzz.mutations import cases
from tests.fuzz.seeds import ENV, tiny

pytestmark = pytest.mark.fuzz

SURFACE_NAMES = {op.__name__ for op in surfaces.SURFACES}


def _generate(n: int, at: int) -> list[Case]:
    made: list[Case] = []

    @settings(
        max_examples=n,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @seed(at)
    @given(cases())
    def one(case: Case) -> None:
        made.append(case)

    one()
    return made


def _fingerprint(case: Case) -> str:
    digest = hashlib.sha256(repr((case.mutations, case.first, case.then, case.signal, case.env)).encode())
    for tree in (case.tree, case.prelude or {}):
        for path, (kind, value) in sorted(tree.items()):
            data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else repr(value).encode()
            digest.update(f"{path}\0{kind}\0".encode() + (value if isinstance(value, bytes) else data))
    return digest.hexdigest()


def test_cases_are_the_same_for_the_same_seed() -> None:
    first, again = _generate(40, 2), _generate(40, 2)
    assert [_fingerprint(c) for c in first] == [_fingerprint(c) for c in again]


def test_every_surface_is_drawn_and_a_signalled_case_runs_pz_then_another_command() -> None:
    made = _generate(80, 2)
    used = {m.split(":")[0] for case in made for m in case.mutations}
    assert used >= SURFACE_NAMES, SURFACE_NAMES - used
    signalled = [c for c in made if c.signal is not None]
    assert signalled and all(c.first == ["run"] and c.force_then and c.then for c in signalled)


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_an_endless_api_ends_with_410_once_the_case_budget_is_spent() -> None:
    api = misbehaving_http.api()
    base = api.base(900_001)
    cursor, statuses = "0", []
    for _ in range(misbehaving_http.PAGE_BUDGET + 5):
        status, body = _get(f"{base}/endless/fresh?cursor={cursor}")
        statuses.append(status)
        if status != 200:
            break
        cursor = body["next"]
    assert statuses[-1] == 410 and statuses.count(200) == misbehaving_http.PAGE_BUDGET
    api.forget(900_001)


def test_a_well_behaved_api_pages_by_cursor_and_credentials_sent_to_another_origin_are_noted() -> None:
    api = misbehaving_http.api()
    status, page = _get(f"{api.base(900_002)}/ok?cursor=2")
    assert status == 200 and [r["id"] for r in page["data"]] == [3, 4] and page["next"] == "4"
    # urllib follows the redirect to localhost with the Authorization header: the leak is recorded
    _get(f"{api.base(900_002)}/redirect/302/other_origin", {"Authorization": "Bearer x"})
    assert api.leaked(900_002) == ["GET /c900002/ok: Authorization sent to localhost"]
    assert api.leaked(900_002) == []


def test_a_changed_or_removed_project_file_is_a_violation_but_pz_folders_are_not(tmp_path: Path) -> None:
    for rel in ("project.yml", "pipelines/a.sql", ".pz/lock", "out/x.csv"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    before = snapshot(tmp_path)
    assert sorted(before) == ["pipelines/a.sql", "project.yml"]
    (tmp_path / ".pz" / "lock").write_text("y")
    assert overwritten(tmp_path, before, "run") == []
    (tmp_path / "pipelines" / "a.sql").unlink()
    assert overwritten(tmp_path, before, "run") == [
        ("project file overwritten", "run: pipelines/a.sql was removed")
    ]


def test_an_output_that_replaces_a_project_folder_is_caught(tmp_path: Path) -> None:
    """A localfiles output at `<project>/pipelines` swaps the pipelines folder out (pz 0.1.0 does)."""
    tree = tiny()
    surfaces._rows_source(tree)
    tree["sinks/fz_lake.yml"] = (
        "yaml",
        {"connector": "localfiles", "connection": {"root": "."}, "outputs": {"rows": {"path": "pipelines"}}},
    )
    tree["pipelines/fz_copy.sql"] = (
        "text",
        "INSERT INTO {{ sink('fz_lake', 'rows') }}\nSELECT * FROM {{ source('fz_src', 'rows') }}\n",
    )
    (tmp_path / "home").mkdir()
    worker = Worker(tmp_path / "home")
    try:
        outcome = run_case(Case("tiny", tree, [], ["run"], None, env=dict(ENV)), worker, tmp_path / "c", 90)
    finally:
        worker.stop()
    if outcome.results[0].exit_code == 0:  # pz wrote there: the harness must say so
        assert [c for c, _ in outcome.violations] == ["project file overwritten"]
    else:  # pz refused or failed the write: the project is intact
        assert not any(c == "project file overwritten" for c, _ in outcome.violations)


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signalled_run_is_a_process_of_its_own_and_ends(tmp_path: Path, sig: str) -> None:
    tree = tiny()
    tree["sinks/fz_out.yml"] = (
        "yaml",
        {"connector": "duckdb", "connection": {"path": "out/fz.duckdb"}, "outputs": {"slow": {}}},
    )
    tree["pipelines/fz_slow.sql"] = (
        "text",
        "INSERT INTO {{ sink('fz_out', 'slow') }}\n"
        "SELECT count(*) AS n FROM range(60000) a, range(60000) b WHERE (a.range + b.range) % 7 = 3\n",
    )
    case = Case("tiny", tree, [], ["run"], ["runs"], force_then=True, env=dict(ENV), signal=[sig, 0.0])
    (tmp_path / "home").mkdir()
    worker = Worker(tmp_path / "home")
    try:
        outcome = run_case(case, worker, tmp_path / "c", 90)
    finally:
        worker.stop()
    signalled = outcome.results[0]
    assert signalled.output.splitlines()[0].startswith("ok ")  # the signal came after the first line
    if signalled.exit_code is None:  # pz did not end within the grace: a hang, and no second command
        assert [c for c, _ in outcome.violations] == ["timeout"] and len(outcome.results) == 1
        return
    if signalled.exit_code == 1:  # handled: PZ0514
        assert "PZ0514" in signalled.output
    else:  # not handled: the shell's 128 + n, a violation of the exit-code contract
        assert ("bad exit code", f"run: exit {signalled.exit_code}") in outcome.violations
    assert len(outcome.results) == 2 and outcome.results[1].exit_code == 0  # then `pz runs`, always
