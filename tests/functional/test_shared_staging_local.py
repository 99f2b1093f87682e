"""Two machines, one PostgreSQL state backend, one shared staging, the local executor: two copies of one
project in two folders (clone A, clone B). A's run publishes its source loads to the shared staging (a
folder both see, or s3 on a moto server on loopback); when it fails, `pz retry` on B reuses A's loads from
there (the source table is gone by then: it is not read again) and carries A's committed writes forward.
A retry on A itself keeps reading A's staging.duckdb; a broken manifest makes B extract again, with a note,
never wrong rows; `pz clean` deletes the shared copy; a staging that cannot be used is refused before
anything runs."""

from __future__ import annotations

import json
import secrets
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pyarrow.fs as pafs
import pytest

from pipelinez.engine.run.executor_choice import ExecutorChoice, choose_executor, with_project_staging
from tests.conftest import PG_HOST, PG_PORT, PG_USER, PzResult, fresh_pg_database, pz, write_project
from tests.functional.test_retry import PARTS
from tests.objstores import S3_KEY_ID, S3_SECRET, S3Server, free_port, moto_server

SECRETS = {"S3_ID": S3_KEY_ID, "S3_SECRET": S3_SECRET}
LOAD = "src_src__items"  # the source load's node (and staging table)
FAIL_SECOND = {"PZ_FAILPOINTS": "sink.write@wh.second"}


def _files(db: str, endpoint: str | None) -> dict[str, str]:
    conn = f"{{ host: {PG_HOST}, port: {PG_PORT}, user: {PG_USER}, database: {db} }}"
    staging = ""
    if endpoint is not None:
        staging = textwrap.dedent(f"""
            env:
              S3_ID: {{}}
              S3_SECRET: {{ secret: true }}
            engine:
              retry: {{ max_attempts: 1 }}
              staging:
                endpoint: "{endpoint}"
                access_key_id: "{{{{ env('S3_ID') }}}}"
                secret_access_key: "{{{{ env('S3_SECRET') }}}}"
        """)
    else:
        staging = "engine:\n  retry: { max_attempts: 1 }\n"
    state = f"state:\n  backend: postgres\n  connection: {conn}\n  schema: pz_state\n"
    return {
        "project.yml": f"name: twin\n{state}{staging}",
        "sources/src.yml": f"connector: postgres\nconnection: {conn}\ndatasets:\n  items:\n"
        "    table: public.items\n    columns: { id: int, v: varchar }\n",
        "sinks/wh.yml": f"connector: postgres\nconnection: {conn}\noutputs:\n"
        "  copy: { strategy: append, duplicates: accept }\n"
        "  second: { strategy: append, duplicates: accept }\n",
        "pipelines/copy.sql": "INSERT INTO {{ sink('wh', 'copy') }}\n"
        "SELECT * FROM {{ source('src', 'items') }}\n",
        "pipelines/second.sql": "INSERT INTO {{ sink('wh', 'second') }}\n"
        "SELECT * FROM {{ source('src', 'items') }}\n",
    }


def _sql(db: str, statement: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=db, autocommit=True) as con:
        cur = con.execute(statement)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


def _ids(db: str, table: str) -> list[int]:
    return [int(r[0]) for r in _sql(db, f"SELECT id FROM public.{table} ORDER BY id")]


@pytest.fixture
def db() -> Iterator[str]:
    with fresh_pg_database("CREATE TABLE items (id integer PRIMARY KEY, v text)") as name:
        _sql(name, "INSERT INTO items SELECT i, 'v' || i FROM generate_series(1, 5) AS i")
        yield name


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with moto_server() as server:
        yield server


class Shared:
    """One shared staging: where it is, and what it holds (relative paths -> bytes)."""

    def __init__(self, url: str, s3: S3Server | None = None, folder: Path | None = None):
        self.url, self.s3, self.folder = url, s3, folder

    @property
    def endpoint(self) -> str | None:
        return self.s3.endpoint if self.s3 else None

    def files(self) -> dict[str, bytes]:
        if self.folder is not None:
            if not self.folder.exists():
                return {}
            files = [p for p in self.folder.rglob("*") if p.is_file()]
            return {str(p.relative_to(self.folder)): p.read_bytes() for p in files}
        assert self.s3 is not None
        bucket, _, prefix = self.url[len("s3://") :].partition("/")
        fs = self.s3.filesystem()
        selector = pafs.FileSelector(f"{bucket}/{prefix}", recursive=True, allow_not_found=True)
        infos = fs.get_file_info(selector)
        found = {}
        for info in infos:
            if info.type == pafs.FileType.File:
                with fs.open_input_stream(info.path) as stream:
                    found[info.path[len(bucket) + len(prefix) + 2 :]] = stream.read()
        return found

    def write(self, relative: str, data: bytes) -> None:
        if self.folder is not None:
            (self.folder / relative).write_bytes(data)
            return
        assert self.s3 is not None
        bucket, _, prefix = self.url[len("s3://") :].partition("/")
        with self.s3.filesystem().open_output_stream(f"{bucket}/{prefix}/{relative}") as out:
            out.write(data)

    def delete(self, relative: str) -> None:
        if self.folder is not None:
            (self.folder / relative).unlink()
            return
        assert self.s3 is not None
        bucket, _, prefix = self.url[len("s3://") :].partition("/")
        self.s3.filesystem().delete_file(f"{bucket}/{prefix}/{relative}")


@pytest.fixture(params=["folder", "s3"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Shared:
    if request.param == "folder":
        folder = tmp_path / "shared-mount" / "pz-staging"
        return Shared(str(folder), folder=folder)
    server: S3Server = request.getfixturevalue("s3")
    bucket = server.bucket(f"pz-shared-{secrets.token_hex(4)}")
    return Shared(f"s3://{bucket}/team/stage", s3=server)


def _clones(tmp_path: Path, db: str, shared: Shared) -> tuple[Path, Path]:
    files = _files(db, shared.endpoint)
    return write_project(tmp_path / "a", files), write_project(tmp_path / "b", files)


def _fail_on_a(a: Path, shared: Shared) -> PzResult:
    """A's run: the source load and the first write succeed, the second write fails."""
    failed = pz(a, "run", env={**SECRETS, **FAIL_SECOND, "PZ_STAGING_URL": shared.url})
    assert failed.exit_code == 1, failed.output
    return failed


def _node(results: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(next(n for n in results["nodes"] if n["name"] == name))


def test_a_run_that_failed_on_a_is_finished_on_b_from_the_shared_staging(
    tmp_path: Path, db: str, shared: Shared
) -> None:
    a, b = _clones(tmp_path, db, shared)
    failed = _fail_on_a(a, shared)
    run_a = failed.run_results()
    assert run_a["args"]["staging"] == shared.url  # recorded for a retry anywhere
    manifest = json.loads(shared.files()[f"{run_a['run_id']}/{LOAD}/_manifest.json"])
    assert manifest["rows"] == 5 and manifest["node_id"] == _node(run_a, LOAD)["id"]
    assert _ids(db, "copy") == [1, 2, 3, 4, 5]  # A's committed write

    _sql(db, "DROP TABLE public.items")  # B cannot read the source: it must reuse A's staged load
    retry = pz(b, "retry", env=SECRETS)
    assert retry.exit_code == 0, retry.output
    assert "reusing staged data for 1 source load(s)" in retry.output
    assert "carrying forward 1 committed sink write(s)" in retry.output
    run_b = retry.run_results()
    assert run_b["retry_of"] == run_a["run_id"]
    load = _node(run_b, LOAD)
    assert (load["provenance"], load["reused_from"], load["rows"]) == ("reused", run_a["run_id"], 5)
    assert _node(run_b, "wh.copy")["status"] == "carried_forward"
    assert _ids(db, "copy") == [1, 2, 3, 4, 5]  # carried forward, not written twice
    assert _ids(db, "second") == [1, 2, 3, 4, 5]
    # B's retry published its loads too: a retry of it on a third machine would reuse them
    assert f"{run_b['run_id']}/{LOAD}/_manifest.json" in shared.files()
    assert S3_SECRET not in retry.output + failed.output
    assert not any(S3_SECRET.encode() in data for data in shared.files().values())
    for state_file in [*(a / ".pz").rglob("*"), *(b / ".pz").rglob("*")]:  # staging.duckdb, logs, events
        assert not state_file.is_file() or S3_SECRET.encode() not in state_file.read_bytes(), state_file

    cleaned = pz(b, "clean", env=SECRETS)  # B's history holds A's run: both shared folders go
    assert cleaned.exit_code == 0, cleaned.output
    assert shared.files() == {}


def test_a_retry_on_the_same_worker_reads_its_own_staging_database(tmp_path: Path, db: str) -> None:
    folder = tmp_path / "shared"
    shared = Shared(str(folder), folder=folder)
    files = _files(db, None)
    # the staging named in project.yml (engine.staging.url), as ephemeral workers are set up
    files["project.yml"] = files["project.yml"].replace(
        "engine:\n", f"engine:\n  staging: {{ url: '{folder}' }}\n"
    )
    a = write_project(tmp_path / "a", files)
    failed = pz(a, "run", env=FAIL_SECOND)
    assert failed.exit_code == 1, failed.output
    run_id = failed.run_results()["run_id"]
    assert failed.run_results()["args"]["staging"] == str(folder)
    assert f"{run_id}/{LOAD}/_manifest.json" in shared.files()
    for name in shared.files():  # the shared copy is gone; A's staging.duckdb is still there
        shared.delete(name)
    _sql(db, "DROP TABLE public.items")
    retry = pz(a, "retry")
    assert retry.exit_code == 0, retry.output
    load = _node(retry.run_results(), LOAD)
    assert (load["provenance"], load["reused_from"]) == ("reused", run_id)
    assert _ids(db, "second") == [1, 2, 3, 4, 5]


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ("garbage", "_manifest.json cannot be read"),
        ("missing", "has no _manifest.json"),
        ("rows", "records 99 rows, the run recorded 5"),
        ("parquet", "is gone"),
    ],
)
def test_a_broken_manifest_on_the_shared_staging_is_extracted_again_with_a_note(
    tmp_path: Path, db: str, damage: str, why: str
) -> None:
    folder = tmp_path / "shared"
    shared = Shared(str(folder), folder=folder)
    a, b = _clones(tmp_path, db, shared)
    run_id = _fail_on_a(a, shared).run_results()["run_id"]
    manifest_name = f"{run_id}/{LOAD}/_manifest.json"
    manifest = json.loads(shared.files()[manifest_name])
    if damage == "garbage":
        shared.write(manifest_name, b"{ not json")
    elif damage == "missing":
        shared.delete(manifest_name)
    elif damage == "rows":
        shared.write(manifest_name, json.dumps({**manifest, "rows": 99}).encode())
    else:
        shared.delete(f"{run_id}/{LOAD}/{manifest['files'][0]}")
    _sql(db, "INSERT INTO items VALUES (6, 'v6')")  # a re-extraction reads the source as it is now
    retry = pz(b, "retry")
    assert retry.exit_code == 0, retry.output
    assert f"cannot reuse staged data for {LOAD}" in retry.output and why in retry.output, retry.output
    load = _node(retry.run_results(), LOAD)
    assert load.get("provenance") is None and load["rows"] == 6
    assert _ids(db, "second") == [1, 2, 3, 4, 5, 6]  # read again, never the damaged copy
    # a write is carried forward only when every load feeding it is reused: copy runs again, like its sibling
    assert _node(retry.run_results(), "wh.copy")["status"] == "success"


def test_a_shared_staging_that_cannot_be_used_is_refused_before_anything_runs(
    tmp_path: Path, db: str, s3: S3Server
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    folder = Shared(str(blocker / "stage"), folder=blocker / "stage")
    a, _ = _clones(tmp_path, db, folder)
    refused = pz(a, "run", "--staging", str(blocker / "stage"))
    assert refused.exit_code == 2, refused.output
    assert "error: PZ0711" in refused.output and str(blocker / "stage") in refused.output
    assert "every worker that may retry the run" in refused.output

    remote = write_project(tmp_path / "s3", _files(db, s3.endpoint))
    missing = pz(remote, "run", env={**SECRETS, "PZ_STAGING_URL": "s3://no-such-bucket-pz/x"})
    assert missing.exit_code == 2 and "PZ0531" in missing.output, missing.output
    assert "no-such-bucket-pz" in missing.output
    unreachable = write_project(tmp_path / "down", _files(db, f"http://127.0.0.1:{free_port()}"))
    down = pz(unreachable, "run", "--staging", "s3://pz-stage/x", env=SECRETS)
    assert down.exit_code == 2 and "PZ0711" in down.output and "cannot be reached" in down.output, down.output
    assert "executor local" in down.output
    for result in (refused, missing, down):
        assert S3_SECRET not in result.output
    for project in (a, remote, unreachable):
        assert not (project / ".pz" / "runs").exists() or not any((project / ".pz" / "runs").iterdir())
    assert _sql(db, "SELECT to_regclass('public.copy')") == [(None,)]  # nothing moved


def test_the_local_executor_takes_a_staging_from_flags_env_or_the_run_it_retries(tmp_path: Path) -> None:
    state = tmp_path / ".pz"
    assert choose_executor(None, None, {}, state) == ExecutorChoice("local")
    flag = choose_executor(None, str(tmp_path / "s"), {}, state)
    assert flag == ExecutorChoice("local", str((tmp_path / "s").resolve()))
    env = choose_executor(None, None, {"PZ_STAGING_URL": "s3://pz-stage/a/"}, state)
    assert env == ExecutorChoice("local", "s3://pz-stage/a")
    failed_run = ExecutorChoice("local", "s3://pz-stage/a")
    assert choose_executor(None, None, {}, state, default=failed_run) == failed_run  # a retry publishes too
    ray_run = ExecutorChoice("ray", "s3://pz-stage/r")
    assert choose_executor("local", None, {}, state, default=ray_run) == ExecutorChoice("local")
    # project.yml's engine.staging.url: used when nothing else named a staging, never over one that did
    project = {"url": "s3://pz-stage/project/"}
    local = with_project_staging(choose_executor(None, None, {}, state), project)
    assert local == ExecutorChoice("local", "s3://pz-stage/project")
    ray = with_project_staging(choose_executor("ray", None, {}, state), project)
    assert ray.staging == "s3://pz-stage/project"
    assert with_project_staging(env, project) == env
    retried = choose_executor(None, None, {}, state, default=failed_run)
    assert with_project_staging(retried, project) == failed_run


def test_a_partitioned_load_that_failed_part_way_resumes_on_another_worker(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p", PARTS)
    folder = tmp_path / "shared"
    failed = pz(
        project, "run", "--staging", str(folder), env={"PZ_FAILPOINTS": "source.landed@src_files__parts#2"}
    )
    assert failed.exit_code == 1, failed.output
    run_id = failed.run_results()["run_id"]
    published = sorted(p.parent.name for p in (folder / run_id).glob("*/_manifest.json"))
    assert published == [f"src_files__parts__part{i}" for i in (0, 1, 3)]  # the landed partitions
    for staging in (project / ".pz" / "runs" / run_id).glob("staging.duckdb*"):
        staging.unlink()  # the worker that ran it is gone with its staging database
    for i in range(4):  # landed partitions come from the shared staging: their new content stays unread
        (project / "data" / "parts" / f"p{i}.csv").write_text(f"id,v\n{i},second\n{i + 10},second\n")
    retry = pz(project, "retry")
    assert retry.exit_code == 0, retry.output
    assert f"note: resuming src_files__parts past 3 partition(s) that landed in run {run_id}" in retry.output
    node = _node(retry.run_results(), "src_files__parts")
    assert [p.get("provenance") for p in node["partitions"]] == ["reused", "reused", None, "reused"]
    with duckdb.connect(str(project / "out" / "wh.duckdb"), read_only=True) as con:
        rows = con.execute("SELECT id % 10, v FROM all_parts GROUP BY ALL ORDER BY 1").fetchall()
    assert rows == [(0, "first"), (1, "first"), (2, "second"), (3, "first")]


def _staged_runs(shared: Shared) -> set[str]:
    return {name.split("/", 1)[0] for name in shared.files()}


def _backend_runs(db: str) -> list[str]:
    rows = _sql(db, "SELECT DISTINCT run_id FROM pz_state.run_files WHERE name = 'run_results.json'")
    return sorted(str(r[0]) for r in rows)


def test_retention_and_clean_on_other_workers_delete_what_a_run_staged_and_keep_its_history(
    tmp_path: Path, db: str, shared: Shared
) -> None:
    files = _files(db, shared.endpoint)
    files["project.yml"] += "retention: { keep_last: 1 }\n"
    a, b, c = (write_project(tmp_path / name, files) for name in ("a", "b", "c"))
    run_a = _fail_on_a(a, shared).run_results()["run_id"]
    assert _staged_runs(shared) == {run_a}
    # B, a fresh worker: its run pushes A's out of keep_last, and its sweep deletes what A's run staged
    second = pz(b, "run", env={**SECRETS, "PZ_STAGING_URL": shared.url})
    assert second.exit_code == 0, second.output
    run_b = second.run_results()["run_id"]
    assert _staged_runs(shared) == {run_b}  # the newest run's staging stays
    assert _backend_runs(db) == sorted([run_a, run_b])  # the run history stays, as in a local .pz/runs
    runs = pz(b, "runs")
    assert runs.exit_code == 0 and run_a in runs.output and run_b in runs.output, runs.output
    cleaned = pz(c, "clean", env=SECRETS)  # C, another fresh worker: B's staging goes too
    assert cleaned.exit_code == 0, cleaned.output
    assert shared.files() == {}
    assert _backend_runs(db) == sorted([run_a, run_b])
    assert S3_SECRET not in second.output + cleaned.output
