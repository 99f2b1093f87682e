"""Crash safety of every state write: pz killed (kill -9, no cleanup) at each write of a run's state, on the
local `.pz/` backend, the PostgreSQL backend and the object-store backends (s3 on a moto server, azureblob on
Azurite), leaves the state readable (`pz runs`, `pz state show`, from the other machine too) and the next run
right: every source row in the sink once (a merge output absorbs a re-read delta; nothing is lost), the
watermark the last committed one, then advanced by the next run. The PostgreSQL backend's other seams (lease
renewal, run_results.json, the commit) are in test_state_postgres.py; the object stores take every seam here,
their dead holder's lease expired at once (`Store.expire_lease`) rather than waited out."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import fresh_pg_database, pz, pz_subprocess, write_project
from tests.functional import test_state_objstore as objstore
from tests.functional.test_state_objstore import azure, s3  # noqa: F401 (the servers _store asks for)
from tests.functional.test_state_postgres import LEASE, _backend, _copied, _files, _insert, _state_block

# seam -> whether the run's new watermark is committed when the kill comes
LOCAL_SEAMS = {  # a kill before the first run_results.json write: tests/functional/test_retry_crash.py
    "results.before_rename@3": False,  # a run_results.json rewrite mid-run
    "state.commit_watermarks": False,  # (run.after_nodes comes just before it: test_state_postgres.py)
    "state.watermarks_committed": True,
}
SHARED_SEAMS = {"state.mirror": False, "state.watermarks_committed": True}  # the rest: test_state_postgres
OBJECT_SEAMS = {  # every state write of a run on an object store (the lease's first renewal: at its start)
    "state.lease_renew": False,
    "state.mirror": False,
    "results.before_rename@3": False,
    "state.commit_watermarks": False,
    "state.watermarks_committed": True,
}


@pytest.fixture
def db() -> Iterator[str]:
    with fresh_pg_database("CREATE TABLE items (id integer PRIMARY KEY, v text)") as name:
        yield name


def _project(tmp_path: Path, db: str, shared: bool) -> tuple[Path, Path]:
    files = _files(db, _state_block(db) if shared else "")
    files["sinks/wh.yml"] = files["sinks/wh.yml"].replace(
        "{ strategy: append, duplicates: accept }", "{ strategy: merge, keys: [id] }"
    )
    a = write_project(tmp_path / "a", files)
    return a, (write_project(tmp_path / "b", files) if shared else a)


def _watermark(db: str, project: Path, shared: bool) -> str | None:
    if shared:
        mark = _backend(db).watermarks().get(("src", "items"))
        return None if mark is None else mark.value
    shown = pz(project, "state", "show")
    assert shown.exit_code == 0, shown.output
    line = next((ln for ln in shown.output.splitlines() if ln.strip().startswith("src.items:")), "")
    return line.split(" = ")[1].split()[0] if line else None  # "  src.items: id = 3 (run ...)"


def _kill_and_recover(tmp_path: Path, db: str, shared: bool, seam: str, committed: bool) -> None:
    a, b = _project(tmp_path, db, shared)
    _insert(db, range(1, 4))
    first = pz(a, "run")
    assert first.exit_code == 0, first.output
    _insert(db, range(4, 6))
    killed = pz_subprocess(a, "run", env={"PZ_FAILPOINTS": f"{seam}:kill"})
    assert killed.exit_code == 137, killed.output
    if shared:
        time.sleep(LEASE + 0.5)  # the dead holder's lease runs out
    for command in (("runs",), ("state", "show")):  # the state reads back, from either machine
        shown = pz(b, *command)
        assert shown.exit_code == 0 and "PZ05" not in shown.output, shown.output
    assert _watermark(db, b, shared) == ("5" if committed else "3")
    after = pz(b, "run")
    assert after.exit_code == 0, after.output
    assert _copied(db) == [1, 2, 3, 4, 5]  # nothing lost, nothing twice
    assert _watermark(db, b, shared) == "5"


@pytest.mark.parametrize(("seam", "committed"), LOCAL_SEAMS.items())
def test_kill_9_at_a_local_state_write(tmp_path: Path, db: str, seam: str, committed: bool) -> None:
    _kill_and_recover(tmp_path, db, False, seam, committed)


@pytest.mark.parametrize(("seam", "committed"), SHARED_SEAMS.items())
def test_kill_9_at_a_shared_state_write(tmp_path: Path, db: str, seam: str, committed: bool) -> None:
    _kill_and_recover(tmp_path, db, True, seam, committed)


def _store_watermark(store: objstore.Store) -> str | None:
    mark = store.backend().watermarks().get(("src", "items"))
    return None if mark is None else mark.value


@pytest.mark.parametrize("kind", ["s3", "azureblob"])
@pytest.mark.parametrize(("seam", "committed"), OBJECT_SEAMS.items())
def test_kill_9_at_an_object_store_state_write(
    request: pytest.FixtureRequest, tmp_path: Path, db: str, kind: str, seam: str, committed: bool
) -> None:
    store = objstore._store(request, kind)
    files = objstore._files(db, store.block())  # a long lease: expired below, never waited out
    files["sinks/wh.yml"] = files["sinks/wh.yml"].replace(
        "{ strategy: append, duplicates: accept }", "{ strategy: merge, keys: [id] }"
    )
    a, b = write_project(tmp_path / "a", files), write_project(tmp_path / "b", files)
    env = store.env()
    _insert(db, range(1, 4))
    first = pz(a, "run", env=env)
    assert first.exit_code == 0, first.output
    _insert(db, range(4, 6))
    killed = pz_subprocess(a, "run", env={**env, "PZ_FAILPOINTS": f"{seam}:kill"})
    assert killed.exit_code == 137, killed.output
    for command in (("runs",), ("state", "show")):  # the state reads back on B, the dead lease still held
        shown = pz(b, *command, env=env)
        assert shown.exit_code == 0 and "PZ05" not in shown.output, shown.output
    assert _store_watermark(store) == ("5" if committed else "3")
    held = pz(b, "run", env=env)
    assert held.exit_code == 2 and "PZ0511" in held.output, held.output  # no second run meanwhile
    store.expire_lease()  # the dead holder stops renewing: its lease runs out
    after = pz(b, "run", env=env)
    assert after.exit_code == 0, after.output
    assert _copied(db) == [1, 2, 3, 4, 5]  # nothing lost, nothing twice
    assert _store_watermark(store) == "5"
    assert store.backend().lease() is None  # released at the end of B's run
