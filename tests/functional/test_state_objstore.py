"""Two machines, one object-store state backend: two copies of one project in two folders (clone A, clone B)
sharing a bucket of a moto S3 server (or a container of Azurite) for pz's `state:`, with a PostgreSQL database
created for the test as their source and sink."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pipelinez.connectors.azureblob.state_backend import AzureBlobStateBackend
from pipelinez.connectors.files.objstate import ObjectStateBackend
from pipelinez.connectors.s3.state_backend import S3StateBackend
from pipelinez.core.run_state import Watermark
from pipelinez.core.state.backend import Holder, StateBackendError, backend_error
from pipelinez.core.state.local import LocalBackend
from pipelinez.engine.state.lease import Lease
from pipelinez.engine.state.shared_retention import SWEEP_BACKLOG, sweep_history
from tests.conftest import PG_HOST, PG_PORT, PG_USER, fresh_pg_database, pz, pz_subprocess, write_project
from tests.objstores import (
    AZURITE_KEY,
    S3_KEY_ID,
    S3_SECRET,
    AzureServer,
    S3Server,
    azurite_server,
    moto_server,
    stored_keys,
)

LEASE = 2.0  # seconds: a short lease, so a dead holder's lock is taken over within the test
LONG = 300.0  # seconds: the lease of tests where nothing expires by itself (a loaded machine never loses it)
ENV_YML = (
    "env:\n  PZ_STATE_KEY_ID: {}\n  PZ_STATE_SECRET: { secret: true }\n  PZ_STATE_AZ: { secret: true }\n"
)


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with moto_server() as server:
        yield server


@pytest.fixture(scope="module")
def azure() -> Iterator[AzureServer]:
    with azurite_server() as server:
        yield server


class Store:
    """One fresh bucket or container holding a state url, with what a project and a test need of it."""

    def __init__(self, kind: str, server: Any, root: str):
        self.kind, self.server, self.root = kind, server, root
        self.url = f"{'s3' if kind == 's3' else 'az'}://{root}/teams/data"
        self.secret = S3_SECRET if kind == "s3" else AZURITE_KEY

    def env(self) -> dict[str, str]:
        if self.kind == "s3":
            return {"PZ_STATE_KEY_ID": S3_KEY_ID, "PZ_STATE_SECRET": S3_SECRET, "PZ_STATE_AZ": ""}
        return {"PZ_STATE_KEY_ID": "", "PZ_STATE_SECRET": "", "PZ_STATE_AZ": self.server.connection_string}

    def block(self, url: str | None = None, lease: float = LONG) -> str:
        if self.kind == "s3":
            connection = (
                f"{{ endpoint: '{self.server.endpoint}', region: us-east-1, access_key_id: "
                "\"{{ env('PZ_STATE_KEY_ID') }}\", secret_access_key: \"{{ env('PZ_STATE_SECRET') }}\" }"
            )
        else:
            connection = "{ connection_string: \"{{ env('PZ_STATE_AZ') }}\" }"
        return (
            f"state:\n  backend: {self.kind}\n  url: {url or self.url}\n  connection: {connection}\n"
            f"  lease_seconds: {lease}\n"
        )

    def backend(self, lease: float = LONG) -> ObjectStateBackend:
        settings: dict[str, Any] = {"url": self.url, "lease_seconds": lease}
        if self.kind == "s3":
            settings["connection"] = {
                "endpoint": self.server.endpoint,
                "region": "us-east-1",
                "access_key_id": S3_KEY_ID,
                "secret_access_key": S3_SECRET,
            }
            return S3StateBackend("twin", settings)
        settings["connection"] = {"connection_string": self.server.connection_string}
        return AzureBlobStateBackend("twin", settings)

    def stored(self) -> list[str]:
        return stored_keys(self.server.filesystem(), self.root, "teams/data/twin")

    def expire_lease(self) -> None:
        """What the clock does to a dead holder's lease once its length passes without a renewal, at once
        (its `written_at` moved back): a test does not wait out a lease that must outlive a loaded machine."""
        fs, key = self.server.filesystem(), f"{self.root}/teams/data/twin/lease.json"
        doc = json.loads(fs.open_input_stream(key).read())
        doc["written_at"] = time.time() - doc["seconds"] - 1
        with fs.open_output_stream(key) as out:
            out.write(json.dumps(doc).encode())

    def contents(self) -> bytes:
        fs = self.server.filesystem()
        return b"".join(fs.open_input_stream(f"{self.root}/{k}").read() for k in self.stored())


def _store(request: pytest.FixtureRequest, kind: str) -> Store:
    root = f"pz-{secrets.token_hex(4)}"
    server = request.getfixturevalue("s3" if kind == "s3" else "azure")
    if kind == "s3":
        server.bucket(root)
    else:
        server.container(root)
    return Store(kind, server, root)


@pytest.fixture
def store(request: pytest.FixtureRequest) -> Store:
    return _store(request, "s3")


@pytest.fixture(params=["s3", "azureblob"])
def any_store(request: pytest.FixtureRequest) -> Store:
    return _store(request, request.param)


@pytest.fixture
def db() -> Iterator[str]:
    with fresh_pg_database("CREATE TABLE items (id integer PRIMARY KEY, v text)") as name:
        yield name


def _files(db: str, state: str) -> dict[str, str]:
    conn = f"{{ host: {PG_HOST}, port: {PG_PORT}, user: {PG_USER}, database: {db} }}"
    return {
        "project.yml": f"name: twin\n{ENV_YML}{state}",
        "sources/src.yml": f"connector: postgres\nconnection: {conn}\ndatasets:\n  items:\n"
        "    table: public.items\n    columns: { id: int, v: varchar }\n"
        "    sync: { mode: incremental, cursor: id }\n",
        "sinks/wh.yml": f"connector: postgres\nconnection: {conn}\noutputs:\n"
        "  copy: { strategy: append, duplicates: accept }\n",
        "pipelines/copy.sql": "INSERT INTO {{ sink('wh', 'copy') }}\n"
        "SELECT * FROM {{ source('src', 'items') }}\n",
    }


def _sql(db: str, statement: str) -> list[tuple[object, ...]]:
    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=db, autocommit=True) as con:
        cur = con.execute(statement)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


def _insert(db: str, ids: range) -> None:
    _sql(db, "INSERT INTO items VALUES " + ", ".join(f"({i}, 'v{i}')" for i in ids))


def _copied(db: str) -> list[int]:
    return [int(str(r[0])) for r in _sql(db, "SELECT id FROM public.copy ORDER BY id")]


def _clones(tmp_path: Path, db: str, store: Store, lease: float = LONG) -> tuple[Path, Path]:
    files = _files(db, store.block(lease=lease))
    return write_project(tmp_path / "a", files), write_project(tmp_path / "b", files)


def _mark(store: Store) -> str:
    return store.backend().watermarks()[("src", "items")].value


def test_clone_b_continues_from_clone_a_watermark(tmp_path: Path, db: str, any_store: Store) -> None:
    store = any_store
    a, b = _clones(tmp_path, db, store)
    _insert(db, range(1, 4))
    first = pz(a, "run", env=store.env())
    assert first.exit_code == 0, first.output
    assert _copied(db) == [1, 2, 3]
    assert not (a / ".pz" / "state.duckdb").exists()  # the watermark lives in the backend
    assert _mark(store) == "3"
    _insert(db, range(4, 6))
    second = pz(b, "run", env=store.env())
    assert second.exit_code == 0, second.output
    assert _copied(db) == [1, 2, 3, 4, 5]  # exactly the new rows, once
    runs = pz(b, "runs", env=store.env())
    assert runs.exit_code == 0 and first.run_results()["run_id"] in runs.output, runs.output
    ids = store.backend().run_ids()
    assert ids == sorted([first.run_results()["run_id"], second.run_results()["run_id"]])
    layout = store.stored()
    assert "teams/data/twin/watermarks.json" in layout
    assert all(f"teams/data/twin/runs/{i}/run_results.json" in layout for i in ids)
    assert all(f"teams/data/twin/runs/{i}/events.jsonl" in layout for i in ids)
    assert "teams/data/twin/lease.json" not in layout  # released at the end of the run
    shown = pz(b, "state", "show", env=store.env())
    assert shown.exit_code == 0 and "src.items: id = 5" in shown.output, shown.output
    assert f"state: {store.kind} {store.url}/twin" in shown.output and "lock: free" in shown.output
    for text in (first.output, second.output, runs.output, shown.output):
        assert store.secret not in text
    for run_dir in (a / ".pz" / "runs").iterdir():
        assert store.secret not in (run_dir / "run_results.json").read_text()
        assert store.secret not in (run_dir / "events.jsonl").read_text()
    assert store.secret.encode() not in store.contents()


def test_a_run_while_another_machine_holds_the_lock_is_pz0511(
    tmp_path: Path, db: str, any_store: Store
) -> None:
    _a, b = _clones(tmp_path, db, any_store)
    backend = any_store.backend()
    other = Holder("machine-a", 4242, "20260101T000000000Z-abcd", "tok")
    assert backend.acquire(other) is None
    result = pz(b, "run", env=any_store.env())
    assert result.exit_code == 2, result.output
    assert "PZ0511" in result.output and "pid 4242 on machine-a" in result.output
    assert _sql(db, "SELECT count(*) FROM pg_tables WHERE tablename = 'copy'") == [(0,)]
    cleaning = pz(b, "clean", env=any_store.env())  # pz clean takes the lock too
    assert cleaning.exit_code == 2 and "PZ0511" in cleaning.output, cleaning.output
    backend.release(other)
    assert pz(b, "run", env=any_store.env()).exit_code == 0
    cleaned = pz(b, "clean", env=any_store.env())
    assert cleaned.exit_code == 0, cleaned.output
    assert len(backend.run_ids()) == 1  # the run history stays in the backend


def test_a_killed_holder_is_interrupted_after_its_lease_expires(
    tmp_path: Path, db: str, any_store: Store
) -> None:
    store = any_store
    a, b = _clones(tmp_path, db, store)  # the dead run's lease stays live until the test expires it
    _insert(db, range(1, 4))
    killed = pz_subprocess(a, "run", env={**store.env(), "PZ_FAILPOINTS": "source.landed:kill"})
    assert killed.exit_code == 137, killed.output
    lease = store.backend().lease()
    assert lease is not None and not lease.expired and lease.holder.run_id  # still held by the dead run
    held = pz(b, "retry", env=store.env())
    assert held.exit_code == 2 and "PZ0511" in held.output, held.output
    store.expire_lease()  # the dead holder stops renewing: its lease runs out
    retry = pz(b, "retry", env=store.env())
    assert retry.exit_code == 2 and "PZ0503" in retry.output, retry.output
    assert lease.holder.run_id in retry.output
    run = pz(b, "run", env=store.env())
    assert run.exit_code == 0, run.output
    assert _copied(db) == [1, 2, 3]
    assert store.backend().lease() is None  # released at the end of the run


def test_a_run_that_failed_on_a_is_finished_by_retry_on_b(tmp_path: Path, db: str, store: Store) -> None:
    a, b = _clones(tmp_path, db, store)
    _insert(db, range(1, 4))
    failed = pz(a, "run", env={**store.env(), "PZ_FAILPOINTS": "sink.write"})
    assert failed.exit_code == 1, failed.output
    assert store.backend().watermarks() == {}  # the sink did not commit: no watermark
    retry = pz(b, "retry", env=store.env())
    assert retry.exit_code == 0, retry.output
    assert retry.run_results()["retry_of"] == failed.run_results()["run_id"]
    assert _copied(db) == [1, 2, 3]
    assert _mark(store) == "3"


def test_state_show_and_an_idempotent_migrate(tmp_path: Path, db: str, store: Store) -> None:
    project = write_project(tmp_path / "p", _files(db, ""))
    _insert(db, range(1, 4))
    assert pz(project, "run").exit_code == 0  # local state: .pz/state.duckdb, .pz/runs
    (project / "project.yml").write_text(f"name: twin\n{ENV_YML}{store.block()}", encoding="utf-8")
    moved = pz(project, "state", "migrate", "--to", "s3", env=store.env())
    assert moved.exit_code == 0, moved.output
    assert "1 watermark(s), 1 run(s) (0 already there)" in moved.output
    again = pz(project, "state", "migrate", "--to", "s3", env=store.env())
    assert "0 watermark(s), 0 run(s) (1 already there)" in again.output, again.output
    shown = pz(project, "state", "show", env=store.env())
    assert "src.items: id = 3" in shown.output and "lock: free" in shown.output, shown.output
    assert store.secret not in shown.output + moved.output
    _insert(db, range(4, 6))
    clone = write_project(tmp_path / "clone", _files(db, store.block()))
    assert pz(clone, "run", env=store.env()).exit_code == 0  # continues from the migrated watermark
    assert _copied(db) == [1, 2, 3, 4, 5]


def test_validate_connect_checks_the_backend_and_shares_the_schema_cache(
    tmp_path: Path, db: str, any_store: Store
) -> None:
    a, b = _clones(tmp_path, db, any_store)
    checked = pz(a, "validate", "--connect", env=any_store.env())
    assert checked.exit_code == 0, checked.output
    cached = any_store.backend().get_blob("schemas.json")
    assert cached is not None and b"src.items" in cached
    assert pz(b, "validate", env=any_store.env()).exit_code == 0
    assert (b / ".pz" / "target" / "schemas.json").read_bytes() == cached  # a fresh worker has it
    assert not [k for k in any_store.stored() if "probe" in k]  # the write probe cleaned up after itself


def test_an_unreachable_store_is_pz0580_and_a_missing_bucket_pz0583(
    tmp_path: Path, db: str, store: Store
) -> None:
    _insert(db, range(1, 2))
    down = store.block().replace(store.server.endpoint, "http://127.0.0.1:1")
    project = write_project(tmp_path / "down", _files(db, down))
    result = pz(project, "run", env=store.env())
    assert result.exit_code == 2 and "PZ0580" in result.output, result.output
    assert "state.connection" in result.output and "Traceback" not in result.output
    checked = pz(project, "validate", "--connect", env=store.env())
    assert checked.exit_code == 2 and "PZ0580" in checked.output, checked.output
    missing = write_project(tmp_path / "missing", _files(db, store.block(url="s3://no-such-bucket-pz/x")))
    gone = pz(missing, "run", env=store.env())
    assert gone.exit_code == 2 and "PZ0583" in gone.output and "no-such-bucket-pz" in gone.output, gone.output
    assert store.secret not in result.output + checked.output + gone.output


def test_a_bad_state_block_is_refused_before_anything_runs(tmp_path: Path, db: str, store: Store) -> None:
    bad_url = write_project(tmp_path / "u", _files(db, store.block(url="https://bucket/prefix")))
    result = pz(bad_url, "validate", env=store.env())
    assert result.exit_code == 2 and "PZ0134" in result.output and "s3://<bucket>/<prefix>" in result.output
    literal = store.block().replace("\"{{ env('PZ_STATE_SECRET') }}\"", "literal-secret-value-xyz")
    refused = pz(write_project(tmp_path / "l", _files(db, literal)), "validate", env=store.env())
    assert refused.exit_code == 2 and "PZ0133" in refused.output, refused.output
    assert "literal-secret-value-xyz" not in refused.output
    unknown = store.block().replace("region: us-east-1", "regoin: us-east-1")
    typo = pz(write_project(tmp_path / "k", _files(db, unknown)), "validate", env=store.env())
    assert typo.exit_code == 2 and "PZ0134" in typo.output and "regoin" in typo.output, typo.output
    with_bucket = store.block().replace("region: us-east-1", "bucket: other")
    named = pz(write_project(tmp_path / "n", _files(db, with_bucket)), "validate", env=store.env())
    assert named.exit_code == 2 and "PZ0134" in named.output and "url names the bucket" in named.output


def test_a_store_failing_at_the_end_of_the_run_is_pz0525_and_the_delta_is_read_again(
    tmp_path: Path, db: str, any_store: Store
) -> None:
    store = any_store
    a, b = _clones(tmp_path, db, store)
    _insert(db, range(1, 4))
    assert pz(a, "run", env=store.env()).exit_code == 0
    _insert(db, range(4, 6))
    failed = pz(a, "run", env={**store.env(), "PZ_FAILPOINTS": "state.commit_watermarks"})
    assert "PZ0525" in failed.output, failed.output
    assert _mark(store) == "3"  # nothing committed
    again = pz(b, "run", env=store.env())  # the next run, on the other machine, reads the same delta again
    assert again.exit_code == 0, again.output
    assert _copied(db) == [1, 2, 3, 4, 4, 5, 5]  # duplicates: accept lets the re-read append twice
    assert _mark(store) == "5"


def test_a_watermark_commit_is_refused_once_another_holder_took_the_lease(any_store: Store) -> None:
    a, b = any_store.backend(LEASE), any_store.backend(LEASE)
    assert a.acquire(Holder("machine-a", 1, "run-a", "tok-a")) is None
    a.commit_watermarks([Watermark("src", "items", "id", "3", "run-a")])  # held: committed
    time.sleep(LEASE + 0.5)  # A's renewals failed: its lease expired
    assert b.acquire(Holder("machine-b", 2, "run-b", "tok-b")) is None
    b.commit_watermarks([Watermark("src", "items", "id", "9", "run-b")])
    with pytest.raises(StateBackendError) as refused:  # A's stale token: its commit is fenced
        a.commit_watermarks([Watermark("src", "items", "id", "5", "run-a")])
    refusal = refused.value.diagnostics[0]
    assert refusal.code == "PZ0581" and "nothing was committed" in refusal.message
    assert b.watermarks()[("src", "items")].value == "9"  # B's watermark stands
    assert not a.renew(Holder("machine-a", 1, "run-a", "tok-a"))  # and A knows it lost the lease
    b.release(Holder("machine-b", 2, "run-b", "tok-b"))
    assert b.lease() is None


def test_a_holder_cut_off_longer_than_its_lease_is_lost(store: Store) -> None:
    a = store.backend(LEASE)
    lease = Lease(a)
    assert lease.acquire() is None
    try:

        def unreachable(holder: Holder) -> bool:
            raise backend_error("PZ0580", "s3", "cannot be reached")

        a.renew = unreachable  # type: ignore[method-assign]
        time.sleep(LEASE + 0.5)  # no renewal succeeds for longer than the lease
        assert store.backend(LEASE).acquire(Holder("machine-b", 7, "run-b", "tok-b")) is None  # taken over
        assert lease.lost  # A knows it is no longer the holder: its run commits nothing
    finally:
        lease.release()


def test_watermarks_json_is_one_document_with_every_mark(store: Store) -> None:
    backend = store.backend()
    backend.commit_watermarks([Watermark("s", "a", "id", "1", "r1"), Watermark("s", "b", "ts", "2", "r1")])
    backend.commit_watermarks([Watermark("s", "a", "id", "7", "r2")])
    fs = store.server.filesystem()
    doc = json.loads(fs.open_input_stream(f"{store.root}/teams/data/twin/watermarks.json").read())
    assert [(m["dataset"], m["value"], m["run_id"]) for m in doc["watermarks"]] == [
        ("a", "7", "r2"),
        ("b", "2", "r1"),
    ]
    backend.put_run_file("r1", "run_results.json", "{}")
    backend.put_run_file("r1", "events.jsonl", "")
    backend.put_run_file("r2", "events.jsonl", "")  # no run_results.json yet: not a run
    assert backend.run_ids() == ["r1"]
    backend.delete_run("r1")
    assert backend.run_ids() == [] and backend.get_run_file("r1", "events.jsonl") is None


def _two_writes(db: str, store: Store, staging_endpoint: str | None) -> dict[str, str]:
    """The project with a second write (`second`, the one A's run fails) and, for an s3 staging, the
    engine.staging settings to reach it (the moto server, the state's key pair)."""
    files = _files(db, store.block())
    staging = "engine:\n  retry: { max_attempts: 1 }\n"
    if staging_endpoint is not None:
        staging += (
            f"  staging:\n    endpoint: '{staging_endpoint}'\n"
            "    access_key_id: \"{{ env('PZ_STATE_KEY_ID') }}\"\n"
            "    secret_access_key: \"{{ env('PZ_STATE_SECRET') }}\"\n"
        )
    files["project.yml"] += staging
    files["sources/src.yml"] = files["sources/src.yml"].replace(
        "    sync: { mode: incremental, cursor: id }\n", ""
    )
    files["sinks/wh.yml"] += "  second: { strategy: append, duplicates: accept }\n"
    files["pipelines/second.sql"] = (
        "INSERT INTO {{ sink('wh', 'second') }}\nSELECT * FROM {{ source('src', 'items') }}\n"
    )
    return files


def _ids(db: str, table: str) -> list[int]:
    return [int(str(r[0])) for r in _sql(db, f"SELECT id FROM public.{table} ORDER BY id")]


@pytest.mark.parametrize(("kind", "staging"), [("s3", "s3"), ("azureblob", "folder")])
def test_a_failed_run_on_a_is_finished_on_b_from_the_shared_state_and_staging(
    request: pytest.FixtureRequest, tmp_path: Path, db: str, kind: str, staging: str
) -> None:
    store = _store(request, kind)
    if staging == "s3":
        stage_bucket = store.server.bucket(f"pz-stage-{secrets.token_hex(4)}")
        stage_url, endpoint = f"s3://{stage_bucket}/team/stage", store.server.endpoint
    else:  # az:// is no staging pz supports (PZ0711): Azure state, a folder every worker mounts
        stage_url, endpoint = str(tmp_path / "mount" / "pz-staging"), None
    files = _two_writes(db, store, endpoint)
    a, b = write_project(tmp_path / "a", files), write_project(tmp_path / "b", files)
    _insert(db, range(1, 6))
    env = {**store.env(), "PZ_STAGING_URL": stage_url}
    failed = pz(a, "run", env={**env, "PZ_FAILPOINTS": "sink.write@wh.second"})
    assert failed.exit_code == 1, failed.output
    run_a = failed.run_results()["run_id"]
    assert failed.run_results()["args"]["staging"] == stage_url
    assert _ids(db, "copy") == [1, 2, 3, 4, 5]  # A's committed write
    assert store.backend().run_ids() == [run_a]  # A's record is in the shared state
    _sql(db, "DROP TABLE public.items")  # B cannot read the source: it must reuse A's staged load

    retry = pz(b, "retry", env=store.env())  # B knows A's run, and its staging, from the backend only
    assert retry.exit_code == 0, retry.output
    assert "reusing staged data for 1 source load(s)" in retry.output, retry.output
    assert "carrying forward 1 committed sink write(s)" in retry.output
    run_b = retry.run_results()
    assert run_b["retry_of"] == run_a
    statuses = {n["name"]: (n["status"], n.get("provenance")) for n in run_b["nodes"]}
    assert statuses["src_src__items"] == ("success", "reused")
    assert statuses["wh.copy"] == ("carried_forward", "carried_forward")
    assert _ids(db, "copy") == [1, 2, 3, 4, 5]  # carried forward, not written twice
    assert _ids(db, "second") == [1, 2, 3, 4, 5]
    assert store.backend().run_ids() == sorted([run_a, run_b["run_id"]])
    assert store.backend().lease() is None
    for text in (failed.output, retry.output):
        assert store.secret not in text
    if kind == "azureblob":
        refused = pz(b, "run", "--staging", f"az://{store.root}/stage", env=store.env())
        assert refused.exit_code == 2 and "PZ0711" in refused.output, refused.output


def test_retention_and_clean_on_other_workers_delete_what_a_run_staged_and_keep_its_history(
    tmp_path: Path, db: str, store: Store
) -> None:
    stage_bucket = store.server.bucket(f"pz-stage-{secrets.token_hex(4)}")
    stage_url = f"s3://{stage_bucket}/team/stage"
    files = _two_writes(db, store, store.server.endpoint)
    files["project.yml"] += "retention: { keep_last: 1 }\n"
    a, b, c = (write_project(tmp_path / name, files) for name in ("a", "b", "c"))
    env = {**store.env(), "PZ_STAGING_URL": stage_url}
    fs = store.server.filesystem()

    def staged_runs() -> set[str]:
        return {key.split("/")[2] for key in stored_keys(fs, stage_bucket, "team/stage")}

    _insert(db, range(1, 6))
    failed = pz(a, "run", env={**env, "PZ_FAILPOINTS": "sink.write@wh.second"})
    assert failed.exit_code == 1, failed.output
    run_a = failed.run_results()["run_id"]
    assert staged_runs() == {run_a}
    second = pz(b, "run", env=env)  # B, a fresh worker: its sweep deletes what A's run staged
    assert second.exit_code == 0, second.output
    run_b = second.run_results()["run_id"]
    assert staged_runs() == {run_b}  # the newest run's staging stays
    assert store.backend().run_ids() == sorted([run_a, run_b])  # the run history stays
    cleaned = pz(c, "clean", env=store.env())  # C, another fresh worker: B's staging goes too
    assert cleaned.exit_code == 0, cleaned.output
    assert staged_runs() == set()
    assert store.backend().run_ids() == sorted([run_a, run_b])
    runs = pz(c, "runs", env=store.env())
    assert runs.exit_code == 0 and run_a in runs.output and run_b in runs.output, runs.output


def test_the_sweep_after_a_run_reads_only_the_few_records_just_out_of_keep_last(
    tmp_path: Path, store: Store
) -> None:
    backend = store.backend()
    ids = [f"20260101T0000{i:02d}000Z-abcd" for i in range(10)]
    for run_id in ids:
        backend.put_run_file(run_id, "run_results.json", json.dumps({"run_id": run_id, "status": "success"}))
    state_dir = tmp_path / ".pz"
    (state_dir / "runs" / ids[6]).mkdir(parents=True)  # this worker made one of them
    (state_dir / "runs" / ids[6] / "run_results.json").write_text("{}")
    history = sweep_history(backend, state_dir, keep_last=2)
    assert history == ids
    copied = sorted(p.name for p in (state_dir / "runs").iterdir())
    assert copied == ids[5:8]  # the SWEEP_BACKLOG (3) newest runs out of the window, one already here
    assert SWEEP_BACKLOG == 3
    assert sweep_history(LocalBackend(state_dir), state_dir, keep_last=2) is None  # the local folder's ids
