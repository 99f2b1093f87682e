"""The `azureblob` connector end to end against Azurite on 127.0.0.1 (its well-known dev account): reads by
blob, prefix and glob, replace and append writes (DuckDB's azure extension writes blobs), replace atomicity
under injected failures, PZ0312 at plan time and secrets kept out of every artifact."""

from __future__ import annotations

import base64
import gzip
import hashlib
import hmac
import io
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import duckdb
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from pipelinez.connectors.azureblob.connector import AzureStore
from pipelinez.connectors.azureblob.rest import BlobRest
from tests.conftest import PzResult, pz, pz_subprocess, write_project
from tests.objstores import (
    AZURITE_ACCOUNT,
    AZURITE_KEY,
    AzureServer,
    azurite_server,
    stored_contents,
    stored_keys,
)

PROJECT_YML = "name: azt\nenv:\n  AZ_CONN: { secret: true }\n  AZ_KEY: { secret: true }\n"


@pytest.fixture(scope="module")
def azure() -> Iterator[AzureServer]:
    with azurite_server(debug=True) as server:
        yield server


@pytest.fixture
def container(azure: AzureServer) -> str:
    return azure.container(f"pz-{secrets.token_hex(4)}")


def env(azure: AzureServer) -> dict[str, str]:
    return {"AZ_CONN": azure.connection_string, "AZ_KEY": AZURITE_KEY}


def by_string(container: str) -> str:
    return f"{{ container: {container}, connection_string: \"{{{{ env('AZ_CONN') }}}}\" }}"


def by_account(azure: AzureServer, container: str) -> str:
    return (
        f"{{ container: {container}, account_name: {AZURITE_ACCOUNT}, "
        f'account_key: "{{{{ env(\'AZ_KEY\') }}}}", endpoint: "{azure.endpoint}" }}'
    )


def put(azure: AzureServer, path: str, data: bytes) -> None:
    with azure.filesystem().open_output_stream(path, compression=None) as f:  # the bytes as given
        f.write(data)


def blobs(azure: AzureServer, container: str, prefix: str = "") -> list[str]:
    """The blobs under `prefix`, without the manifests pz keeps next to its outputs' data."""
    found = stored_keys(azure.filesystem(), container, prefix)
    return [k for k in found if not k.endswith("/.pz-manifest.json")]


def read_parquet(azure: AzureServer, path: str) -> list[dict[str, Any]]:
    with azure.filesystem().open_input_file(path) as f:
        return pq.read_table(f).sort_by("id").to_pylist()


def run(azure: AzureServer, project: Path, *args: str) -> PzResult:
    return pz(project, *args, env=env(azure))


def test_reads_by_blob_prefix_and_glob(tmp_path: Path, azure: AzureServer, container: str) -> None:
    put(azure, f"{container}/csv/a.csv", b"id,name\n1,ann\n2,bob\n")
    put(azure, f"{container}/csv/sub/b.csv", b"id,name\n3,cid\n")
    sink = io.BytesIO()
    pq.write_table(pa.table({"id": [5, 6], "v": [0.5, 1.5]}), sink)
    put(azure, f"{container}/pq/x.parquet", sink.getvalue())
    put(azure, f"{container}/js/e.json", b'[{"id": 1, "ok": true}, {"id": 2, "ok": false}]')
    project = write_project(
        tmp_path / "proj",
        {
            "project.yml": PROJECT_YML,
            "sources/blob.yml": f"""
                connector: azureblob
                connection: {by_string(container)}
                datasets:
                  one: {{ path: csv/a.csv }}
                  prefix: {{ path: csv, format: csv }}
                  glob: {{ path: "**/*.parquet" }}
                  json: {{ path: js/e.json, columns: {{ id: bigint, ok: boolean }} }}
            """,
            "sources/acct.yml": f"""
                connector: azureblob
                connection: {by_account(azure, container)}
                datasets:
                  one: {{ path: csv/a.csv }}
            """,
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
            "pipelines/one.sql": "INSERT INTO {{ sink('wh', 'one') }}\n"
            "SELECT * FROM {{ source('blob', 'one') }}\n",
            "pipelines/prefix.sql": "INSERT INTO {{ sink('wh', 'prefix') }}\n"
            "SELECT * FROM {{ source('blob', 'prefix') }}\n",
            "pipelines/pq.sql": "INSERT INTO {{ sink('wh', 'pq') }}\n"
            "SELECT * FROM {{ source('blob', 'glob') }}\n",
            "pipelines/js.sql": "INSERT INTO {{ sink('wh', 'js') }}\n"
            "SELECT * FROM {{ source('blob', 'json') }}\n",
            "pipelines/acct.sql": "INSERT INTO {{ sink('wh', 'acct') }}\n"
            "SELECT * FROM {{ source('acct', 'one') }}\n",
        },
    )
    result = run(azure, project, "run")
    assert result.exit_code == 0, result.output
    con = duckdb.connect(str(project / "out" / "wh.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT * FROM one ORDER BY id").fetchall() == [(1, "ann"), (2, "bob")]
        assert con.execute("SELECT * FROM prefix ORDER BY id").fetchall() == [
            (1, "ann"),
            (2, "bob"),
            (3, "cid"),
        ]
        assert con.execute("SELECT * FROM pq ORDER BY id").fetchall() == [(5, 0.5), (6, 1.5)]
        assert con.execute("SELECT * FROM js ORDER BY id").fetchall() == [(1, True), (2, False)]
        assert con.execute("SELECT * FROM acct ORDER BY id").fetchall() == [(1, "ann"), (2, "bob")]
    finally:
        con.close()
    assert run(azure, project, "validate", "--connect").exit_code == 0


def test_a_gzipped_csv_blob_is_read_once_decompressed(
    tmp_path: Path, azure: AzureServer, container: str
) -> None:
    put(azure, f"{container}/raw/customers.csv.gz", gzip.compress(b"id,name\n1,ann\n2,bob\n"))
    project = write_project(
        tmp_path / "proj",
        {
            "project.yml": PROJECT_YML,
            "sources/blob.yml": f"""
                connector: azureblob
                connection: {by_string(container)}
                datasets:
                  customers: {{ path: raw/customers.csv.gz }}
            """,
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
            "pipelines/customers.sql": "INSERT INTO {{ sink('wh', 'customers') }}\n"
            "SELECT * FROM {{ source('blob', 'customers') }}\n",
        },
    )
    check = run(azure, project, "validate", "--connect")
    assert check.exit_code == 0, check.output
    result = run(azure, project, "run")
    assert result.exit_code == 0, result.output
    con = duckdb.connect(str(project / "out" / "wh.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT * FROM customers ORDER BY id").fetchall() == [(1, "ann"), (2, "bob")]
    finally:
        con.close()


def sink_project(root: Path, container: str, rows: int, orders: str = "") -> Path:
    return write_project(
        root,
        {
            "project.yml": PROJECT_YML,
            "sinks/blob.yml": f"""
                connector: azureblob
                connection: {by_string(container)}
                outputs:
                  orders: {{ path: out/orders{orders} }}
                  log: {{ path: out/log, strategy: append, format: csv }}
            """,
            "pipelines/orders.sql": "INSERT INTO {{ sink('blob', 'orders') }}\n"
            "INSERT INTO {{ sink('blob', 'log') }}\n"
            f"SELECT range AS id, 'n' || range AS name FROM range({rows})\n",
        },
    )


def test_replace_and_append_write_blobs(tmp_path: Path, azure: AzureServer, container: str) -> None:
    first = run(azure, sink_project(tmp_path / "p", container, 3), "run")
    assert first.exit_code == 0, first.output
    assert read_parquet(azure, f"{container}/out/orders/part-00000.parquet") == [
        {"id": i, "name": f"n{i}"} for i in range(3)
    ]
    second = run(azure, sink_project(tmp_path / "p", container, 2), "run")
    assert second.exit_code == 0, second.output
    assert read_parquet(azure, f"{container}/out/orders/part-00000.parquet") == [
        {"id": i, "name": f"n{i}"} for i in range(2)
    ]
    assert blobs(azure, container, "out/orders") == ["out/orders/part-00000.parquet"]
    assert len(blobs(azure, container, "out/log")) == 2
    assert all(not seg.startswith(".") for k in blobs(azure, container) for seg in k.split("/"))


def test_a_failed_replace_leaves_the_prefix_as_it_was(
    tmp_path: Path, azure: AzureServer, container: str
) -> None:
    assert run(azure, sink_project(tmp_path / "p", container, 3), "run").exit_code == 0
    project = sink_project(tmp_path / "p", container, 7)
    failed = pz_subprocess(
        project, "run", "--select", "blob.orders", env={**env(azure), "PZ_FAILPOINTS": "sink.before_swap"}
    )
    assert failed.exit_code == 1, failed.output
    assert read_parquet(azure, f"{container}/out/orders/part-00000.parquet") == [
        {"id": i, "name": f"n{i}"} for i in range(3)
    ]
    assert not any(".orders.pz-tmp-" in k for k in blobs(azure, container))
    again = run(azure, project, "run", "--select", "blob.orders")
    assert again.exit_code == 0, again.output
    assert len(read_parquet(azure, f"{container}/out/orders/part-00000.parquet")) == 7


def blob_contents(azure: AzureServer, container: str, prefix: str) -> dict[str, bytes]:
    return stored_contents(azure.filesystem(), container, prefix)


def test_a_multi_blob_promote_failing_or_killed_midway_leaves_the_old_blobs(
    tmp_path: Path, azure: AzureServer, container: str
) -> None:
    """A replace with an older blob to delete is promoted blob by blob, backed up first: a failure after the
    new blob was copied in puts back exactly the old blobs; a kill there is rolled back by the next write
    before it writes (that write fails after writing its temp prefix: the output is still the old one)."""
    first = run(azure, sink_project(tmp_path / "p", container, 3), "run", "--select", "blob.orders")
    assert first.exit_code == 0, first.output
    # a blob pz did not write: the replace may remove it (foreign_files: replace), so it has one to delete
    put(azure, f"{container}/out/orders/part-old-00000.parquet", b"old bytes")
    before = blob_contents(azure, container, "out/orders")
    assert len(before) == 3  # the manifest, pz's blob and the other one
    project = sink_project(tmp_path / "p", container, 7, ", foreign_files: replace")

    def attempt(failpoint: str) -> PzResult:
        (project / ".pz" / "lock").unlink(missing_ok=True)
        return pz_subprocess(
            project, "run", "--select", "blob.orders", env={**env(azure), "PZ_FAILPOINTS": failpoint}
        )

    failed = attempt("sink.during_promote")
    assert failed.exit_code == 1 and "failpoint sink.during_promote" in failed.output, failed.output
    assert blob_contents(azure, container, "out/orders") == before
    assert not any(".pz-" in k for k in blobs(azure, container))

    killed = attempt("sink.during_promote:kill")
    assert killed.exit_code == 137, killed.output
    assert blob_contents(azure, container, "out/orders") != before  # the new blob is in, the old one not gone
    assert "out/.orders.pz-promote.json" in blobs(azure, container, "out")
    failed = attempt("sink.before_swap")
    assert failed.exit_code == 1 and "failpoint sink.before_swap" in failed.output, failed.output
    assert blob_contents(azure, container, "out/orders") == before
    assert not any(".pz-" in k for k in blobs(azure, container))

    again = run(azure, project, "run", "--select", "blob.orders")
    assert again.exit_code == 0, again.output
    assert blobs(azure, container, "out/orders") == ["out/orders/part-00000.parquet"]
    assert len(read_parquet(azure, f"{container}/out/orders/part-00000.parquet")) == 7


def test_force_universal_is_pz0312_and_a_literal_key_is_refused(
    tmp_path: Path, azure: AzureServer, container: str
) -> None:
    project = write_project(
        tmp_path / "p",
        {
            "project.yml": PROJECT_YML,
            "sources/blob.yml": f"""
                connector: azureblob
                connection: {by_string(container)}
                engine: {{ force_universal: true }}
                datasets:
                  a: {{ path: "a/*.csv", columns: {{ id: bigint }} }}
            """,
            "sinks/lit.yml": f"""
                connector: azureblob
                connection: {{ container: {container}, account_name: x, account_key: {AZURITE_KEY} }}
            """,
            "pipelines/p.sql": "INSERT INTO {{ sink('lit', 'p') }}\n"
            "SELECT * FROM {{ source('blob', 'a') }}\n",
        },
    )
    result = run(azure, project, "validate")
    assert (
        result.exit_code == 2 and "PZ0304" in result.output and "account_key must come from" in result.output
    )
    assert AZURITE_KEY not in result.output
    (project / "sinks" / "lit.yml").write_text(f"connector: azureblob\nconnection: {by_string(container)}\n")
    for command in ("validate", "plan"):  # validate and plan agree
        refused = run(azure, project, command)
        assert refused.exit_code == 2
        assert any(line.startswith("error: PZ0312 sources/blob.yml:3:") for line in refused.lines), (
            refused.output
        )


def test_secrets_never_reach_output_events_or_artifacts(
    tmp_path: Path, azure: AzureServer, container: str
) -> None:
    put(azure, f"{container}/in/a.csv", b"id\n1\n")
    project = write_project(
        tmp_path / "p",
        {
            "project.yml": PROJECT_YML,
            "sources/blob.yml": f"""
                connector: azureblob
                connection: {by_account(azure, container)}
                datasets:
                  a: {{ path: in/a.csv }}
                  gone: {{ path: in/none.csv, columns: {{ id: bigint }} }}
            """,
            "sinks/blob.yml": f"connector: azureblob\nconnection: {by_string(container)}\n",
            "pipelines/p.sql": "INSERT INTO {{ sink('blob', 'p') }}\n"
            "SELECT * FROM {{ source('blob', 'a') }}\n",
            "pipelines/q.sql": "INSERT INTO {{ sink('blob', 'q') }}\n"
            "SELECT * FROM {{ source('blob', 'gone') }}\n",
        },
    )
    results = [
        run(azure, project, "plan"),
        run(azure, project, "run"),
        run(azure, project, "--log-format", "json", "run"),
        run(azure, project, "validate", "--connect"),
    ]
    assert results[1].exit_code == 1, results[1].output
    for result in results:
        assert AZURITE_KEY not in result.output
    for path in (project / ".pz").rglob("*"):
        if path.is_file():
            assert AZURITE_KEY.encode() not in path.read_bytes(), path


def test_a_missing_container_is_pz0531_naming_it(tmp_path: Path, azure: AzureServer) -> None:
    project = write_project(
        tmp_path / "p",
        {
            "project.yml": PROJECT_YML,
            "sources/gone.yml": f"""
                connector: azureblob
                connection: {by_string("no-such-container-pz")}
                datasets:
                  a: {{ path: a/, format: csv, columns: {{ id: bigint }} }}
            """,
            "sinks/gone_out.yml": f"""
                connector: azureblob
                connection: {by_string("no-such-container-pz")}
                outputs:
                  b: {{ path: out/b }}
            """,
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
            "pipelines/a.sql": "INSERT INTO {{ sink('wh', 'a') }}\nSELECT * FROM {{ source('gone', 'a') }}\n",
            "pipelines/b.sql": "INSERT INTO {{ sink('gone_out', 'b') }}\nSELECT 1 AS id\n",
        },
    )
    result = run(azure, project, "run")
    assert result.exit_code == 1, result.output
    for node in ("src_gone__a", "gone_out.b"):
        error = result.node(node)["error"]
        assert error["code"] == "PZ0531", error
        assert (
            f"container 'no-such-container-pz' does not exist at blob service {azure.endpoint}"
            in error["message"]
        )
    # pz neither created the missing container nor wrote anything into it
    assert azure.filesystem().get_file_info("no-such-container-pz").type == pafs.FileType.NotFound


def snapshots(azure: AzureServer, container: str) -> list[str]:
    """Names of the container's blob snapshots (List Blobs with include=snapshots)."""
    import http.client
    import xml.etree.ElementTree as ET

    rest = BlobRest(AZURITE_ACCOUNT, AZURITE_KEY, None, azure.endpoint, container)
    path = f"/{AZURITE_ACCOUNT}/{container}"
    query = {"restype": "container", "comp": "list", "include": "snapshots"}
    conn = http.client.HTTPConnection(f"127.0.0.1:{azure.port}", timeout=30)
    try:
        conn.request(
            "GET",
            f"{path}?restype=container&comp=list&include=snapshots",
            headers=rest._signed("GET", path, query, {}),
        )
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    assert response.status == 200, body
    root = ET.fromstring(body)
    return sorted(
        f"{b.findtext('Name')}@{b.findtext('Snapshot')}" for b in root.iter("Blob") if b.findtext("Snapshot")
    )


def rows(azure: AzureServer, container: str) -> list[dict[str, Any]]:
    return read_parquet(azure, f"{container}/out/orders/part-00000.parquet")


def test_promotes_use_azures_asynchronous_copy_blob(
    tmp_path: Path, azure: AzureServer, container: str
) -> None:
    """Copy Blob From URL (what pyarrow's copy_file sends) is capped at 256 MiB of source on Azure; the
    asynchronous Copy Blob is not. Azurite names the operation of each request in its debug log."""
    assert run(azure, sink_project(tmp_path / "p", container, 3), "run").exit_code == 0
    mark = azure.log_size()
    second = run(azure, sink_project(tmp_path / "p", container, 2), "run")
    assert second.exit_code == 0, second.output
    ops = azure.operations(mark)
    copies = [(op, url) for op, url in ops if "Copy" in op]
    assert {op for op, _ in copies} == {"Blob_StartCopyFromURL"}, copies
    target = f"/{AZURITE_ACCOUNT}/{container}/out/orders/part-00000.parquet"
    assert [url for _, url in copies if url.endswith(target)], copies  # the replace's promote
    assert [url for _, url in copies if f"/{container}/out/log/part-" in url], copies  # the append's
    # the blob a copy replaces is snapshotted first (to undo a failed copy); the snapshot is gone after
    assert ("Blob_CreateSnapshot", f"http://127.0.0.1{target}?comp=snapshot") in ops
    assert snapshots(azure, container) == []
    assert rows(azure, container) == [{"id": i, "name": f"n{i}"} for i in range(2)]
    assert blobs(azure, container, "out/orders") == ["out/orders/part-00000.parquet"]


def test_a_promote_failing_after_its_copy_began_puts_the_old_blob_back(
    tmp_path: Path, azure: AzureServer, container: str
) -> None:
    assert run(azure, sink_project(tmp_path / "p", container, 3), "run").exit_code == 0
    project = sink_project(tmp_path / "p", container, 7)
    mark = azure.log_size()
    failed = pz_subprocess(
        project, "run", "--select", "blob.orders", env={**env(azure), "PZ_FAILPOINTS": "azure.copy_started"}
    )
    assert failed.exit_code == 1, failed.output
    # Azurite had finished the copy: pz copied the snapshot taken before it back over the blob
    assert rows(azure, container) == [{"id": i, "name": f"n{i}"} for i in range(3)]
    restores = [url for op, url in azure.operations(mark) if op == "Blob_StartCopyFromURL"]
    assert len(restores) == 2, restores  # the promote, then the snapshot copied back
    assert snapshots(azure, container) == []
    assert not any(".orders.pz-tmp-" in k for k in blobs(azure, container))


def test_a_copy_azure_refuses_is_pz0501_naming_the_blob_and_changes_nothing(
    tmp_path: Path, azure: AzureServer, container: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run(azure, sink_project(tmp_path / "p", container, 3), "run").exit_code == 0
    promote = AzureStore.copy

    def source_vanishes(self: AzureStore, source: str, dest: str) -> None:
        self.fs.delete_file(self._fs_path(source))
        promote(self, source, dest)

    monkeypatch.setattr(AzureStore, "copy", source_vanishes)
    project = sink_project(tmp_path / "p", container, 7)
    result = run(azure, project, "run", "--select", "blob.orders")
    assert result.exit_code == 1, result.output
    error = result.node("blob.orders")["error"]
    assert error["code"] == "PZ0501", error
    assert f"starting a copy to az://{container}/out/orders/part-00000.parquet: HTTP 404" in error["message"]
    assert rows(azure, container) == [{"id": i, "name": f"n{i}"} for i in range(3)]
    assert snapshots(azure, container) == []
    # the account key signs every request and appears nowhere
    assert AZURITE_KEY not in result.output
    for path in (project / ".pz").rglob("*"):
        if path.is_file():
            assert AZURITE_KEY.encode() not in path.read_bytes(), path


def account_sas(permissions: str = "rwdlac") -> str:
    """An account SAS token for Azurite's dev account (blob service, every resource type; version
    2020-12-06+ string-to-sign)."""
    version, expiry = "2021-08-06", "2099-01-01T00:00:00Z"
    fields = [AZURITE_ACCOUNT, permissions, "b", "sco", "", expiry, "", "", version, "", ""]
    key = base64.b64decode(AZURITE_KEY)
    sig = base64.b64encode(hmac.new(key, "\n".join(fields).encode(), hashlib.sha256).digest()).decode()
    return f"sv={version}&ss=b&srt=sco&sp={permissions}&se={quote(expiry)}&sig={quote(sig, safe='')}"


def sas_connection(azure: AzureServer, sas: str) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};SharedAccessSignature={sas};"
        f"BlobEndpoint={azure.endpoint};"
    )


def test_a_promote_authorized_by_a_sas_copies_and_snapshots_on_azurite(
    azure: AzureServer, container: str
) -> None:
    """With a SAS (no account key) the token authorizes each call and the copy source; Azurite checks both
    (it reads a copy source that carries a signature through it). A whole `pz run` cannot show this on
    Azurite: it refuses the blob batch pyarrow deletes a prefix with under an account SAS (HTTP 500, no
    permission mapped for Container_SubmitBatch), which Azure allows."""
    put(azure, f"{container}/tmp/part.parquet", b"new")
    put(azure, f"{container}/out/part.parquet", b"old")
    store = AzureStore({"container": container, "connection_string": sas_connection(azure, account_sas())})
    mark = azure.log_size()
    store.copy("tmp/part.parquet", "out/part.parquet")
    ops = [op for op, _ in azure.operations(mark)]
    # Blob_GetProperties: Azurite reading the copy source through the SAS in x-ms-copy-source
    assert ops == ["Blob_CreateSnapshot", "Blob_StartCopyFromURL", "Blob_GetProperties", "Blob_Delete"], ops
    with azure.filesystem().open_input_stream(f"{container}/out/part.parquet") as f:
        assert f.read() == b"new"
    assert snapshots(azure, container) == []


def test_a_sas_never_reaches_output_events_or_artifacts(
    tmp_path: Path, azure: AzureServer, container: str
) -> None:
    """A SAS without delete permission: the first write leaves its temp prefix (removing it is refused,
    quietly), the second write's sweep fails on it, and Arrow's error prints the SAS's URL (its fields
    reordered, so neither the SAS nor the connection string as declared): its signature is masked."""
    sas = account_sas("rwl")
    sig = sas.rsplit("sig=", 1)[1]
    project = sink_project(tmp_path / "p", container, 3)
    (project / "project.yml").write_text(PROJECT_YML + "engine:\n  retry: { max_attempts: 1 }\n")
    first = pz(project, "run", env={"AZ_CONN": sas_connection(azure, sas)})
    assert first.exit_code == 0, first.output
    results = [
        pz(project, "run", env={"AZ_CONN": sas_connection(azure, sas)}),
        pz(project, "--log-format", "json", "run", env={"AZ_CONN": sas_connection(azure, sas)}),
    ]
    for result in results:
        assert result.exit_code == 1, result.output
        assert "sig=***" in result.output, result.output  # Arrow's message, masked
        assert sig not in result.output and unquote(sig) not in result.output, result.output
    for path in (project / ".pz").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert sig.encode() not in data and unquote(sig).encode() not in data, path


def test_a_replace_deletes_an_old_blob_a_killed_copy_left_a_snapshot_of(
    tmp_path: Path, azure: AzureServer, container: str
) -> None:
    """Azure refuses to delete a blob that has snapshots (pyarrow's delete: 409 SnapshotsPresent); a write
    killed while its copy was pending leaves the snapshot taken before it. A replace deletes the blobs it
    drops together with their snapshots."""
    assert run(azure, sink_project(tmp_path / "p", container, 3), "run").exit_code == 0
    put(azure, f"{container}/out/orders/part-appended-00000.parquet", b"appended")
    rest = BlobRest(AZURITE_ACCOUNT, AZURITE_KEY, None, azure.endpoint, container)
    assert rest.snapshot("out/orders/part-appended-00000.parquet")
    project = sink_project(tmp_path / "p", container, 2, ", foreign_files: replace")
    again = run(azure, project, "run", "--select", "blob.orders")
    assert again.exit_code == 0, again.output
    assert blobs(azure, container, "out/orders") == ["out/orders/part-00000.parquet"]
    assert snapshots(azure, container) == []


def test_a_replace_never_deletes_blobs_pz_did_not_write(
    tmp_path: Path, azure: AzureServer, container: str
) -> None:
    put(azure, f"{container}/out/orders/theirs.csv", b"id\n1\n")
    refused = run(azure, sink_project(tmp_path / "p", container, 3), "run", "--select", "blob.orders")
    assert refused.exit_code == 1, refused.output
    assert "PZ0530" in refused.output and "holds 1 file(s) pz did not write (theirs.csv)" in refused.output
    assert blobs(azure, container, "out/orders") == ["out/orders/theirs.csv"]

    project = sink_project(tmp_path / "p", container, 3, ", foreign_files: replace")
    opted_in = run(azure, project, "run", "--select", "blob.orders")
    assert opted_in.exit_code == 0, opted_in.output
    assert blobs(azure, container, "out/orders") == ["out/orders/part-00000.parquet"]
    with azure.filesystem().open_input_stream(f"{container}/out/orders/.pz-manifest.json") as f:
        assert json.loads(f.read())["files"] == ["part-00000.parquet"]
    # pz's prefix now: a replace without the opt-in runs
    again = run(azure, sink_project(tmp_path / "p", container, 2), "run", "--select", "blob.orders")
    assert again.exit_code == 0, again.output
