"""The Ray executor staging on S3 (`--staging s3://bucket/prefix`), against a moto S3 server on 127.0.0.1 and
the session's local Ray instance: the same outcome as the local executor, manifests and Parquet under the
prefix (nothing else), no secret in any staged object, artifact or Ray log, `pz retry` reusing the s3-staged
loads and `pz clean` deleting them; a missing bucket, an unreachable endpoint and a literal secret are clean
PZ errors before anything runs."""

from __future__ import annotations

import json
import secrets
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest

from pipelinez.engine.staging.shared_staging import staging_root
from tests.conftest import pz, write_project
from tests.functional.test_ray_parity import FILES, _node_lines, _outcome
from tests.objstores import S3_KEY_ID, S3_SECRET, S3Server, free_port, moto_server

ENV = {"S3_ID": S3_KEY_ID, "S3_SECRET": S3_SECRET}


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with moto_server() as server:
        yield server


@pytest.fixture
def bucket(s3: S3Server) -> str:
    return s3.bucket(f"pz-stage-{secrets.token_hex(4)}")


def _project_yml(endpoint: str) -> str:
    return textwrap.dedent(f"""
        name: shop
        env:
          S3_ID: {{}}
          S3_SECRET: {{ secret: true }}
        engine:
          threads: 2
          retry: {{ max_attempts: 1 }}
          staging:
            endpoint: "{endpoint}"
            access_key_id: "{{{{ env('S3_ID') }}}}"
            secret_access_key: "{{{{ env('S3_SECRET') }}}}"
    """).lstrip()


def _files(s3: S3Server) -> dict[str, str]:
    return {**FILES, "project.yml": _project_yml(s3.endpoint)}


def _objects(s3: S3Server, bucket: str, prefix: str = "") -> dict[str, bytes]:
    fs = s3.filesystem()
    infos = fs.get_file_info(pafs.FileSelector(f"{bucket}/{prefix}".rstrip("/"), recursive=True))
    found = {}
    for info in infos:
        if info.type == pafs.FileType.File:
            with fs.open_input_stream(info.path) as stream:
                found[info.path[len(bucket) + 1 :]] = stream.read()
    return found


def _results(project: Path) -> dict[str, Any]:
    run = sorted((project / ".pz" / "runs").iterdir())[-1]
    return dict(json.loads((run / "run_results.json").read_text()))


def _attach(s3: S3Server, location: str) -> Any:
    settings = {"endpoint": s3.endpoint, "access_key_id": S3_KEY_ID, "secret_access_key": S3_SECRET}
    return staging_root(location, settings).attach


def test_a_ray_run_staged_on_s3_gives_what_the_local_executor_gives_and_no_secret_leaks(
    tmp_path: Path, ray_instance: Any, s3: S3Server, bucket: str
) -> None:
    local = write_project(tmp_path / "local", _files(s3))
    remote = write_project(tmp_path / "ray", _files(s3))
    staging = f"s3://{bucket}/pz/stage"
    by_local = pz(local, "run", env=ENV)
    by_ray = pz(remote, "run", "--executor", "ray", "--staging", staging, env=ENV)
    assert by_local.exit_code == 0, by_local.output
    assert by_ray.exit_code == 0, by_ray.output
    expected = _outcome(local)
    assert expected["nodes"] and expected["staged"]
    assert _outcome(remote, _attach(s3, staging)) == expected  # the driver's views read the s3 Parquet
    assert _node_lines(by_ray.lines) == _node_lines(by_local.lines)

    results = _results(remote)
    run_id = results["run_id"]
    assert results["args"]["staging"] == staging
    objects = _objects(s3, bucket)
    # every stored table is a manifest and exactly the Parquet objects it lists, under <prefix>/<run-id>/
    # (no write probe, no other attempt's object left behind)
    tables: dict[str, list[str]] = {}
    for key in objects:
        assert key.startswith(f"pz/stage/{run_id}/"), key
        table, name = key[len(f"pz/stage/{run_id}/") :].split("/")
        tables.setdefault(table, []).append(name)
    assert sorted(tables) == ["src_files__customers", "src_files__orders", "totals"]
    for table, names in tables.items():
        manifest = json.loads(objects[f"pz/stage/{run_id}/{table}/_manifest.json"])
        assert sorted(names) == sorted(["_manifest.json", *manifest["files"]])
        node = next(n for n in results["nodes"] if n["name"] == table)
        assert (manifest["run_id"], manifest["rows"], manifest["node_id"]) == (
            run_id,
            node["rows"],
            node["id"],
        )
    totals = json.loads(objects[f"pz/stage/{run_id}/totals/_manifest.json"])
    assert {"name": "ids", "type": "HUGEINT", "stored": "VARCHAR"} in totals["columns"]

    # the secret went to the workers inside the pickled task only: no staged object, artifact or Ray log
    # holds it, and the driver's staging.duckdb keeps views (URLs), never the secret DuckDB signs with
    assert S3_SECRET not in by_ray.output
    for key, data in objects.items():
        assert S3_SECRET.encode() not in data, key
    logs = Path(ray_instance._private.worker._global_node.get_session_dir_path())
    for folder in (remote, logs):
        for path in folder.rglob("*"):
            if path.is_file() and not path.is_symlink():
                assert S3_SECRET.encode() not in path.read_bytes(), path


def test_pz_retry_after_a_sink_failure_reuses_the_s3_staged_loads_and_retention_and_clean_delete_them(
    tmp_path: Path, ray_instance: Any, s3: S3Server, bucket: str
) -> None:
    # keep_last 1: the failed run's staging is the newest when the retry reads it, then swept by the retry
    files = {**FILES, "project.yml": _project_yml(s3.endpoint) + "retention: { keep_last: 1 }\n"}
    project = write_project(tmp_path / "p", files)
    staging = f"s3://{bucket}/runs"
    failed = pz(
        project,
        "run",
        "--executor",
        "ray",
        "--staging",
        staging,
        env={**ENV, "PZ_FAILPOINTS": "sink.write@wh.totals"},
    )
    assert failed.exit_code == 1, failed.output
    first = _results(project)
    assert next(n for n in first["nodes"] if n["name"] == "wh.totals")["status"] == "failed"
    # no flag: the retry runs on the executor and the s3 staging of the run it finishes
    retried = pz(project, "retry", env=ENV)
    assert retried.exit_code == 0, retried.output
    assert "note: reusing staged data for 2 source load(s)" in retried.output
    results = _results(project)
    assert results["retry_of"] == first["run_id"]
    assert (results["args"]["executor"], results["args"]["staging"]) == ("ray", staging)
    for name in ("src_files__orders", "src_files__customers"):
        node = next(n for n in results["nodes"] if n["name"] == name)
        assert (node["provenance"], node["reused_from"]) == ("reused", first["run_id"])
    assert next(n for n in results["nodes"] if n["name"] == "wh.totals")["status"] == "success"
    manifest = json.loads(_objects(s3, bucket)[f"runs/{results['run_id']}/src_files__orders/_manifest.json"])
    assert manifest["rows"] == 4  # the reused load is staged again under the retry's own run
    # the retention sweep deleted what the failed run staged on S3 (engine.staging's keys); pz clean the rest
    assert {key.split("/")[1] for key in _objects(s3, bucket)} == {results["run_id"]}
    assert pz(project, "clean", env=ENV).exit_code == 0
    assert _objects(s3, bucket) == {}


def test_a_missing_bucket_an_unreachable_endpoint_and_a_literal_secret_are_refused_before_anything_runs(
    tmp_path: Path, s3: S3Server
) -> None:
    project = write_project(tmp_path / "p", _files(s3))
    missing = pz(project, "run", "--executor", "ray", "--staging", "s3://no-such-bucket-pz/x", env=ENV)
    assert missing.exit_code == 2, missing.output
    assert "error: PZ0531" in missing.output
    assert "the staging bucket 'no-such-bucket-pz' does not exist at endpoint 127.0.0.1:" in missing.output
    assert "pz never creates one" in missing.output
    assert s3.filesystem().get_file_info("no-such-bucket-pz").type == pafs.FileType.NotFound  # not created

    cut = write_project(tmp_path / "cut", {**FILES, "project.yml": _project_yml(f"127.0.0.1:{free_port()}")})
    unreachable = pz(cut, "run", "--executor", "ray", "--staging", "s3://pz-stage/x", env=ENV)
    assert unreachable.exit_code == 2, unreachable.output
    assert "error: PZ0711" in unreachable.output and "cannot be reached" in unreachable.output
    assert "next: check the endpoint in project.yml engine.staging" in unreachable.output

    literal = write_project(
        tmp_path / "literal",
        {**FILES, "project.yml": _project_yml(s3.endpoint).replace("{{ env('S3_SECRET') }}", S3_SECRET)},
    )
    refused = pz(literal, "validate", env=ENV)
    assert refused.exit_code == 2, refused.output
    assert "error: PZ0711" in refused.output and "engine.staging: secret_access_key must come from" in (
        refused.output
    )
    for result in (missing, unreachable, refused):
        assert S3_SECRET not in result.output
    for folder in (project, cut, literal):
        assert not (folder / ".pz" / "runs").exists()  # refused before any run started


def test_an_s3_publish_writes_its_manifest_after_its_parquet_and_a_failed_attempt_changes_nothing_read(
    s3: S3Server, bucket: str
) -> None:
    import duckdb

    from pipelinez.engine.staging.shared_staging import SharedStagingStore
    from pipelinez.engine.staging.staging_store import ReuseUnavailable

    settings = {"endpoint": s3.endpoint, "access_key_id": S3_KEY_ID, "secret_access_key": S3_SECRET}
    root = staging_root(f"s3://{bucket}/st", settings)
    con = duckdb.connect()
    root.attach(con)
    con.execute("CREATE TABLE t AS SELECT range AS id, range::HUGEINT AS big FROM range(5)")
    real_write = root.write_text
    present_at_manifest: list[dict[str, int | None]] = []

    def spy(uri: str, text: str) -> None:
        listed = json.loads(text)["files"]
        present_at_manifest.append({f: root.size(root.file_uri("r1", "t", f)) for f in listed})
        real_write(uri, text)

    def refuse(uri: str, text: str) -> None:
        raise OSError("AWS Error ACCESS_DENIED during PutObject operation")

    object.__setattr__(root, "write_text", spy)
    first = root.publish(con, "r1", "t", node="t", node_id="n1")
    assert present_at_manifest and all(size for size in present_at_manifest[0].values())  # objects first

    con.execute("INSERT INTO t SELECT * FROM t")  # the next attempt would stage 10 rows
    object.__setattr__(root, "write_text", refuse)
    with pytest.raises(OSError):
        root.publish(con, "r1", "t", node="t", node_id="n1")
    # the failed attempt's Parquet may exist, but no manifest lists it: readers see the first attempt's rows
    store = SharedStagingStore(root)
    assert root.read_manifest("r1", "t").files == first.files
    reader = duckdb.connect()
    assert store.copy(reader, "r1", "t", "copy") == 5
    assert reader.execute("SELECT typeof(big) FROM copy LIMIT 1").fetchone() == ("HUGEINT",)

    object.__setattr__(root, "write_text", real_write)
    third = root.publish(con, "r1", "t", node="t", node_id="n1")
    assert store.copy(reader, "r1", "t", "copy") == 10
    assert root.names("r1", "t") == sorted(["_manifest.json", *third.files])  # earlier attempts swept
    root.unpublish("r1", "t")
    with pytest.raises(ReuseUnavailable, match=r"has no _manifest\.json"):
        root.read_manifest("r1", "t")


def _fake_ray_run(project: Path, run_id: str, staging: str) -> None:
    """A run record as a Ray run leaves it: its staging in run_results.json args (what the sweep reads)."""
    folder = project / ".pz" / "runs" / run_id
    folder.mkdir(parents=True)
    (folder / "run_results.json").write_text(json.dumps({"run_id": run_id, "args": {"staging": staging}}))


def _stage_object(s3: S3Server, bucket: str, key: str) -> None:
    with s3.filesystem().open_output_stream(f"{bucket}/{key}") as stream:
        stream.write(b"staged")


def test_an_s3_removal_is_recorded_so_later_sweeps_never_ask_the_store_again_and_a_failed_one_is_retried(
    tmp_path: Path, s3: S3Server, bucket: str
) -> None:
    run_id = "20261201T000000000Z-aaaa"
    project = write_project(
        tmp_path / "p",
        {**FILES, "project.yml": _project_yml(f"127.0.0.1:{free_port()}")},  # nothing listens
    )
    _fake_ray_run(project, run_id, f"s3://{bucket}/runs")
    _stage_object(s3, bucket, f"runs/{run_id}/src_files__orders/part-1.parquet")
    marker = project / ".pz" / "runs" / run_id / "staged.removed"

    unreachable = pz(project, "clean", env=ENV)
    assert unreachable.exit_code == 0, unreachable.output
    kept = f"note: run {run_id}: what it staged at s3://{bucket}/runs could not be removed"
    assert kept in unreachable.output
    assert set(_objects(s3, bucket)) == {f"runs/{run_id}/src_files__orders/part-1.parquet"}
    assert not marker.exists()  # not removed, so not recorded: the next sweep tries again

    (project / "project.yml").write_text(_project_yml(s3.endpoint))
    assert pz(project, "clean", env=ENV).exit_code == 0
    assert _objects(s3, bucket) == {}
    assert marker.exists()

    # recorded: a later clean does not list or delete under the run again (an object put there stays)
    _stage_object(s3, bucket, f"runs/{run_id}/late.parquet")
    assert pz(project, "clean", env=ENV).exit_code == 0
    assert set(_objects(s3, bucket)) == {f"runs/{run_id}/late.parquet"}


def test_pz_clean_without_the_staging_secret_keeps_what_runs_staged_on_s3_and_deletes_staged_folders(
    tmp_path: Path, s3: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipelinez.engine.staging.object_staging import ObjectStagingRoot

    s3_run, folder_run = "20261201T000000000Z-aaaa", "20261201T000001000Z-bbbb"
    project = write_project(tmp_path / "p", _files(s3))
    _fake_ray_run(project, s3_run, f"s3://{bucket}/runs")
    _stage_object(s3, bucket, f"runs/{s3_run}/src_files__orders/part-1.parquet")
    shared = tmp_path / "shared"
    (shared / folder_run / "src_files__orders").mkdir(parents=True)
    _fake_ray_run(project, folder_run, str(shared))

    asked: list[tuple[str, dict[str, Any]]] = []
    remove_run = ObjectStagingRoot.remove_run

    def recorded(self: ObjectStagingRoot, run_id: str) -> None:
        asked.append((run_id, dict(self.settings)))
        remove_run(self, run_id)

    monkeypatch.setattr(ObjectStagingRoot, "remove_run", recorded)
    monkeypatch.delenv("S3_SECRET", raising=False)
    unset = pz(project, "clean", env={"S3_ID": S3_KEY_ID})  # S3_SECRET unset: engine.staging cannot render
    assert unset.exit_code == 0, unset.output
    assert f"note: run {s3_run}: what it staged at s3://{bucket}/runs was kept" in unset.output
    assert "engine.staging in project.yml cannot be rendered (run pz validate)" in unset.output
    assert asked == []  # the store is not asked at all (not anonymously, not at AWS's default endpoint)
    assert set(_objects(s3, bucket)) == {f"runs/{s3_run}/src_files__orders/part-1.parquet"}
    assert not (project / ".pz" / "runs" / s3_run / "staged.removed").exists()
    assert not (shared / folder_run).exists()  # a folder needs no settings: deleted

    # kept for a later clean that can render engine.staging
    later = pz(project, "clean", env=ENV)
    assert later.exit_code == 0 and "note:" not in later.output, later.output
    assert [run_id for run_id, _ in asked] == [s3_run]
    assert asked[0][1]["endpoint"] == s3.endpoint
    assert _objects(s3, bucket) == {}
