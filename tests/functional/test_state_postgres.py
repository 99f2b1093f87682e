"""Two machines, one PostgreSQL state backend: two copies of one project in two folders (clone A, clone B),
sharing a database created for the test (its source table, its sink table and pz's `state:` schema)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pipelinez.connectors.postgres.state_backend import PostgresBackend
from pipelinez.core.run_state import Watermark
from pipelinez.core.state.backend import Holder, StateBackendError, backend_error
from pipelinez.engine.state.lease import Lease
from tests.conftest import PG_HOST, PG_PORT, PG_USER, fresh_pg_database, pz, pz_subprocess, write_project

LEASE = 1.5  # seconds: a short lease, so a dead holder's lock is taken over within the test
LONG = 300.0  # seconds: a lease that outlives any wait of a loaded machine (tests expire it on purpose)


def _files(db: str, state: str) -> dict[str, str]:
    conn = f"{{ host: {PG_HOST}, port: {PG_PORT}, user: {PG_USER}, database: {db} }}"
    return {
        "project.yml": f"name: twin\n{state}",
        "sources/src.yml": f"connector: postgres\nconnection: {conn}\ndatasets:\n  items:\n"
        "    table: public.items\n    columns: { id: int, v: varchar }\n"
        "    sync: { mode: incremental, cursor: id }\n",
        "sinks/wh.yml": f"connector: postgres\nconnection: {conn}\noutputs:\n"
        "  copy: { strategy: append, duplicates: accept }\n",
        "pipelines/copy.sql": "INSERT INTO {{ sink('wh', 'copy') }}\n"
        "SELECT * FROM {{ source('src', 'items') }}\n",
    }


def _state_block(db: str, lease: float = LEASE) -> str:
    return (
        f"state:\n  backend: postgres\n  connection: {{ host: {PG_HOST}, port: {PG_PORT}, user: {PG_USER}, "
        f"database: {db} }}\n  schema: pz_state\n  lease_seconds: {lease}\n"
    )


@pytest.fixture
def db() -> Iterator[str]:
    with fresh_pg_database("CREATE TABLE items (id integer PRIMARY KEY, v text)") as name:
        yield name


def _sql(db: str, statement: str) -> list[tuple[object, ...]]:
    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=db, autocommit=True) as con:
        cur = con.execute(statement)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


def _insert(db: str, ids: range) -> None:
    _sql(db, "INSERT INTO items VALUES " + ", ".join(f"({i}, 'v{i}')" for i in ids))


def _copied(db: str) -> list[int]:
    return [int(str(r[0])) for r in _sql(db, "SELECT id FROM public.copy ORDER BY id")]


def _clones(tmp_path: Path, db: str, lease: float = LEASE) -> tuple[Path, Path]:
    files = _files(db, _state_block(db, lease))
    return write_project(tmp_path / "a", files), write_project(tmp_path / "b", files)


def _backend(db: str, lease: float = LEASE) -> PostgresBackend:
    return PostgresBackend(
        "twin",
        {
            "connection": {"host": PG_HOST, "port": PG_PORT, "user": PG_USER, "database": db},
            "schema": "pz_state",
            "lease_seconds": lease,
        },
    )


def _expire_lease(db: str) -> None:
    """What the clock does to a dead holder's lease once `lease_seconds` pass without a renewal, at once: a
    test does not wait out a lease (a loaded machine would need a long one to keep it live meanwhile)."""
    assert _sql(db, "UPDATE pz_state.lease SET lease_until = now() - interval '1 second' RETURNING 1")


def test_clone_b_continues_from_clone_a_watermark(tmp_path: Path, db: str) -> None:
    a, b = _clones(tmp_path, db)
    _insert(db, range(1, 4))
    first = pz(a, "run")
    assert first.exit_code == 0, first.output
    assert _copied(db) == [1, 2, 3]
    assert not (a / ".pz" / "state.duckdb").exists()  # the watermark lives in the backend
    assert _backend(db).watermarks()[("src", "items")].value == "3"
    _insert(db, range(4, 6))
    second = pz(b, "run")
    assert second.exit_code == 0, second.output
    assert _copied(db) == [1, 2, 3, 4, 5]  # exactly the new rows, once
    runs = pz(b, "runs")
    assert runs.exit_code == 0, runs.output
    assert len(_backend(db).run_ids()) == 2
    assert sorted(p.name for p in (b / ".pz" / "runs").iterdir()) == _backend(db).run_ids()


def test_a_run_while_another_machine_holds_the_lock_is_pz0511(tmp_path: Path, db: str) -> None:
    _a, b = _clones(tmp_path, db)
    backend = _backend(db, LONG)  # the other machine's lease lives however long B takes to start
    other = Holder("machine-a", 4242, "20260101T000000000Z-abcd", "tok")
    assert backend.acquire(other) is None
    result = pz(b, "run")
    assert result.exit_code == 2, result.output
    assert "PZ0511" in result.output and "pid 4242 on machine-a" in result.output
    assert _sql(db, "SELECT count(*) FROM pg_tables WHERE tablename = 'copy'") == [(0,)]
    backend.release(other)
    assert pz(b, "run").exit_code == 0


def test_a_killed_holder_is_interrupted_after_its_lease_expires(tmp_path: Path, db: str) -> None:
    a, b = _clones(tmp_path, db, LONG)  # the dead run's lease stays live until the test expires it
    _insert(db, range(1, 4))
    killed = pz_subprocess(a, "run", env={"PZ_FAILPOINTS": "source.landed:kill"})
    assert killed.exit_code == 137, killed.output
    lease = _backend(db).lease()
    assert lease is not None and not lease.expired and lease.holder.run_id  # still held by the dead run
    held = pz(b, "retry")
    assert held.exit_code == 2 and "PZ0511" in held.output, held.output
    _expire_lease(db)  # the dead holder stops renewing: its lease runs out
    retry = pz(b, "retry")
    assert retry.exit_code == 2 and "PZ0503" in retry.output, retry.output
    assert lease.holder.run_id in retry.output
    run = pz(b, "run")
    assert run.exit_code == 0, run.output
    assert _copied(db) == [1, 2, 3]
    assert _backend(db).lease() is None  # released at the end of the run


def test_a_local_project_keeps_its_state_in_dot_pz(tmp_path: Path, db: str) -> None:
    project = write_project(tmp_path / "local", _files(db, ""))
    _insert(db, range(1, 3))
    assert pz(project, "run").exit_code == 0
    assert (project / ".pz" / "state.duckdb").exists()
    assert _sql(db, "SELECT count(*) FROM pg_namespace WHERE nspname = 'pz_state'") == [(0,)]


def test_state_show_and_an_idempotent_migrate(tmp_path: Path, db: str) -> None:
    project = write_project(tmp_path / "p", _files(db, ""))
    _insert(db, range(1, 4))
    assert pz(project, "run").exit_code == 0  # local state: .pz/state.duckdb, .pz/runs
    local = pz(project, "state", "show")
    assert local.exit_code == 0, local.output
    assert "state: local folder" in local.output and "src.items: id = 3" in local.output
    refused = pz(project, "state", "migrate", "--to", "postgres")
    assert refused.exit_code == 2 and "PZ0582" in refused.output, refused.output
    (project / "project.yml").write_text(f"name: twin\n{_state_block(db)}", encoding="utf-8")
    moved = pz(project, "state", "migrate", "--to", "postgres")
    assert moved.exit_code == 0, moved.output
    assert "1 watermark(s), 1 run(s) (0 already there)" in moved.output
    again = pz(project, "state", "migrate", "--to", "postgres")
    assert "0 watermark(s), 0 run(s) (1 already there)" in again.output, again.output
    shown = pz(project, "state", "show")
    assert f"state: postgres {PG_USER}@{PG_HOST}:{PG_PORT}/{db}, schema pz_state" in shown.output
    assert "src.items: id = 3" in shown.output and "lock: free" in shown.output
    _insert(db, range(4, 6))
    clone = write_project(tmp_path / "clone", _files(db, _state_block(db)))
    assert pz(clone, "run").exit_code == 0  # continues from the migrated watermark
    assert _copied(db) == [1, 2, 3, 4, 5]


def test_an_unknown_state_backend_is_refused_not_silently_local(tmp_path: Path, db: str) -> None:
    project = write_project(tmp_path / "p", _files(db, "state: { backend: gcs }\n"))
    result = pz(project, "validate")
    assert result.exit_code == 2 and "PZ0132" in result.output and "unknown" in result.output
    url = f"state: {{ backend: postgres, connection: {{ host: {PG_HOST} }}, url: 's3://b/p' }}\n"
    refused = pz(write_project(tmp_path / "u", _files(db, url)), "validate")
    assert refused.exit_code == 2 and "PZ0133" in refused.output and "takes no url" in refused.output


def test_a_literal_password_is_refused_and_never_printed(tmp_path: Path, db: str) -> None:
    block = f"state:\n  backend: postgres\n  connection: {{ host: {PG_HOST}, password: hunter2secret }}\n"
    project = write_project(tmp_path / "p", _files(db, block))
    result = pz(project, "validate")
    assert result.exit_code == 2 and "PZ0133" in result.output, result.output
    assert "hunter2secret" not in result.output


def test_an_unreachable_backend_is_a_coded_error(tmp_path: Path, db: str) -> None:
    block = "state:\n  backend: postgres\n  connection: { host: 127.0.0.1, port: 1, user: postgres }\n"
    project = write_project(tmp_path / "p", _files(db, block))
    _insert(db, range(1, 2))
    result = pz(project, "run")
    assert result.exit_code == 2 and "PZ0580" in result.output, result.output
    assert "Traceback" not in result.output


def test_validate_connect_checks_the_backend_and_shares_the_schema_cache(tmp_path: Path, db: str) -> None:
    a, b = _clones(tmp_path, db)
    checked = pz(a, "validate", "--connect")
    assert checked.exit_code == 0, checked.output
    cached = _backend(db).get_blob("schemas.json")
    assert cached is not None and b"src.items" in cached
    assert pz(b, "validate").exit_code == 0
    assert (b / ".pz" / "target" / "schemas.json").read_bytes() == cached  # a fresh worker has it
    down = "state:\n  backend: postgres\n  connection: { host: 127.0.0.1, port: 1, user: postgres }\n"
    (a / "project.yml").write_text(f"name: twin\n{down}", encoding="utf-8")
    refused = pz(a, "validate", "--connect")
    assert refused.exit_code == 2 and "PZ0580" in refused.output, refused.output


def test_a_backend_failing_at_the_end_of_the_run_is_pz0525_and_the_delta_is_read_again(
    tmp_path: Path, db: str
) -> None:
    a, b = _clones(tmp_path, db)
    _insert(db, range(1, 4))
    assert pz(a, "run").exit_code == 0
    _insert(db, range(4, 6))
    failed = pz(a, "run", env={"PZ_FAILPOINTS": "state.commit_watermarks"})
    assert "PZ0525" in failed.output, failed.output
    assert _backend(db).watermarks()[("src", "items")].value == "3"  # nothing committed
    again = pz(b, "run")  # the next run, on the other machine, reads the same delta again
    assert again.exit_code == 0, again.output
    assert _copied(db) == [1, 2, 3, 4, 4, 5, 5]  # duplicates: accept lets the re-read append twice
    assert _backend(db).watermarks()[("src", "items")].value == "5"


@pytest.mark.parametrize(
    "seam", ["state.lease_renew", "results.before_rename", "state.commit_watermarks", "run.after_nodes"]
)
def test_kill_9_at_a_state_write_leaves_the_state_readable_and_the_next_run_right(
    tmp_path: Path, db: str, seam: str
) -> None:
    files = _files(db, _state_block(db))
    files["sinks/wh.yml"] = files["sinks/wh.yml"].replace(
        "{ strategy: append, duplicates: accept }", "{ strategy: merge, keys: [id] }"
    )
    a, b = write_project(tmp_path / "a", files), write_project(tmp_path / "b", files)
    _insert(db, range(1, 4))
    assert pz(a, "run").exit_code == 0
    _insert(db, range(4, 6))
    killed = pz_subprocess(a, "run", env={"PZ_FAILPOINTS": f"{seam}:kill"})
    assert killed.exit_code == 137, killed.output
    backend = _backend(db)
    assert backend.watermarks()[("src", "items")].value == "3"  # the kill came before the commit
    time.sleep(LEASE + 0.5)  # the dead holder's lease runs out
    runs = pz(b, "runs")
    assert runs.exit_code == 0 and "corrupt" not in runs.output, runs.output
    after = pz(b, "run")
    assert after.exit_code == 0, after.output
    assert _copied(db) == [1, 2, 3, 4, 5]  # nothing lost, nothing twice
    assert backend.watermarks()[("src", "items")].value == "5"


def test_a_run_that_failed_on_a_is_finished_by_retry_on_b(tmp_path: Path, db: str) -> None:
    a, b = _clones(tmp_path, db)
    _insert(db, range(1, 4))
    failed = pz(a, "run", env={"PZ_FAILPOINTS": "sink.write"})
    assert failed.exit_code == 1, failed.output
    assert _backend(db).watermarks() == {}  # the sink did not commit: no watermark
    retry = pz(b, "retry")
    assert retry.exit_code == 0, retry.output
    last = retry.run_results()
    assert last["retry_of"] == failed.run_results()["run_id"]
    assert _copied(db) == [1, 2, 3]
    assert _backend(db).watermarks()[("src", "items")].value == "3"


def test_the_docs_site_of_clone_b_shows_the_runs_of_clone_a(tmp_path: Path, db: str) -> None:
    a, b = _clones(tmp_path, db)
    _insert(db, range(1, 3))
    assert pz(a, "run").exit_code == 0
    site = pz(b, "docs", "generate")
    assert site.exit_code == 0, site.output
    assert ", 1 runs)" in site.output, site.output


def test_a_quoted_state_key_is_the_shared_backend_for_runs_and_retry(tmp_path: Path, db: str) -> None:
    files = _files(db, _state_block(db).replace("state:", '"state":', 1))
    a, b = write_project(tmp_path / "a", files), write_project(tmp_path / "b", files)
    _insert(db, range(1, 3))
    first = pz(a, "run")
    assert first.exit_code == 0, first.output
    runs = pz(b, "runs")  # clone B reads clone A's run from the backend
    assert runs.exit_code == 0 and first.run_results()["run_id"] in runs.output, runs.output
    backend = _backend(db, LONG)  # the other machine's lease lives however long B takes to start
    other = Holder("machine-a", 4242, "20260101T000000000Z-abcd", "tok")
    assert backend.acquire(other) is None
    held = pz(b, "retry")  # the other machine's lease is honoured, not only .pz/lock
    assert held.exit_code == 2 and "PZ0511" in held.output, held.output
    backend.release(other)


def test_a_holder_cut_off_longer_than_its_lease_is_lost(db: str) -> None:
    a = _backend(db)
    lease = Lease(a)
    assert lease.acquire() is None
    try:

        def unreachable(holder: Holder) -> bool:
            raise backend_error("PZ0580", "postgres", "cannot be reached")

        a.renew = unreachable  # type: ignore[method-assign]
        time.sleep(LEASE + 0.5)  # no renewal succeeds for longer than the lease
        b = _backend(db)
        assert b.acquire(Holder("machine-b", 7, "run-b", "tok-b")) is None  # B takes the expired lease over
        assert lease.lost  # A knows it is no longer the holder: its run commits nothing
    finally:
        lease.release()


def test_a_watermark_commit_is_refused_once_another_holder_took_the_lease(db: str) -> None:
    a, b = _backend(db), _backend(db)
    assert a.acquire(Holder("machine-a", 1, "run-a", "tok-a")) is None
    time.sleep(LEASE + 0.5)  # A's renewals failed: its lease expired
    assert b.acquire(Holder("machine-b", 2, "run-b", "tok-b")) is None
    b.commit_watermarks([Watermark("src", "items", "id", "9", "run-b")])
    with pytest.raises(StateBackendError) as refused:  # A's commit is fenced by the lease row
        a.commit_watermarks([Watermark("src", "items", "id", "5", "run-a")])
    refusal = refused.value.diagnostics[0]
    assert refusal.code == "PZ0581" and "nothing was committed" in refusal.message
    assert b.watermarks()[("src", "items")].value == "9"  # B's watermark stands
    b.release(Holder("machine-b", 2, "run-b", "tok-b"))
    with pytest.raises(StateBackendError):  # released, not A's either: still refused
        a.commit_watermarks([Watermark("src", "items", "id", "5", "run-a")])
    a.close()
    b.close()


def test_a_stale_shared_watermark_names_the_backend_table_not_the_local_file(tmp_path: Path, db: str) -> None:
    a, _b = _clones(tmp_path, db)
    _backend(db).commit_watermarks([Watermark("src", "items", "other_column", "3", "run-x")])
    result = pz(a, "validate")
    assert result.exit_code != 0 and "PZ0235" in result.output, result.output
    assert "pz_state.watermarks" in result.output and "state.duckdb" not in result.output, result.output


def test_a_stale_local_schema_cache_is_refreshed_from_the_backend(tmp_path: Path, db: str) -> None:
    a, b = _clones(tmp_path, db)
    stale = b / ".pz" / "target" / "schemas.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}\n", encoding="utf-8")
    connect = pz(a, "validate", "--connect")  # clone A records the live columns in the backend
    assert connect.exit_code == 0, connect.output
    shared = _backend(db).get_blob("schemas.json")
    assert shared is not None and shared != b"{}\n"
    pz(b, "validate")
    assert stale.read_bytes() == shared
