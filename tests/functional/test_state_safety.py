"""Crash safety and ordering of a run's state on a shared (PostgreSQL) backend: the watermarks a run reads are
read under its lease, the `state:` block sees the run's --var, a holder that lost its lease writes no sink
and commits nothing, and events.jsonl reaches the backend while the run lives."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pipelinez.core.run_state import Watermark
from tests.conftest import PG_HOST, PG_PORT, PG_USER, PzResult, fresh_pg_database, pz, write_project
from tests.functional.test_state_postgres import LEASE, _backend, _copied, _files, _insert, _sql, _state_block


@pytest.fixture
def db() -> Iterator[str]:
    with fresh_pg_database("CREATE TABLE items (id integer PRIMARY KEY, v text)") as name:
        yield name


def _start(project: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`pz` as its own process, left running (the test waits for it with `_finish`)."""
    return subprocess.Popen(
        [sys.executable, "-m", "pipelinez.cli.main", "-p", str(project), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _finish(proc: subprocess.Popen[str], project: Path) -> PzResult:
    out, _ = proc.communicate(timeout=120)
    return PzResult(proc.returncode, out, project)


def _wait_for(db: str, condition: str, what: str, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    """Poll pg_stat_activity (of database `db`) until a backend matches `condition`, while `proc` runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"pz ended before {what}: {proc.communicate()[0]}")
        if _sql(
            db, f"SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND {condition}"
        )[0][0]:
            return
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def test_a_commit_made_while_a_run_waits_for_the_lease_is_not_read_again(tmp_path: Path, db: str) -> None:
    """Another worker commits new watermarks while this run waits to take the lease: the run reads the
    watermarks under the lease, so it neither reads that worker's delta again nor skips one."""
    files = _files(db, _state_block(db))
    a = write_project(tmp_path / "a", files)
    _insert(db, range(1, 4))
    assert pz(a, "run").exit_code == 0
    _insert(db, range(4, 6))
    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=db) as other:
        # the other worker's transaction: it holds the lease table while it delivers rows 4-5 and commits
        other.execute("LOCK TABLE pz_state.lease IN EXCLUSIVE MODE")
        proc = _start(a, "run")
        _wait_for(
            db,
            "wait_event_type = 'Lock' AND query LIKE '%pz_state%lease%'",
            "the run to wait for the lease",
            proc,
        )
        other.execute("INSERT INTO public.copy SELECT * FROM items WHERE id > 3")
        other.execute(
            "UPDATE pz_state.watermarks SET value = '5', run_id = 'other-worker' WHERE project = 'twin'"
        )
        other.commit()
    run = _finish(proc, a)
    assert run.exit_code == 0, run.output
    assert _copied(db) == [1, 2, 3, 4, 5]  # rows 4-5 once: the run started from the other worker's watermark
    assert _backend(db).watermarks()[("src", "items")].value == "5"


def test_the_state_block_sees_the_runs_vars(tmp_path: Path, db: str) -> None:
    block = _state_block(db).replace("schema: pz_state", "schema: \"{{ var('state_schema') }}\"")
    files = _files(db, "vars:\n  state_schema: { type: string, default: pz_default }\n" + block)
    a, b = write_project(tmp_path / "a", files), write_project(tmp_path / "b", files)
    _insert(db, range(1, 4))
    first = pz(a, "run", "--var", "state_schema=pz_blue", env={"PZ_FAILPOINTS": "sink.write"})
    assert first.exit_code == 1, first.output
    schemas = _sql(db, "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'pz_%' ORDER BY 1")
    assert schemas == [("pz_blue",)], schemas  # the lease, the runs: in the run's schema only
    retry = pz(a, "retry")  # the last run's vars: its state lives in pz_blue
    assert retry.exit_code == 0, retry.output
    blue = _sql(db, "SELECT value FROM pz_blue.watermarks WHERE project = 'twin'")
    assert blue == [("3",)], blue
    assert _sql(db, "SELECT count(*) FROM pg_namespace WHERE nspname = 'pz_default'") == [(0,)]
    _insert(db, range(4, 6))
    second = pz(b, "run", "--var", "state_schema=pz_blue")  # another worker, same vars: continues at 3
    assert second.exit_code == 0, second.output
    assert _copied(db) == [1, 2, 3, 4, 5]
    assert _sql(db, "SELECT value FROM pz_blue.watermarks WHERE project = 'twin'") == [("5",)]


def test_a_holder_that_lost_its_lease_writes_no_sink_and_commits_nothing(tmp_path: Path, db: str) -> None:
    files = _files(db, _state_block(db))
    files["pipelines/later.sql"] = "INSERT INTO {{ sink('wh', 'later') }}\nSELECT * FROM {{ ref('copy') }}\n"
    files["sinks/wh.yml"] += "  later: { strategy: append, duplicates: accept }\n"
    a, b = write_project(tmp_path / "a", files), write_project(tmp_path / "b", files)
    _insert(db, range(1, 4))
    _sql(db, "CREATE TABLE public.copy (id integer, v text); CREATE TABLE public.later (id integer, v text)")
    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=db) as blocker:
        blocker.execute(
            "LOCK TABLE public.copy, public.later IN ACCESS EXCLUSIVE MODE"
        )  # the first write waits
        proc = _start(a, "run", "--threads", "1")
        _wait_for(db, "wait_event_type = 'Lock'", "the first sink write to wait", proc)
        # another worker takes the lease over (as after an expiry): the run's next renewal finds it gone
        _sql(db, "UPDATE pz_state.lease SET token = 'other-worker', host = 'machine-b', run_id = 'other-run'")
        time.sleep(LEASE)  # several renewals (every third of the lease) go by
        during = pz(b, "runs")  # the other machine sees the run it took the lease from as interrupted
        blocker.rollback()
    run = _finish(proc, a)
    run_id = run.run_results()["run_id"]
    assert during.exit_code == 0 and run_id in during.output and "interrupted" in during.output, during.output
    after = pz(b, "runs")  # its final record replaces what was read while it looked dead
    line = next(ln for ln in after.output.splitlines() if run_id in ln)
    assert "failed" in line and "interrupted" not in line, after.output
    assert run.exit_code == 1, run.output
    assert "PZ0541" in run.output, run.output
    results = run.run_results()
    assert results["error"]["code"] == "PZ0541", results["error"]
    writes = {n["name"]: n for n in results["nodes"] if n["kind"] == "sink_write"}
    fenced = [name for name, n in writes.items() if (n.get("error") or {}).get("code") == "PZ0541"]
    assert len(fenced) == 1, writes  # the write after the loss; the one under way when it happened finished
    table = writes[fenced[0]]["name"].split(".")[-1]
    assert _sql(db, f"SELECT count(*) FROM public.{table}") == [(0,)]  # never written
    assert _backend(db).watermarks() == {}  # nothing committed


def test_events_reach_the_backend_while_the_run_lives(tmp_path: Path, db: str) -> None:
    """A worker killed mid-run (kill -9, a lost pod) leaves its events in the backend for the others."""
    files = _files(db, _state_block(db))
    a, b = write_project(tmp_path / "a", files), write_project(tmp_path / "b", files)
    _insert(db, range(1, 4))
    _sql(db, "CREATE TABLE public.copy (id integer, v text)")
    backend = _backend(db)
    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=db) as blocker:
        blocker.execute("LOCK TABLE public.copy IN ACCESS EXCLUSIVE MODE")  # the sink write waits on it
        proc = _start(a, "run")
        try:
            _wait_for(db, "wait_event_type = 'Lock'", "the sink write to wait", proc)
            lease = backend.lease()
            assert lease is not None and lease.holder.run_id
            run_id = lease.holder.run_id
            deadline = time.monotonic() + 60
            events = ""
            while '"node_completed"' not in events and time.monotonic() < deadline:
                events = backend.get_run_file(run_id, "events.jsonl") or ""
                time.sleep(0.1)
        finally:
            proc.kill()  # SIGKILL: no cleanup, no final copy
            proc.communicate()
        blocker.rollback()
    assert '"run_started"' in events and '"node_completed"' in events, events  # the load, while the run lived
    assert all(line.endswith("}") for line in events.splitlines()), events  # whole lines only
    time.sleep(LEASE + 0.5)  # the dead holder's lease runs out: its run is interrupted
    runs = pz(b, "runs")  # another worker sees the killed run, and its events as far as they went
    assert runs.exit_code == 0 and run_id in runs.output, runs.output
    assert (b / ".pz" / "runs" / run_id / "events.jsonl").read_text(encoding="utf-8").startswith(events)


def test_a_local_commit_after_the_plan_is_seen_under_the_lock(tmp_path: Path, db: str) -> None:
    """The local backend's check: its state file unchanged since the plan means the same watermarks (not read
    again); a commit in between (another process on this machine) is seen, and the run compiles again."""
    from pipelinez.core.state.local import LocalBackend
    from pipelinez.engine.run.prepare import plan
    from pipelinez.engine.run.workflow import _watermarks_moved
    from pipelinez.engine.state.lock import ProjectLock

    project = write_project(tmp_path / "local", _files(db, ""))
    _insert(db, range(1, 4))
    assert pz(project, "run").exit_code == 0
    local = LocalBackend(project / ".pz")
    stamp = local.stamp()
    the_plan, _ = plan(project)
    with ProjectLock(project / ".pz", local) as lock:
        assert not _watermarks_moved(lock, the_plan, stamp)
    local.commit_watermarks([Watermark("src", "items", "id", "9", "another-process")])
    with ProjectLock(project / ".pz", local) as lock:
        assert _watermarks_moved(lock, the_plan, stamp)
        assert not _watermarks_moved(lock, plan(project)[0], local.stamp())  # compiled again: from 9
