"""An object store's own DuckDB reads that lose the network are transient (the connector-reported path):
a proxy in front of moto lets pyarrow's listing through, then stops listening, so the data read (or the CSV
type detection) meets a refused connection. The node is attempted exactly max_attempts times, recovers when
the store comes back between attempts, and a detection that failed on the network never advises declaring
columns. Unit checks of the classifier's words (`files.netfail`)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from pipelinez.connectors.files import objconnector, reading
from pipelinez.connectors.files.netfail import is_network_failure
from pipelinez.core.transient import is_transient_native
from tests.conftest import PzResult, pz, write_project
from tests.faults.tcp_proxy import Fault, FaultProxy, always
from tests.objstores import (
    AZURITE_ACCOUNT,
    AZURITE_KEY,
    S3_KEY_ID,
    S3_SECRET,
    AzureServer,
    S3Server,
    azurite_server,
    moto_server,
)

ENV = {"S3_ID": S3_KEY_ID, "S3_SECRET": S3_SECRET}
NODE = "src_lake__data"


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with moto_server() as server:
        yield server


def _project(tmp_path: Path, s3: S3Server, port: int, declared: bool) -> Path:
    bucket = s3.bucket(f"pz-{secrets.token_hex(4)}")
    with s3.filesystem().open_output_stream(f"{bucket}/in/a.csv") as f:
        f.write(b"id,name\n1,ann\n2,bob\n")
    columns = ", columns: { id: bigint, name: varchar }" if declared else ""
    return write_project(
        tmp_path / "proj",
        {
            "project.yml": "name: net\nenv:\n  S3_ID: {}\n  S3_SECRET: { secret: true }\n"
            "engine:\n  retry: { max_attempts: 3, base_delay: 10ms, max_delay: 20ms }\n",
            "sources/lake.yml": f"""
                connector: s3
                connection: {{ bucket: {bucket}, endpoint: "http://127.0.0.1:{port}",
                  access_key_id: "{{{{ env('S3_ID') }}}}", secret_access_key: "{{{{ env('S3_SECRET') }}}}" }}
                datasets:
                  data: {{ path: in/a.csv, format: csv{columns} }}
            """,
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
            "pipelines/copy.sql": "INSERT INTO {{ sink('wh', 'copy') }}\n"
            "SELECT * FROM {{ source('lake', 'data') }}\n",
        },
    )


def _drop_after_listing(
    monkeypatch: pytest.MonkeyPatch, proxy: FaultProxy, declared: bool, up_for_read: Callable[[int], bool]
) -> list[int]:
    """Each attempt's listing (pyarrow) goes through; right before the connector's DuckDB statement (the
    data read when columns are declared, else the CSV type detection) the proxy listens only if
    `up_for_read(attempt)`."""
    listing = reading.FileDataset.partition_files
    attempts: list[int] = []

    def listed(self: reading.FileDataset, partition: Any) -> Any:
        proxy.listening = True
        attempts.append(len(attempts) + 1)
        return listing(self, partition)

    def dropped_before(statement: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            proxy.listening = up_for_read(len(attempts))
            return statement(*args)

        return run

    monkeypatch.setattr(reading.FileDataset, "partition_files", listed)
    if declared:
        monkeypatch.setattr(objconnector, "land", dropped_before(objconnector.land))
    else:
        monkeypatch.setattr(reading, "resolve_schema", dropped_before(reading.resolve_schema))
    return attempts


def _retry_events(project: Path) -> list[tuple[str, Any]]:
    run = sorted((project / ".pz" / "runs").iterdir())[-1]
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    return [(e["event"], e.get("attempt")) for e in events if e.get("name") == NODE]


def _run(project: Path) -> PzResult:
    return pz(project, "run", env=ENV)


@pytest.mark.parametrize("declared", [True, False], ids=["data-read", "csv-type-detection"])
def test_a_dropped_store_is_attempted_exactly_max_attempts_times(
    tmp_path: Path, s3: S3Server, monkeypatch: pytest.MonkeyPatch, declared: bool
) -> None:
    port = int(s3.endpoint.rsplit(":", 1)[1])
    with FaultProxy(port) as proxy:
        project = _project(tmp_path, s3, proxy.port, declared)
        attempts = _drop_after_listing(monkeypatch, proxy, declared, lambda _attempt: False)
        result = _run(project)
    assert result.exit_code == 1, result.output
    failed = result.node(NODE)
    assert failed["status"] == "failed" and failed["attempts"] == 3, result.output
    assert failed["error"]["code"] == "PZ0505" and failed["error"]["transient"] is True, failed
    assert "declare" not in failed["error"]["message"], failed  # a network drop is no type-detection problem
    assert attempts == [1, 2, 3]
    assert _retry_events(project) == [
        ("node_started", 1),
        ("node_retry", 1),
        ("node_started", 2),
        ("node_retry", 2),
        ("node_started", 3),
        ("node_completed", None),
    ]


@pytest.mark.parametrize("declared", [True, False], ids=["data-read", "csv-type-detection"])
def test_the_load_succeeds_when_the_store_comes_back_between_attempts(
    tmp_path: Path, s3: S3Server, monkeypatch: pytest.MonkeyPatch, declared: bool
) -> None:
    port = int(s3.endpoint.rsplit(":", 1)[1])
    with FaultProxy(port) as proxy:
        project = _project(tmp_path, s3, proxy.port, declared)
        attempts = _drop_after_listing(monkeypatch, proxy, declared, lambda attempt: attempt >= 2)
        result = _run(project)
    assert result.exit_code == 0, result.output
    assert result.node(NODE)["attempts"] == 2 and attempts == [1, 2], result.output
    con = duckdb.connect(str(project / "out" / "wh.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT * FROM copy ORDER BY 1").fetchall() == [(1, "ann"), (2, "bob")]
    finally:
        con.close()


NETWORK = [
    "IO Error: Could not connect to server error for HTTP HEAD to 'http://127.0.0.1:1/b/a.csv'",
    "IO Error: Failure when receiving data from the peer error for HTTP GET to 'http://h/b/a.csv'",
    "IO Error: Error while reading from network socket",
    "IO Error: Fail to get a new connection for: http://127.0.0.1:10000",
    'HTTP Error: Unable to connect to URL "http://h/b/x.parquet": 503 (Service Unavailable)',
    "IO Error: request failed, Status Code: 429",
    "IO Error: Connection error for HTTP GET to 'http://h/x'",  # the closed list itself
]
NOT_NETWORK = [
    "HTTP Error: HTTP GET error on 'http://h/connection closed/x.csv' (HTTP 404 Not Found)",
    'IO Error: No files found that match the pattern "s3://b/could not connect to server/*.csv"',
    'Invalid Input Error: Error when sniffing file "s3://b/a.csv"',
    'HTTP Error: Unable to connect to URL "http://h/x": 403 (Forbidden)',
    "IO Error: status 404 (Not Found)",
]


@pytest.mark.parametrize("message", NETWORK)
def test_network_words_of_the_store_are_transient_for_the_connector_only(message: str) -> None:
    assert is_network_failure(message)


def test_the_engine_closed_list_is_unchanged() -> None:
    assert not is_transient_native(NETWORK[0]) and not is_transient_native(NETWORK[2])


@pytest.mark.parametrize("message", NOT_NETWORK)
def test_other_store_errors_stay_terminal(message: str) -> None:
    assert not is_network_failure(message)


# --- azureblob: the Azure SDK's own retry --------------------------------------------------------------
AZURE_SDK_TRIES = 4  # the Azure SDK for C++'s default RetryOptions: 1 try + MaxRetries 3 (0.8s, 1.6s, 3.2s)


@pytest.fixture(scope="module")
def azure() -> Iterator[AzureServer]:
    with azurite_server() as server:
        yield server


@pytest.mark.parametrize("phase", ["listing", "data-read"])
def test_azureblob_is_attempted_exactly_max_attempts_times_each_with_the_sdk_s_own_tries(
    tmp_path: Path, azure: AzureServer, monkeypatch: pytest.MonkeyPatch, phase: str
) -> None:
    """Azurite behind the fault proxy refuses every connection, either from the start (pyarrow's listing
    meets it) or once the listing is done (DuckDB's azure extension reads the blob). The failure is
    transient and the engine attempts the node exactly max_attempts times. Inside each attempt the Azure
    SDK (under both pyarrow and the azure extension) tries the request 4 times on its own: no setting of
    DuckDB 1.5.5's azure extension or of pyarrow reaches its retry policy, so this is the documented
    third-party exception (docs/resilience.md#connectors-never-retry), pinned by count: 4 refused connections
    per attempt, or 5 at most. One CI run on 2 loaded cores saw 4 + 5 where every run on a quiet machine sees
    4 + 4; where the fifth connection came from (the SDK's transport opening another connection, or a stray
    client of another test worker reaching a reused loopback port) was not established, so one more is
    tolerated; the bound is what matters: pz adds no retries of its own beyond max_attempts."""
    container = azure.container(f"pz-{secrets.token_hex(4)}")
    with azure.filesystem().open_output_stream(f"{container}/in/a.csv") as f:
        f.write(b"id,name\n1,ann\n2,bob\n")
    per_read: list[int] = []  # refused connections during each data read (phase data-read)
    with FaultProxy(azure.port) as proxy:
        if phase == "listing":
            proxy.policy = always(Fault.refuse())
        else:
            land = objconnector.land

            def refused_read(*args: Any) -> Any:
                before = proxy.kinds().count("refuse")
                proxy.policy = always(Fault.refuse())
                try:
                    return land(*args)
                finally:
                    proxy.policy = always(Fault.ok())
                    per_read.append(proxy.kinds().count("refuse") - before)

            monkeypatch.setattr(objconnector, "land", refused_read)
        endpoint = f"http://127.0.0.1:{proxy.port}/{AZURITE_ACCOUNT}"
        project = write_project(
            tmp_path / "proj",
            {
                "project.yml": "name: net\nenv:\n  AZ_KEY: { secret: true }\n"
                "engine:\n  retry: { max_attempts: 2, base_delay: 10ms, max_delay: 10ms }\n",
                "sources/lake.yml": f"""
                    connector: azureblob
                    connection: {{ container: {container}, account_name: {AZURITE_ACCOUNT},
                      account_key: "{{{{ env('AZ_KEY') }}}}", endpoint: "{endpoint}" }}
                    datasets:
                      data: {{ path: in/a.csv, format: csv, columns: {{ id: bigint, name: varchar }} }}
                """,
                "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
                "pipelines/copy.sql": "INSERT INTO {{ sink('wh', 'copy') }}\n"
                "SELECT * FROM {{ source('lake', 'data') }}\n",
            },
        )
        result = pz(project, "run", env={"AZ_KEY": AZURITE_KEY})
        refused = proxy.kinds().count("refuse")
    assert result.exit_code == 1, result.output
    failed = result.node(NODE)
    assert failed["status"] == "failed" and failed["attempts"] == 2, result.output
    assert failed["error"]["transient"] is True, failed
    assert _retry_events(project) == [
        ("node_started", 1),
        ("node_retry", 1),
        ("node_started", 2),
        ("node_completed", None),
    ]
    assert 2 * AZURE_SDK_TRIES <= refused <= 2 * (AZURE_SDK_TRIES + 1), f"{refused} refused for 2 attempts"
    if phase == "data-read":
        assert len(per_read) == 2, per_read  # one data read per engine attempt
        assert all(AZURE_SDK_TRIES <= n <= AZURE_SDK_TRIES + 1 for n in per_read), per_read
