"""The `s3` connector end to end against a moto S3 server on 127.0.0.1: reads by key, prefix and glob in
each format, replace and append writes, replace atomicity under injected failures, plan-time refusals
(PZ0312, PZ0313) and secrets kept out of every artifact."""

from __future__ import annotations

import gzip
import io
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from tests.conftest import PzResult, pz, pz_subprocess, write_project
from tests.objstores import S3_KEY_ID, S3_SECRET, S3Server, moto_server, stored_contents, stored_keys

ENV = {"S3_ID": S3_KEY_ID, "S3_SECRET": S3_SECRET}
PROJECT_YML = "name: s3t\nenv:\n  S3_ID: {}\n  S3_SECRET: { secret: true }\n"


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with moto_server() as server:
        yield server


@pytest.fixture
def bucket(s3: S3Server) -> str:
    return s3.bucket(f"pz-{secrets.token_hex(4)}")


def connection(s3: S3Server, bucket: str) -> str:
    return (
        f'{{ bucket: {bucket}, endpoint: "{s3.endpoint}", access_key_id: "{{{{ env(\'S3_ID\') }}}}", '
        f"secret_access_key: \"{{{{ env('S3_SECRET') }}}}\" }}"
    )


def put(s3: S3Server, path: str, data: bytes) -> None:
    with s3.filesystem().open_output_stream(path, compression=None) as f:  # the bytes as given
        f.write(data)


def put_parquet(s3: S3Server, path: str, table: pa.Table) -> None:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    put(s3, path, sink.getvalue())


def keys(s3: S3Server, bucket: str, prefix: str = "") -> list[str]:
    """The keys under `prefix`, without the manifests pz keeps next to its outputs' data."""
    return [k for k in stored_keys(s3.filesystem(), bucket, prefix) if not k.endswith("/.pz-manifest.json")]


def manifest(s3: S3Server, bucket: str, prefix: str) -> list[str]:
    """The files an output's manifest names."""
    with s3.filesystem().open_input_stream(f"{bucket}/{prefix}/.pz-manifest.json") as f:
        files: list[str] = json.loads(f.read())["files"]
    return files


def read_parquet(s3: S3Server, path: str) -> list[dict[str, Any]]:
    with s3.filesystem().open_input_file(path) as f:
        return pq.read_table(f).sort_by("id").to_pylist()


def wh_rows(project: Path, table: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(project / "out" / "wh.duckdb"), read_only=True)
    try:
        return con.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
    finally:
        con.close()


def run(project: Path, *args: str, env: dict[str, str] | None = None) -> PzResult:
    return pz(project, *args, env={**ENV, **(env or {})})


# -- sources ---------------------------------------------------------------------------------------------
def test_reads_by_key_prefix_and_glob_in_every_format(tmp_path: Path, s3: S3Server, bucket: str) -> None:
    put(s3, f"{bucket}/csv/2024/a.csv", b"id,name\n1,ann\n2,bob\n")
    put(s3, f"{bucket}/csv/2025/b.csv", b"id,name\n3,cid\n")
    put(s3, f"{bucket}/csv/2025/.hidden.csv", b"id,name\n99,never\n")
    put_parquet(s3, f"{bucket}/pq/part-1.parquet", pa.table({"id": [10, 11], "v": [1.5, 2.5]}))
    put_parquet(s3, f"{bucket}/pq/part-2.parquet", pa.table({"id": [12], "v": [3.5]}))
    put(s3, f"{bucket}/js/events.jsonl", b'{"id": 7, "tags": ["a", "b"]}\n{"id": 8, "tags": []}\n')
    project = write_project(
        tmp_path / "proj",
        {
            "project.yml": PROJECT_YML,
            "sources/lake.yml": f"""
                connector: s3
                connection: {connection(s3, bucket)}
                datasets:
                  one_key: {{ path: csv/2024/a.csv }}
                  prefix: {{ path: csv/, format: csv, columns: {{ id: bigint, name: varchar }} }}
                  glob: {{ path: "csv/**/*.csv" }}
                  parquet: {{ path: "pq/*.parquet" }}
                  json: {{ path: js/events.jsonl }}
            """,
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
            "pipelines/one_key.sql": "INSERT INTO {{ sink('wh', 'one_key') }}\n"
            "SELECT * FROM {{ source('lake', 'one_key') }}\n",
            "pipelines/prefix.sql": "INSERT INTO {{ sink('wh', 'prefix') }}\n"
            "SELECT * FROM {{ source('lake', 'prefix') }}\n",
            "pipelines/globbed.sql": "INSERT INTO {{ sink('wh', 'globbed') }}\n"
            "SELECT * FROM {{ source('lake', 'glob') }}\n",
            "pipelines/pq.sql": "INSERT INTO {{ sink('wh', 'pq') }}\n"
            "SELECT * FROM {{ source('lake', 'parquet') }}\n",
            "pipelines/js.sql": "INSERT INTO {{ sink('wh', 'js') }}\n"
            "SELECT id, len(tags) AS n FROM {{ source('lake', 'json') }}\n",
        },
    )
    result = run(project, "run")
    assert result.exit_code == 0, result.output
    assert wh_rows(project, "one_key") == [(1, "ann"), (2, "bob")]
    assert wh_rows(project, "prefix") == [(1, "ann"), (2, "bob"), (3, "cid")]  # .hidden.csv never read
    assert wh_rows(project, "globbed") == [(1, "ann"), (2, "bob"), (3, "cid")]
    assert wh_rows(project, "pq") == [(10, 1.5), (11, 2.5), (12, 3.5)]
    assert wh_rows(project, "js") == [(7, 2), (8, 0)]
    assert result.node("src_lake__prefix")["tier"] == "native"

    # tier 5 fetches the schema of a dataset without columns from the objects themselves
    check = run(project, "validate", "--connect")
    assert check.exit_code == 0, check.output
    cached = json.loads((project / ".pz" / "target" / "schemas.json").read_text())
    assert "lake" in json.dumps(cached) and "BIGINT" in json.dumps(cached)


def test_a_path_matching_nothing_fails_the_load_with_a_message(
    tmp_path: Path, s3: S3Server, bucket: str
) -> None:
    project = write_project(
        tmp_path / "proj",
        {
            "project.yml": PROJECT_YML,
            "sources/lake.yml": f"""
                connector: s3
                connection: {connection(s3, bucket)}
                datasets:
                  gone: {{ path: "nothing/*.parquet", columns: {{ id: bigint }} }}
            """,
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
            "pipelines/p.sql": "INSERT INTO {{ sink('wh', 'p') }}\n"
            "SELECT * FROM {{ source('lake', 'gone') }}\n",
        },
    )
    result = run(project, "run")
    assert result.exit_code == 1
    assert (
        "PZ0505" in result.output
        and f"no file matches 'nothing/*.parquet' under s3://{bucket}" in result.output
    )


# -- sinks -----------------------------------------------------------------------------------------------
def test_compressed_objects_are_read_once_decompressed(tmp_path: Path, s3: S3Server, bucket: str) -> None:
    """The docs' own example (`raw/customers.csv.gz`, no columns: header and types come from the object),
    and a gzipped JSON file: pyarrow decompressed by the name and the reader did again."""
    put(s3, f"{bucket}/raw/customers.csv.gz", gzip.compress(b"id,name\n1,ann\n2,bob\n"))
    put(s3, f"{bucket}/raw/events.jsonl.gz", gzip.compress(b'{"id": 7, "tags": ["a"]}\n'))
    project = write_project(
        tmp_path / "proj",
        {
            "project.yml": PROJECT_YML,
            "sources/lake.yml": f"""
                connector: s3
                connection: {connection(s3, bucket)}
                datasets:
                  customers: {{ path: raw/customers.csv.gz }}
                  events: {{ path: raw/events.jsonl.gz }}
            """,
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
            "pipelines/customers.sql": "INSERT INTO {{ sink('wh', 'customers') }}\n"
            "SELECT * FROM {{ source('lake', 'customers') }}\n",
            "pipelines/events.sql": "INSERT INTO {{ sink('wh', 'events') }}\n"
            "SELECT id, len(tags) AS n FROM {{ source('lake', 'events') }}\n",
        },
    )
    check = run(project, "validate", "--connect")
    assert check.exit_code == 0, check.output
    result = run(project, "run")
    assert result.exit_code == 0, result.output
    assert wh_rows(project, "customers") == [(1, "ann"), (2, "bob")]
    assert wh_rows(project, "events") == [(7, 1)]


def sink_project(
    root: Path, s3: S3Server, bucket: str, rows: int = 3, extra: str = "", orders: str = ""
) -> Path:
    return write_project(
        root,
        {
            "project.yml": PROJECT_YML + extra,
            "sinks/lake.yml": f"""
                connector: s3
                connection: {connection(s3, bucket)}
                outputs:
                  orders: {{ path: out/orders{orders} }}
                  events: {{ path: out/events, strategy: append, format: json }}
                  csv_copy: {{ path: out/csv_copy, format: csv }}
            """,
            "pipelines/orders.sql": "INSERT INTO {{ sink('lake', 'orders') }}\n"
            "INSERT INTO {{ sink('lake', 'events') }}\n"
            "INSERT INTO {{ sink('lake', 'csv_copy') }}\n"
            f"SELECT range AS id, 'n' || range AS name FROM range({rows})\n",
        },
    )


def test_replace_and_append_write_objects(tmp_path: Path, s3: S3Server, bucket: str) -> None:
    project = sink_project(tmp_path / "p1", s3, bucket, rows=3)
    first = run(project, "run")
    assert first.exit_code == 0, first.output
    assert read_parquet(s3, f"{bucket}/out/orders/part-00000.parquet") == [
        {"id": i, "name": f"n{i}"} for i in range(3)
    ]
    assert keys(s3, bucket, "out/csv_copy") == ["out/csv_copy/part-00000.csv"]
    assert len(keys(s3, bucket, "out/events")) == 1

    second = run(sink_project(tmp_path / "p1", s3, bucket, rows=2), "run")
    assert second.exit_code == 0, second.output
    assert read_parquet(s3, f"{bucket}/out/orders/part-00000.parquet") == [
        {"id": i, "name": f"n{i}"} for i in range(2)
    ]
    events = keys(s3, bucket, "out/events")
    assert len(events) == 2 and all(k.endswith(".json") for k in events)
    assert second.node("lake.events")["batches_committed"] == 1
    # nothing but the outputs and their manifests: no temp prefix is left behind
    everything = stored_keys(s3.filesystem(), bucket)
    assert all(not part.startswith(".") for k in keys(s3, bucket) for part in k.split("/")), everything
    assert [k for k in everything if k not in keys(s3, bucket)] == [
        f"out/{name}/.pz-manifest.json" for name in ("csv_copy", "events", "orders")
    ]


def test_replace_removes_files_an_earlier_append_added(tmp_path: Path, s3: S3Server, bucket: str) -> None:
    put_parquet(s3, f"{bucket}/out/orders/part-old-00000.parquet", pa.table({"id": [100], "name": ["x"]}))
    result = run(sink_project(tmp_path / "p", s3, bucket, rows=2), "run")
    assert result.exit_code == 0, result.output
    assert keys(s3, bucket, "out/orders") == ["out/orders/part-00000.parquet"]


def test_merge_is_refused_at_validate(tmp_path: Path, s3: S3Server, bucket: str) -> None:
    project = write_project(
        tmp_path / "p",
        {
            "project.yml": PROJECT_YML,
            "sinks/lake.yml": f"""
                connector: s3
                connection: {connection(s3, bucket)}
                outputs:
                  orders: {{ path: out/orders, strategy: merge, keys: [id] }}
            """,
            "pipelines/orders.sql": "INSERT INTO {{ sink('lake', 'orders') }}\nSELECT 1 AS id\n",
        },
    )
    result = run(project, "validate")
    assert result.exit_code == 2 and "PZ0305" in result.output, result.output


def test_append_keeps_the_prefix_one_table(tmp_path: Path, s3: S3Server, bucket: str) -> None:
    """An append whose columns differ from the files already there is refused (PZ0517), so the prefix
    stays readable as one table."""
    put_parquet(s3, f"{bucket}/out/log/part-a-00000.parquet", pa.table({"other": [1]}))
    project = write_project(
        tmp_path / "p",
        {
            "project.yml": PROJECT_YML,
            "sinks/lake.yml": f"""
                connector: s3
                connection: {connection(s3, bucket)}
                outputs:
                  log: {{ path: out/log, strategy: append }}
            """,
            "pipelines/log.sql": "INSERT INTO {{ sink('lake', 'log') }}\nSELECT 1::BIGINT AS id\n",
        },
    )
    result = run(project, "run")
    assert result.exit_code == 1 and "PZ0517" in result.output, result.output
    message = result.node("lake.log")["error"]["message"]  # the engine's one column-set rule
    assert "the result has column(s) id that the existing target does not have (it has: other)" in message
    assert "the result does not have the target's column(s) other, which every written row" in message
    assert keys(s3, bucket, "out/log") == ["out/log/part-a-00000.parquet"]


@pytest.mark.parametrize("failpoint", ["sink.before_swap", "sink.before_swap:kill"])
def test_a_failed_replace_leaves_the_prefix_as_it_was(
    tmp_path: Path, s3: S3Server, bucket: str, failpoint: str
) -> None:
    project = sink_project(tmp_path / "p", s3, bucket, rows=3)
    assert run(project, "run").exit_code == 0
    before = {k: s3.filesystem().get_file_info(f"{bucket}/{k}").size for k in keys(s3, bucket, "out/orders")}

    project = sink_project(tmp_path / "p", s3, bucket, rows=5)
    failed = pz_subprocess(project, "run", "--select", "lake.orders", env={**ENV, "PZ_FAILPOINTS": failpoint})
    assert failed.exit_code != 0, failed.output
    after = {k: s3.filesystem().get_file_info(f"{bucket}/{k}").size for k in keys(s3, bucket, "out/orders")}
    assert after == before
    assert read_parquet(s3, f"{bucket}/out/orders/part-00000.parquet") == [
        {"id": i, "name": f"n{i}"} for i in range(3)
    ]
    if failpoint.endswith(":kill"):  # a killed write leaves its temp prefix; the next write sweeps it
        assert any(".orders.pz-tmp-" in k for k in keys(s3, bucket, "out"))
    else:
        assert not any(".orders.pz-tmp-" in k for k in keys(s3, bucket, "out"))

    (project / ".pz" / "lock").unlink(missing_ok=True)
    again = run(project, "run", "--select", "lake.orders")
    assert again.exit_code == 0, again.output
    assert read_parquet(s3, f"{bucket}/out/orders/part-00000.parquet") == [
        {"id": i, "name": f"n{i}"} for i in range(5)
    ]
    assert not any(".orders.pz-tmp-" in k for k in keys(s3, bucket, "out"))


# -- plan-time refusals ----------------------------------------------------------------------------------
def test_force_universal_and_files_per_partition_are_pz0312_at_validate_and_plan(
    tmp_path: Path, s3: S3Server, bucket: str
) -> None:
    project = write_project(
        tmp_path / "p",
        {
            "project.yml": PROJECT_YML + "engine: { force_universal: true }\n",
            "sources/lake.yml": f"""
                connector: s3
                connection: {connection(s3, bucket)}
                datasets:
                  a: {{ path: "a/*.parquet", files_per_partition: 2, columns: {{ id: bigint }} }}
            """,
            "sinks/out.yml": f"""
                connector: s3
                connection: {connection(s3, bucket)}
            """,
            "pipelines/p.sql": "INSERT INTO {{ sink('out', 'p') }}\n"
            "SELECT * FROM {{ source('lake', 'a') }}\n",
        },
    )
    for command in ("validate", "plan", "run"):
        result = run(project, command)
        assert result.exit_code == 2, result.output
        errors = [line for line in result.lines if line.startswith("error: PZ0312")]
        assert len(errors) == 3, result.output  # source force_universal, files_per_partition, sink
        assert any("project.yml:" in e and "source 'lake'" in e for e in errors), result.output
        assert any("sources/lake.yml:" in e and "files_per_partition" in e for e in errors), result.output
        assert any("sink 'out'" in e for e in errors), result.output
    assert not (project / ".pz" / "runs").exists() or not any((project / ".pz" / "runs").iterdir())


def test_instance_force_universal_on_a_sink_is_pz0312(tmp_path: Path, s3: S3Server, bucket: str) -> None:
    project = write_project(
        tmp_path / "p",
        {
            "project.yml": PROJECT_YML,
            "sinks/out.yml": f"""
                connector: s3
                connection: {connection(s3, bucket)}
                engine: {{ force_universal: true }}
            """,
            "pipelines/p.sql": "INSERT INTO {{ sink('out', 'p') }}\nSELECT 1 AS id\n",
        },
    )
    for command in ("validate", "plan"):  # validate and plan agree
        result = run(project, command)
        assert result.exit_code == 2
        assert any(line.startswith("error: PZ0312 sinks/out.yml:3:") for line in result.lines), result.output


def test_a_windowed_dataset_is_pz0313(tmp_path: Path, s3: S3Server, bucket: str) -> None:
    """The gate reads `sync.window` as configured."""
    project = write_project(
        tmp_path / "p",
        {
            "project.yml": PROJECT_YML,
            "sources/lake.yml": f"""
                connector: s3
                connection: {connection(s3, bucket)}
                datasets:
                  ev:
                    path: "ev/*.parquet"
                    columns: {{ id: bigint, ts: timestamp }}
                    sync: {{ mode: incremental, cursor: ts, start: "2024-01-01", window: 1d }}
            """,
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n"
            "outputs:\n  p: { strategy: merge, keys: [id] }\n",
            "pipelines/p.sql": "INSERT INTO {{ sink('wh', 'p') }}\n"
            "SELECT * FROM {{ source('lake', 'ev') }}\n",
        },
    )
    for command in ("validate", "plan"):  # validate and plan agree
        result = run(project, command)
        assert result.exit_code == 2, result.output
        line = next(line for line in result.lines if "PZ0313" in line)
        assert line.startswith("error: PZ0313 sources/lake.yml:7:") and "sync.window 1d" in line, (
            result.output
        )


# -- secrets ---------------------------------------------------------------------------------------------
def test_a_literal_secret_key_is_refused(tmp_path: Path, s3: S3Server, bucket: str) -> None:
    project = write_project(
        tmp_path / "p",
        {
            "project.yml": "name: lit\n",
            "sinks/out.yml": f"""
                connector: s3
                connection: {{ bucket: {bucket}, endpoint: "{s3.endpoint}", access_key_id: k,
                               secret_access_key: {S3_SECRET} }}
            """,
            "pipelines/p.sql": "INSERT INTO {{ sink('out', 'p') }}\nSELECT 1 AS id\n",
        },
    )
    result = pz(project, "validate")
    assert result.exit_code == 2 and "PZ0304" in result.output and "secret env" in result.output
    assert S3_SECRET not in result.output


def test_secrets_never_reach_output_events_or_artifacts(tmp_path: Path, s3: S3Server, bucket: str) -> None:
    put(s3, f"{bucket}/in/a.csv", b"id,name\n1,ann\n")
    project = write_project(
        tmp_path / "p",
        {
            "project.yml": PROJECT_YML,
            "sources/lake.yml": f"""
                connector: s3
                connection: {connection(s3, bucket)}
                datasets:
                  a: {{ path: in/a.csv }}
                  missing: {{ path: in/none.csv, columns: {{ id: bigint }} }}
            """,
            "sinks/out.yml": f"""
                connector: s3
                connection: {connection(s3, bucket)}
            """,
            "sinks/gone.yml": f"""
                connector: s3
                connection: {connection(s3, "no-such-bucket-" + secrets.token_hex(3))}
            """,
            "pipelines/p.sql": "INSERT INTO {{ sink('out', 'p') }}\nINSERT INTO {{ sink('gone', 'p') }}\n"
            "SELECT * FROM {{ source('lake', 'a') }}\n",
            "pipelines/q.sql": "INSERT INTO {{ sink('out', 'q') }}\n"
            "SELECT * FROM {{ source('lake', 'missing') }}\n",
        },
    )
    outputs = [
        run(project, "validate"),
        run(project, "plan"),
        run(project, "--log-format", "json", "plan"),
        run(project, "run"),
        run(project, "--log-format", "json", "run"),
        run(project, "validate", "--connect"),
    ]
    assert outputs[3].exit_code == 1, outputs[3].output  # the missing bucket and the missing file fail
    for result in outputs:
        assert S3_SECRET not in result.output, result.output
    for path in (project / ".pz").rglob("*"):
        if path.is_file():
            assert S3_SECRET.encode() not in path.read_bytes(), path


def test_an_unreachable_endpoint_is_transient_and_retried_by_the_engine(tmp_path: Path) -> None:
    from tests.objstores import free_port

    project = write_project(
        tmp_path / "p",
        {
            "project.yml": PROJECT_YML,
            "sources/lake.yml": f"""
                connector: s3
                connection: {connection(S3Server(f"http://127.0.0.1:{free_port()}"), "b")}
                retry: {{ max_attempts: 2, base_delay: 50ms }}
                datasets:
                  a: {{ path: "a/*.parquet", columns: {{ id: bigint }} }}
            """,
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
            "pipelines/p.sql": "INSERT INTO {{ sink('wh', 'p') }}\nSELECT * FROM {{ source('lake', 'a') }}\n",
        },
    )
    result = run(project, "run")
    assert result.exit_code == 1, result.output
    node = result.node("src_lake__a")
    assert node["attempts"] == 2 and node["error"]["transient"] is True, node


def contents(s3: S3Server, bucket: str, prefix: str) -> dict[str, bytes]:
    return stored_contents(s3.filesystem(), bucket, prefix)


def promote_leftovers(s3: S3Server, bucket: str) -> list[str]:
    """Promote backups and journals anywhere in the bucket: objects, and prefixes (directory markers too)."""
    infos = s3.filesystem().get_file_info(pafs.FileSelector(bucket, recursive=True, allow_not_found=True))
    found = sorted(i.path[len(bucket) + 1 :] for i in infos)
    return [k for k in found if ".pz-bak-" in k or ".pz-promote.json" in k]


def test_a_replace_failing_inside_its_promote_leaves_the_old_objects(
    tmp_path: Path, s3: S3Server, bucket: str
) -> None:
    """A promote with an older object to delete is done object by object: a failure after the new file was
    copied in puts back exactly the old objects with their old bytes; the next replace leaves the result."""
    project = sink_project(tmp_path / "p", s3, bucket, rows=3)
    assert run(project, "run", "--select", "lake.orders").exit_code == 0
    # an object pz did not write: the replace may remove it (foreign_files: replace), so it has one to delete
    put_parquet(s3, f"{bucket}/out/orders/part-old-00000.parquet", pa.table({"id": [100], "name": ["x"]}))
    before = contents(s3, bucket, "out/orders")
    assert len(before) == 3  # the manifest, pz's object and the other one

    project = sink_project(tmp_path / "p", s3, bucket, rows=4, orders=", foreign_files: replace")
    failed = pz_subprocess(
        project, "run", "--select", "lake.orders", env={**ENV, "PZ_FAILPOINTS": "sink.during_promote"}
    )
    assert failed.exit_code == 1, failed.output
    assert "failpoint sink.during_promote" in failed.output, failed.output
    assert contents(s3, bucket, "out/orders") == before
    assert promote_leftovers(s3, bucket) == [] and not any(".pz-tmp-" in k for k in keys(s3, bucket))

    again = run(project, "run", "--select", "lake.orders")
    assert again.exit_code == 0, again.output
    assert keys(s3, bucket, "out/orders") == ["out/orders/part-00000.parquet"]
    assert len(read_parquet(s3, f"{bucket}/out/orders/part-00000.parquet")) == 4
    assert promote_leftovers(s3, bucket) == []


def test_a_failing_restore_keeps_the_promote_error_and_leaves_the_roll_back_to_the_next_write(
    tmp_path: Path, s3: S3Server, bucket: str
) -> None:
    """When putting the output back fails too, the promote's own error is the one reported (the restore's
    failure goes to the run's debug log) and the journal stays: the next write rolls back before it writes."""
    project = sink_project(tmp_path / "p", s3, bucket, rows=3)
    assert run(project, "run", "--select", "lake.orders").exit_code == 0
    put_parquet(s3, f"{bucket}/out/orders/part-old-00000.parquet", pa.table({"id": [100], "name": ["x"]}))
    before = contents(s3, bucket, "out/orders")

    project = sink_project(tmp_path / "p", s3, bucket, rows=4, orders=", foreign_files: replace")
    failpoint = "sink.during_promote,sink.promote_restore"
    failed = pz_subprocess(project, "run", "--select", "lake.orders", env={**ENV, "PZ_FAILPOINTS": failpoint})
    assert failed.exit_code == 1, failed.output
    assert failed.node("lake.orders")["error"]["message"].endswith("failpoint sink.during_promote")
    assert contents(s3, bucket, "out/orders") != before  # the new file is in, the old one not deleted
    assert "out/.orders.pz-promote.json" in promote_leftovers(s3, bucket)
    logs = "".join(p.read_text() for p in (project / ".pz" / "runs").rglob("pz.log"))
    assert "failed too (RuntimeError: failpoint sink.promote_restore)" in logs, logs

    failed = pz_subprocess(
        project, "run", "--select", "lake.orders", env={**ENV, "PZ_FAILPOINTS": "sink.before_swap"}
    )
    assert failed.exit_code == 1 and "failpoint sink.before_swap" in failed.output, failed.output
    assert contents(s3, bucket, "out/orders") == before
    assert promote_leftovers(s3, bucket) == []


def lake_project(root: Path, s3: S3Server, bucket: str, output: str, path: str, sql: str) -> Path:
    """A project of one pipeline `output`, writing `sql`'s rows to the s3 sink's output at `path`."""
    return write_project(
        root,
        {
            "project.yml": PROJECT_YML,
            "sinks/lake.yml": f"""
                connector: s3
                connection: {connection(s3, bucket)}
                outputs:
                  {output}: {{ {path} }}
            """,
            f"pipelines/{output}.sql": f"INSERT INTO {{{{ sink('lake', '{output}') }}}}\n{sql}\n",
        },
    )


def days_project(root: Path, s3: S3Server, bucket: str, rows: int, days: int) -> Path:
    sql = f"SELECT range AS id, range % {days} AS day FROM range({rows})"
    return lake_project(root, s3, bucket, "by_day", "path: out/by_day, partition_by: [day]", sql)


def test_a_promote_killed_midway_is_rolled_back_by_the_next_write_before_it_writes(
    tmp_path: Path, s3: S3Server, bucket: str
) -> None:
    """A partitioned replace promotes several objects. Killed between its copies and its deletes, it leaves a
    mix of old and new partitions plus its journal; the next write puts the old objects back before anything
    else (here that write fails after writing its temp prefix: the output is exactly the old one), and a
    write after that replaces it cleanly."""
    root = tmp_path / "p"
    assert run(days_project(root, s3, bucket, rows=6, days=3), "run").exit_code == 0
    before = contents(s3, bucket, "out/by_day")
    parts = [f"out/by_day/day={d}/part-0.parquet" for d in range(3)]
    assert sorted(before) == ["out/by_day/.pz-manifest.json", *parts]

    killed = pz_subprocess(
        days_project(root, s3, bucket, rows=10, days=5),
        "run",
        env={**ENV, "PZ_FAILPOINTS": "sink.during_promote:kill"},
    )
    assert killed.exit_code == 137, killed.output
    mixed = contents(s3, bucket, "out/by_day")
    assert len(mixed) == 6 and mixed != before  # new partitions copied in, old ones overwritten
    assert "out/.by_day.pz-promote.json" in keys(s3, bucket, "out")
    assert any(k.startswith("out/.by_day.pz-bak-") for k in keys(s3, bucket, "out"))

    (root / ".pz" / "lock").unlink(missing_ok=True)
    failed = pz_subprocess(root, "run", env={**ENV, "PZ_FAILPOINTS": "sink.before_swap"})
    assert failed.exit_code == 1 and "failpoint sink.before_swap" in failed.output, failed.output
    assert contents(s3, bucket, "out/by_day") == before
    assert promote_leftovers(s3, bucket) == [] and not any(".pz-tmp-" in k for k in keys(s3, bucket))

    again = run(root, "run")
    assert again.exit_code == 0, again.output
    assert keys(s3, bucket, "out/by_day") == [f"out/by_day/day={d}/part-0.parquet" for d in range(5)]
    assert promote_leftovers(s3, bucket) == []


def test_a_single_object_replace_makes_no_backup(tmp_path: Path, s3: S3Server, bucket: str) -> None:
    """One object over one object is one atomic copy: no backup, no journal (killed right after that copy,
    nothing of the kind is left); an output with an older object to delete gets both."""
    project = sink_project(tmp_path / "p", s3, bucket, rows=3)
    assert run(project, "run", "--select", "lake.orders").exit_code == 0
    killed = pz_subprocess(
        sink_project(tmp_path / "p", s3, bucket, rows=5),
        "run",
        "--select",
        "lake.orders",
        env={**ENV, "PZ_FAILPOINTS": "sink.during_promote:kill"},
    )
    assert killed.exit_code == 137, killed.output
    assert promote_leftovers(s3, bucket) == []
    assert len(read_parquet(s3, f"{bucket}/out/orders/part-00000.parquet")) == 5

    put_parquet(s3, f"{bucket}/out/orders/part-old-00000.parquet", pa.table({"id": [100], "name": ["x"]}))
    (tmp_path / "p" / ".pz" / "lock").unlink(missing_ok=True)
    project = sink_project(tmp_path / "p", s3, bucket, rows=5, orders=", foreign_files: replace")
    killed = pz_subprocess(
        project, "run", "--select", "lake.orders", env={**ENV, "PZ_FAILPOINTS": "sink.during_promote:kill"}
    )
    assert killed.exit_code == 137, killed.output
    assert "out/.orders.pz-promote.json" in promote_leftovers(s3, bucket)


def test_hive_partitions_become_columns(tmp_path: Path, s3: S3Server, bucket: str) -> None:
    put_parquet(s3, f"{bucket}/ev/year=2024/month=1/a.parquet", pa.table({"id": [1, 2]}))
    put_parquet(s3, f"{bucket}/ev/year=2025/month=2/b.parquet", pa.table({"id": [3]}))
    put(s3, f"{bucket}/cs/region=eu/a.csv", b"id,name\n1,ann\n")
    put(s3, f"{bucket}/cs/region=us/b.csv", b"id,name\n2,bob\n")
    put(s3, f"{bucket}/js/day=7/a.jsonl", b'{"id": 5}\n')
    project = write_project(
        tmp_path / "proj",
        {
            "project.yml": PROJECT_YML,
            "sources/lake.yml": f"""
                connector: s3
                connection: {connection(s3, bucket)}
                datasets:
                  ev: {{ path: "ev/**/*.parquet", hive_partitioning: true }}
                  cs: {{ path: cs/, format: csv, hive_partitioning: true }}
                  cs_typed:
                    path: cs/
                    format: csv
                    hive_partitioning: true
                    columns: {{ region: varchar, id: integer, name: varchar }}
                  js: {{ path: js/, format: json, hive_partitioning: true }}
            """,
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
            "pipelines/ev.sql": "INSERT INTO {{ sink('wh', 'ev') }}\n"
            "SELECT id, year, month FROM {{ source('lake', 'ev') }}\n",
            "pipelines/cs.sql": "INSERT INTO {{ sink('wh', 'cs') }}\n"
            "SELECT * FROM {{ source('lake', 'cs') }}\n",
            "pipelines/cs_typed.sql": "INSERT INTO {{ sink('wh', 'cs_typed') }}\n"
            "SELECT * FROM {{ source('lake', 'cs_typed') }}\n",
            "pipelines/js.sql": "INSERT INTO {{ sink('wh', 'js') }}\n"
            "SELECT * FROM {{ source('lake', 'js') }}\n",
        },
    )
    result = run(project, "run")
    assert result.exit_code == 0, result.output
    assert wh_rows(project, "ev") == [(1, 2024, 1), (2, 2024, 1), (3, 2025, 2)]
    assert wh_rows(project, "cs") == [(1, "ann", "eu"), (2, "bob", "us")]
    assert wh_rows(project, "cs_typed") == [("eu", 1, "ann"), ("us", 2, "bob")]
    assert wh_rows(project, "js") == [(5, 7)]


@pytest.mark.parametrize("strategy", ["append", "replace"])
def test_a_write_failing_midway_adds_nothing(
    tmp_path: Path, s3: S3Server, bucket: str, strategy: str
) -> None:
    """DuckDB completes an object's upload even when its COPY fails midway; the failed write must still leave
    the output as it was (here: a 128-bit value that does not fit DECIMAL(38,0) after 3,000,000 good rows)."""
    old = pa.table({"v": pa.array([1], pa.decimal128(38, 0)), "h": ["x"]})
    put_parquet(s3, f"{bucket}/out/big/part-old-00000.parquet", old)
    before = keys(s3, bucket)
    project = write_project(
        tmp_path / "p",
        {
            "project.yml": PROJECT_YML,
            "sinks/lake.yml": f"""
                connector: s3
                connection: {connection(s3, bucket)}
                outputs:
                  big: {{ path: out/big, strategy: {strategy} }}
            """,
            "pipelines/big.sql": "INSERT INTO {{ sink('lake', 'big') }}\n"
            "SELECT CASE WHEN range < 3000000 THEN range::HUGEINT "
            "ELSE 170141183460469231731687303715884105727::HUGEINT END AS v, md5(range::VARCHAR) AS h "
            "FROM range(4000000)\n",
        },
    )
    result = run(project, "run")
    assert result.exit_code == 1 and "PZ0501" in result.output, result.output
    assert keys(s3, bucket) == before, result.output
    assert uploads(s3, bucket) == []  # nothing left half-uploaded either


def test_partitioned_outputs_round_trip(tmp_path: Path, s3: S3Server, bucket: str) -> None:
    """partition_by lays an output out as <col>=<value>/ folders; replace promotes the whole tree, append
    adds files next to the ones there; hive_partitioning reads it back."""

    def project(rows: int) -> Path:
        return write_project(
            tmp_path / "p",
            {
                "project.yml": PROJECT_YML,
                "sinks/lake.yml": f"""
                    connector: s3
                    connection: {connection(s3, bucket)}
                    outputs:
                      by_day: {{ path: out/by_day, partition_by: [day] }}
                      log: {{ path: out/log, format: csv, strategy: append, partition_by: [day] }}
                """,
                "pipelines/days.sql": "INSERT INTO {{ sink('lake', 'by_day') }}\n"
                "INSERT INTO {{ sink('lake', 'log') }}\n"
                f"SELECT range AS id, range % 3 AS day FROM range({rows})\n",
            },
        )

    # the outputs are read back by another project (one project may not read what it replaces: PZ0236)
    reader = write_project(
        tmp_path / "r",
        {
            "project.yml": PROJECT_YML,
            "sources/lake.yml": f"""
                connector: s3
                connection: {connection(s3, bucket)}
                datasets:
                  back: {{ path: "out/by_day/**/*.parquet", hive_partitioning: true }}
                  log_back: {{ path: "out/log/", format: csv, hive_partitioning: true }}
            """,
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
            "pipelines/back.sql": "INSERT INTO {{ sink('wh', 'back') }}\n"
            "SELECT * FROM {{ source('lake', 'back') }}\n",
            "pipelines/log_back.sql": "INSERT INTO {{ sink('wh', 'log_back') }}\n"
            "SELECT * FROM {{ source('lake', 'log_back') }}\n",
        },
    )

    first = run(project(6), "run", "--select", "lake.by_day", "--select", "lake.log")
    assert first.exit_code == 0, first.output
    assert keys(s3, bucket, "out/by_day") == [f"out/by_day/day={d}/part-0.parquet" for d in range(3)]
    second = run(project(4), "run", "--select", "lake.by_day", "--select", "lake.log")
    assert second.exit_code == 0, second.output
    assert second.node("lake.log")["batches_committed"] == 3
    assert keys(s3, bucket, "out/by_day") == [f"out/by_day/day={d}/part-0.parquet" for d in range(3)]
    assert len(keys(s3, bucket, "out/log")) == 6  # two appends, three partitions each
    back = run(reader, "run")
    assert back.exit_code == 0, back.output
    assert wh_rows(back.project, "back") == [(i, i % 3) for i in range(4)]
    assert wh_rows(back.project, "log_back") == sorted(
        [(i, i % 3) for i in range(6)] + [(i, i % 3) for i in range(4)]
    )

    # a replace that fails before its promote leaves every partition as it was
    failed = pz_subprocess(
        project(9), "run", "--select", "lake.by_day", env={**ENV, "PZ_FAILPOINTS": "sink.before_swap"}
    )
    assert failed.exit_code == 1, failed.output
    assert keys(s3, bucket, "out/by_day") == [f"out/by_day/day={d}/part-0.parquet" for d in range(3)]
    assert not any(".by_day.pz-tmp-" in k for k in keys(s3, bucket, "out"))
    assert run(back.project, "run", "--select", "wh.back").exit_code == 0
    assert wh_rows(back.project, "back") == [(i, i % 3) for i in range(4)]


def test_two_stores_with_one_bucket_name_never_share_credentials(tmp_path: Path, s3: S3Server) -> None:
    """A DuckDB secret is picked by its scope (the bucket): two instances on other endpoints with the same
    bucket name, loading at the same time, must each read their own server."""
    with moto_server() as other:
        for server, tag in ((s3, "first"), (other, "second")):
            server.bucket("shared-name")
            for i in range(8):
                put_parquet(server, f"shared-name/d/f{i}.parquet", pa.table({"id": [i], "tag": [tag]}))
        project = write_project(
            tmp_path / "p",
            {
                "project.yml": PROJECT_YML + "engine: { threads: 2 }\n",
                "sources/one.yml": f"""
                    connector: s3
                    connection: {connection(s3, "shared-name")}
                    datasets:
                      d: {{ path: "d/*.parquet" }}
                """,
                "sources/two.yml": f"""
                    connector: s3
                    connection: {connection(other, "shared-name")}
                    datasets:
                      d: {{ path: "d/*.parquet" }}
                """,
                "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
                "pipelines/paired.sql": "INSERT INTO {{ sink('wh', 'paired') }}\n"
                "SELECT 'one' AS src, tag, count(*) AS n FROM {{ source('one', 'd') }} GROUP BY ALL\n"
                "UNION ALL SELECT 'two', tag, count(*) FROM {{ source('two', 'd') }} GROUP BY ALL\n",
            },
        )
        for _ in range(3):
            result = run(project, "run")
            assert result.exit_code == 0, result.output
            assert wh_rows(project, "paired") == [("one", "first", 8), ("two", "second", 8)]


# -- promotion of any size, leftover uploads, root outputs, missing buckets ---------------------------------
PART = 5 * 1024 * 1024  # the smallest part S3 allows: objects above it are copied in parts (test seam)
BIG_ROWS = 200_000  # ~13 MB of parquet: three parts


def uploads(s3: S3Server, bucket: str) -> list[str]:
    """Keys of the bucket's incomplete multipart uploads (read with boto3, not with pz's own client)."""
    client = _client(s3)
    return sorted(u["Key"] for u in client.list_multipart_uploads(Bucket=bucket).get("Uploads", []))


def _client(s3: S3Server) -> Any:
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=s3.endpoint,
        aws_access_key_id=S3_KEY_ID,
        aws_secret_access_key=S3_SECRET,
        region_name="us-east-1",
    )


def start_upload(s3: S3Server, bucket: str, key: str) -> None:
    client = _client(s3)
    client.create_multipart_upload(Bucket=bucket, Key=key)


def etag(s3: S3Server, bucket: str, key: str) -> str:
    client = _client(s3)
    return str(client.head_object(Bucket=bucket, Key=key)["ETag"])


def big_project(root: Path, s3: S3Server, bucket: str, seed: int) -> Path:
    sql = (
        f"SELECT range AS id, md5((range + {seed})::VARCHAR) || md5((range * 7 + {seed})::VARCHAR) AS h "
        f"FROM range({BIG_ROWS})"
    )
    return lake_project(root, s3, bucket, "big", "path: out/big", sql)


def big_summary(s3: S3Server, bucket: str) -> tuple[int, int]:
    with s3.filesystem().open_input_file(f"{bucket}/out/big/part-00000.parquet") as f:
        table = pq.read_table(f)
    return table.num_rows, hash(tuple(table.column("h").to_pylist()[:: BIG_ROWS // 50]))


def test_a_replace_larger_than_one_copy_allows_is_promoted_in_parts_and_never_half_written(
    tmp_path: Path, s3: S3Server, bucket: str
) -> None:
    """CopyObject is capped (5 GiB on AWS); above the cap promotion copies the object in ranged parts of one
    multipart upload, which S3 assembles only when complete. The seam lowers the cap to 5 MiB."""
    seam = {**ENV, "PZ_S3_COPY_PART_BYTES": str(PART)}
    first = pz_subprocess(big_project(tmp_path / "p", s3, bucket, seed=1), "run", env=seam)
    assert first.exit_code == 0, first.output
    size = s3.filesystem().get_file_info(f"{bucket}/out/big/part-00000.parquet").size
    assert size > 2 * PART  # so it took three parts
    assert etag(s3, bucket, "out/big/part-00000.parquet").strip('"').endswith("-3")  # a multipart object
    assert big_summary(s3, bucket)[0] == BIG_ROWS
    before = big_summary(s3, bucket)
    assert uploads(s3, bucket) == []

    # a part copy fails: the upload is aborted, the output is unchanged
    project = big_project(tmp_path / "p", s3, bucket, seed=2)
    failed = pz_subprocess(project, "run", env={**seam, "PZ_FAILPOINTS": "s3.part_copied"})
    assert failed.exit_code == 1, failed.output
    assert big_summary(s3, bucket) == before
    assert uploads(s3, bucket) == []
    assert keys(s3, bucket, "out") == ["out/big/part-00000.parquet"]

    # killed between parts: the output is unchanged; the incomplete upload is left, with one to a temp
    # prefix (as a killed COPY would leave); the next write aborts both and completes
    killed = pz_subprocess(project, "run", env={**seam, "PZ_FAILPOINTS": "s3.part_copied:kill"})
    assert killed.exit_code == 137, killed.output
    assert big_summary(s3, bucket) == before
    start_upload(s3, bucket, "out/.big.pz-tmp-dead-0000/part-00000.parquet")
    assert uploads(s3, bucket) == [
        "out/.big.pz-tmp-dead-0000/part-00000.parquet",
        "out/big/part-00000.parquet",
    ]
    (project / ".pz" / "lock").unlink(missing_ok=True)
    again = pz_subprocess(project, "run", env=seam)
    assert again.exit_code == 0, again.output
    assert uploads(s3, bucket) == []
    assert big_summary(s3, bucket)[0] == BIG_ROWS and big_summary(s3, bucket) != before
    assert keys(s3, bucket, "out") == ["out/big/part-00000.parquet"]


def test_an_output_at_the_top_of_the_bucket_or_root_is_refused(
    tmp_path: Path, s3: S3Server, bucket: str
) -> None:
    project = write_project(
        tmp_path / "p",
        {
            "project.yml": PROJECT_YML,
            "sinks/lake.yml": f"""
                connector: s3
                connection: {connection(s3, bucket)}
                outputs:
                  everything: {{ path: "/" }}
            """,
            "sinks/files.yml": """
                connector: localfiles
                connection: { root: out }
                outputs:
                  all_files: { path: "./" }
            """,
            "pipelines/p.sql": "INSERT INTO {{ sink('lake', 'everything') }}\n"
            "INSERT INTO {{ sink('files', 'all_files') }}\nSELECT 1 AS id\n",
        },
    )
    put(s3, f"{bucket}/keep/me.csv", b"id\n1\n")
    result = run(project, "validate")
    assert result.exit_code == 2, result.output
    errors = [line for line in result.lines if line.startswith("error: PZ0304")]
    assert len(errors) == 2, result.output
    assert any("sinks/lake.yml" in e and "path '/' is the top of the connection" in e for e in errors)
    assert any("sinks/files.yml" in e and "path './' is the top of the connection" in e for e in errors)
    assert run(project, "run").exit_code == 2
    assert keys(s3, bucket) == ["keep/me.csv"]


def test_a_missing_bucket_is_pz0531_naming_it(tmp_path: Path, s3: S3Server, bucket: str) -> None:
    project = write_project(
        tmp_path / "p",
        {
            "project.yml": PROJECT_YML,
            "sources/gone.yml": f"""
                connector: s3
                connection: {connection(s3, "no-such-bucket-pz")}
                datasets:
                  a: {{ path: a/, format: csv, columns: {{ id: bigint }} }}
            """,
            "sinks/gone_out.yml": f"""
                connector: s3
                connection: {connection(s3, "no-such-bucket-pz")}
                outputs:
                  b: {{ path: out/b }}
            """,
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
            "pipelines/a.sql": "INSERT INTO {{ sink('wh', 'a') }}\nSELECT * FROM {{ source('gone', 'a') }}\n",
            "pipelines/b.sql": "INSERT INTO {{ sink('gone_out', 'b') }}\nSELECT 1 AS id\n",
        },
    )
    result = run(project, "run")
    assert result.exit_code == 1, result.output
    for node in ("src_gone__a", "gone_out.b"):
        error = result.node(node)["error"]
        assert error["code"] == "PZ0531", error
        assert error["transient"] is False
        assert (
            f"bucket 'no-such-bucket-pz' does not exist at endpoint {s3.endpoint.removeprefix('http://')}"
            in (error["message"])
        )
    assert "PZ0531" in result.output and "create it, or fix the connection's bucket" in result.output


def test_force_universal_is_reported_once_per_instance(tmp_path: Path, s3: S3Server, bucket: str) -> None:
    project = write_project(
        tmp_path / "p",
        {
            "project.yml": PROJECT_YML,
            "sources/lake.yml": f"""
                connector: s3
                connection: {connection(s3, bucket)}
                engine: {{ force_universal: true }}
                datasets:
                  a: {{ path: "a/*.parquet", columns: {{ id: bigint }} }}
                  b: {{ path: "b/*.parquet", columns: {{ id: bigint }} }}
                  c: {{ path: "c/*.parquet", columns: {{ id: bigint }}, files_per_partition: 2 }}
            """,
            "sinks/out.yml": f"""
                connector: s3
                connection: {connection(s3, bucket)}
                engine: {{ force_universal: true }}
            """,
            "pipelines/p.sql": "INSERT INTO {{ sink('out', 'p') }}\nINSERT INTO {{ sink('out', 'q') }}\n"
            "SELECT * FROM {{ source('lake', 'a') }} UNION ALL SELECT * FROM {{ source('lake', 'b') }}\n"
            "UNION ALL SELECT * FROM {{ source('lake', 'c') }}\n",
        },
    )
    for command in ("validate", "plan"):
        result = run(project, command)
        assert result.exit_code == 2
        errors = [line for line in result.lines if line.startswith("error: PZ0312")]
        # one per instance that sets force_universal, one per dataset that sets files_per_partition
        assert len(errors) == 3, result.output
        assert sum("source 'lake': engine.force_universal" in e for e in errors) == 1
        assert sum("sink 'out': engine.force_universal" in e for e in errors) == 1
        assert sum("dataset 'c': files_per_partition" in e for e in errors) == 1


def test_a_replace_never_deletes_objects_pz_did_not_write(tmp_path: Path, s3: S3Server, bucket: str) -> None:
    put(s3, f"{bucket}/out/orders/theirs.csv", b"id\n1\n")
    project = sink_project(tmp_path / "p", s3, bucket, rows=2)
    refused = run(project, "run", "--select", "lake.orders")
    assert refused.exit_code == 1, refused.output
    assert "PZ0530" in refused.output and "holds 1 file(s) pz did not write (theirs.csv)" in refused.output
    assert keys(s3, bucket, "out/orders") == ["out/orders/theirs.csv"]

    opted_in = run(sink_project(project, s3, bucket, rows=2, orders=", foreign_files: replace"), "run")
    assert opted_in.exit_code == 0, opted_in.output
    assert keys(s3, bucket, "out/orders") == ["out/orders/part-00000.parquet"]
    assert manifest(s3, bucket, "out/orders") == ["part-00000.parquet"]
    # pz's prefix now: a replace without the opt-in runs; an append registers its objects as it adds them
    again = run(sink_project(project, s3, bucket, rows=3), "run")
    assert again.exit_code == 0, again.output
    assert manifest(s3, bucket, "out/events") == [k.split("/")[-1] for k in keys(s3, bucket, "out/events")]


def test_an_output_over_a_source_prefix_on_the_same_bucket_is_refused_at_validate(
    tmp_path: Path, s3: S3Server, bucket: str
) -> None:
    other = s3.bucket(f"pz-{secrets.token_hex(4)}")
    sources = f"""
        connector: s3
        connection: {connection(s3, bucket)}
        datasets:
          under: {{ path: "out/orders/*.parquet" }}
          above: {{ path: out/, format: parquet }}
          beside: {{ path: "in/**/*.csv" }}
    """
    elsewhere = f"""
        connector: s3
        connection: {connection(s3, other)}
        datasets:
          same_path: {{ path: out/orders/, format: parquet }}
    """
    project = sink_project(tmp_path / "p", s3, bucket)
    write_project(project, {"sources/lake.yml": sources, "sources/other.yml": elsewhere})
    result = run(project, "validate")
    assert result.exit_code == 2 and "4 errors" in result.output, result.output
    refused = [line for line in result.lines if "PZ0236" in line]
    for output in ("orders", "events", "csv_copy"):  # every output is under out/, which `above` reads
        assert any(f"'lake.{output}'" in line and "lake.above" in line for line in refused), result.output
    assert any(
        f"prefix s3://{bucket}/out/orders, which holds path s3://{bucket}/out/orders/*.parquet" in line
        for line in refused
    ), result.output
    assert len(refused) == 4 and not any("other.same_path" in line or "beside" in line for line in refused)
