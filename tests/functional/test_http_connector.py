"""The http connector end to end against a loopback JSON API (tests/http_server.py): the four pagination
styles, auth from secret env vars (never in any artifact), throttling through the engine's retry policy,
and the sink's batches with checkpointed delivery."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import PzResult, pz, write_project
from tests.http_server import ApiServer, Fault, running

TOKEN = "s3cr3t-t0ken-4242"
ROWS = [
    {"id": i, "name": f"n{i}", "ts": f"2024-01-{i + 1:02d}T10:00:00", "tags": ["a", "b"]} for i in range(10)
]


@pytest.fixture
def api() -> Iterator[ApiServer]:
    yield from running()


def project(
    root: Path, api: ApiServer, source: str, pipeline: str, extra: dict[str, str] | None = None
) -> Path:
    files = {
        "project.yml": """
            name: apis
            env:
              API_TOKEN: { required: true, secret: true }
            engine: { threads: 2 }
        """,
        "sources/api.yml": source.replace("BASE", api.url),
        "sinks/wh.yml": """
            connector: duckdb
            connection: { path: wh.duckdb }
        """,
        "pipelines/p.sql": pipeline,
        **(extra or {}),
    }
    return write_project(root, files)


def run(root: Path, *args: str) -> PzResult:
    return pz(root, *args, env={"API_TOKEN": TOKEN})


def rows_in(root: Path, table: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(root / "wh.duckdb"), read_only=True) as con:
        return con.execute(f"SELECT * FROM {table} ORDER BY id").fetchall()


def assert_no_secret(root: Path, result: PzResult) -> None:
    assert TOKEN not in result.output
    for path in (root / ".pz").rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl", ".log", ".txt", ""):
            assert TOKEN not in path.read_text(errors="replace"), path


STYLES = {
    "cursor": """
        path: /cursor/items
        records: data.items
        pagination: { style: cursor, cursor_path: meta.next_cursor }
    """,
    "page": """
        path: /page/items
        records: $.results
        pagination: { style: page, size_param: per_page, size: 4 }
    """,
    "offset": """
        path: /offset/items
        records: items
        pagination: { style: offset, limit: 4 }
    """,
    "link": """
        path: /link/items
        pagination: { style: link }
    """,
}
EXPECTED_GETS = {"cursor": 4, "page": 3, "offset": 3, "link": 4}


@pytest.mark.parametrize("style", sorted(STYLES))
def test_each_pagination_style_reads_every_record_once(tmp_path: Path, api: ApiServer, style: str) -> None:
    api.state.datasets["items"] = ROWS
    dataset = "\n".join("            " + line for line in textwrap.dedent(STYLES[style]).strip().splitlines())
    source = f"""
        connector: http
        connection:
          base_url: BASE
          headers: {{ Authorization: "Bearer {{{{ env('API_TOKEN') }}}}" }}
        datasets:
          items:
{dataset}
    """
    api.state.token = TOKEN
    root = project(
        tmp_path / "p",
        api,
        source,
        "INSERT INTO {{ sink('wh', 'items') }}\nSELECT * FROM {{ source('api', 'items') }}\n",
    )
    result = run(root, "run")
    assert result.exit_code == 0, result.output
    got = rows_in(root, "items")
    assert [r[0] for r in got] == list(range(10))
    assert got[3][1] == "n3"
    assert str(got[3][2]) == "2024-01-04 10:00:00"  # inferred as TIMESTAMP, like a JSON file
    assert got[3][3] == ["a", "b"]
    gets = [r for r in api.state.requests if r.method == "GET"]
    assert len(gets) == EXPECTED_GETS[style]
    assert all(r.status == 200 for r in gets)
    assert_no_secret(root, result)


def test_query_token_and_contract_types(tmp_path: Path, api: ApiServer) -> None:
    api.state.datasets["items"] = ROWS
    api.state.token = TOKEN
    source = """
        connector: http
        connection:
          base_url: BASE
          params: { api_key: "{{ env('API_TOKEN') }}" }
        datasets:
          items:
            path: /offset/items
            records: items
            pagination: { style: offset, limit: 5 }
            columns: { id: integer, name: varchar, ts: date }
    """
    root = project(
        tmp_path / "p",
        api,
        source,
        "INSERT INTO {{ sink('wh', 'out') }}\nSELECT * FROM {{ source('api', 'items') }}\n",
    )
    result = run(root, "run")
    assert result.exit_code == 0, result.output
    with duckdb.connect(str(root / "wh.duckdb"), read_only=True) as con:
        types = dict(
            con.execute(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'out'"
            ).fetchall()
        )
    assert types == {"id": "INTEGER", "name": "VARCHAR", "ts": "DATE"}
    assert len(rows_in(root, "out")) == 10
    assert all(r.query.get("api_key") == [TOKEN] for r in api.state.requests)
    plan = run(root, "plan")
    assert plan.exit_code == 0, plan.output
    assert TOKEN not in plan.output
    assert_no_secret(root, result)


def test_wrong_token_fails_once_without_printing_it(tmp_path: Path, api: ApiServer) -> None:
    api.state.datasets["items"] = ROWS
    api.state.token = "another-token"
    source = """
        connector: http
        connection:
          base_url: BASE
          headers: { Authorization: "Bearer {{ env('API_TOKEN') }}" }
        datasets:
          items: { path: /link/items, pagination: { style: link } }
    """
    root = project(
        tmp_path / "p",
        api,
        source,
        "INSERT INTO {{ sink('wh', 'items') }}\nSELECT * FROM {{ source('api', 'items') }}\n",
    )
    result = run(root, "run")
    assert result.exit_code == 1
    node = result.node("src_api__items")
    assert node["status"] == "failed" and node["attempts"] == 1
    assert node["error"]["code"] == "PZ0505" and not node["error"]["transient"]
    assert "HTTP 401" in node["error"]["message"] and "auth header" in node["error"]["message"]
    assert_no_secret(root, result)


def test_throttling_is_retried_by_the_engine_after_retry_after(tmp_path: Path, api: ApiServer) -> None:
    api.state.datasets["items"] = ROWS
    api.state.faults[("GET", "/cursor/items")] = Fault(status=429, times=1, after=1, retry_after="1")
    source = """
        connector: http
        connection: { base_url: BASE }
        retry: { max_attempts: 3, base_delay: 10ms, max_delay: 2s }
        datasets:
          items:
            path: /cursor/items
            records: data.items
            pagination: { style: cursor, cursor_path: meta.next_cursor }
    """
    root = project(
        tmp_path / "p",
        api,
        source,
        "INSERT INTO {{ sink('wh', 'items') }}\nSELECT * FROM {{ source('api', 'items') }}\n",
    )
    result = run(root, "run", "--log-format", "json")
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.lines if line.startswith("{")]
    retries = [e for e in events if e["event"] == "node_retry"]
    assert len(retries) == 1
    assert retries[0]["delay_ms"] >= 1000  # the server's Retry-After (within max_delay) floors the back-off
    assert "HTTP 429" in retries[0]["error"]["message"]
    assert result.node("src_api__items")["attempts"] == 2
    assert len(rows_in(root, "items")) == 10  # every row once
    statuses = [r.status for r in api.state.requests]
    assert statuses.count(429) == 1
    assert statuses.count(200) == 4  # the second attempt resumed at page 2: page 1 was fetched once


def test_throttling_past_the_attempts_fails_transient(tmp_path: Path, api: ApiServer) -> None:
    api.state.datasets["items"] = ROWS
    api.state.faults[("GET", "/page/items")] = Fault(status=503, times=5, retry_after="0")
    source = """
        connector: http
        connection: { base_url: BASE }
        datasets:
          items:
            path: /page/items
            records: results
            retry: { max_attempts: 2, base_delay: 10ms }
            pagination: { style: page }
    """
    root = project(
        tmp_path / "p",
        api,
        source,
        "INSERT INTO {{ sink('wh', 'items') }}\nSELECT * FROM {{ source('api', 'items') }}\n",
    )
    result = run(root, "run")
    assert result.exit_code == 1
    node = result.node("src_api__items")
    assert node["attempts"] == 2 and node["error"]["transient"] is True
    assert "HTTP 503" in node["error"]["message"]
    assert len([r for r in api.state.requests if r.status == 503]) == 2  # never retried inside the connector


RATE_LIMITED = """
    connector: http
    connection: { base_url: BASE }
    datasets:
      items:
        path: /cursor/items
        records: data.items
        pagination: { style: cursor, cursor_path: meta.next_cursor }
        retry: { max_attempts: 5, base_delay: 10ms, max_delay: 2s }
        columns: { id: bigint, name: varchar }
"""


def _rate_limited(tmp_path: Path, api: ApiServer, pacing: str) -> tuple[Path, PzResult]:
    # 10 pages of one record; the API allows 3 GETs per second and answers 429 Retry-After: 1 beyond
    api.state.datasets["items"] = ROWS
    api.state.page_size = 1
    api.state.rate_limit = (3, 1.0)
    root = project(
        tmp_path / "p",
        api,
        RATE_LIMITED + pacing,
        "INSERT INTO {{ sink('wh', 'items') }}\nSELECT id, name FROM {{ source('api', 'items') }}\n",
    )
    return root, run(root, "run")


def test_a_throttled_read_resumes_at_the_page_that_failed_on_the_engines_next_attempt(
    tmp_path: Path, api: ApiServer
) -> None:
    root, result = _rate_limited(tmp_path, api, "")
    assert result.exit_code == 0, result.output
    node = result.node("src_api__items")
    # an attempt is throttled once it has read 3 pages within the window; after Retry-After the next
    # attempt replays the pages already fetched from its spool and continues at the throttled page
    assert rows_in(root, "items") == [(r["id"], r["name"]) for r in ROWS]  # every row exactly once
    statuses = [r.status for r in api.state.requests if r.method == "GET"]
    assert statuses.count(200) == 10  # every page fetched exactly once
    assert statuses.count(429) == node["attempts"] - 1 >= 1  # one per failed attempt, never inside
    cursors = [r.query.get("cursor", [""])[0] for r in api.state.requests if r.status == 200]
    assert len(set(cursors)) == 10
    assert "an earlier attempt fetched are not requested again" in result.output


def test_a_read_throttled_past_its_attempts_fails_naming_the_page_and_rate_limit(
    tmp_path: Path, api: ApiServer
) -> None:
    api.state.datasets["items"] = ROWS
    api.state.page_size = 1
    api.state.faults[("GET", "/cursor/items")] = Fault(status=429, times=10, after=2, retry_after="0")
    root = project(
        tmp_path / "p",
        api,
        RATE_LIMITED.replace("max_attempts: 5", "max_attempts: 3"),
        "INSERT INTO {{ sink('wh', 'items') }}\nSELECT id, name FROM {{ source('api', 'items') }}\n",
    )
    result = run(root, "run")
    assert result.exit_code == 1, result.output
    node = result.node("src_api__items")
    assert node["attempts"] == 3 and node["error"]["transient"] is True
    message = node["error"]["message"]
    # pages 1-2 were fetched once; every attempt resumes at page 3 and is throttled there: the message
    # names the page (the URL without its query string) and the remedy
    assert f"GET {api.url}/cursor/items (page 3): HTTP 429" in message
    assert "?" not in message.split(": HTTP")[0]
    assert "rate_limit:" in message and "the next attempt resumes at this page" in message
    statuses = [r.status for r in api.state.requests]
    assert statuses.count(429) == 3 and statuses.count(200) == 2  # one per attempt: never retried inside


def test_rate_limit_paces_the_read_within_the_quota(tmp_path: Path, api: ApiServer) -> None:
    root, result = _rate_limited(tmp_path, api, "        rate_limit: { requests: 3, per: 1s }\n")
    assert result.exit_code == 0, result.output
    assert rows_in(root, "items") == [(r["id"], r["name"]) for r in ROWS]  # every row exactly once
    ok = [r for r in api.state.requests if r.status == 200]
    assert len(ok) >= 10


def test_validate_reports_rate_limit_mistakes(tmp_path: Path, api: ApiServer) -> None:
    source = """
        connector: http
        connection: { base_url: BASE }
        datasets:
          a: { path: /a, rate_limit: { requests: 0, per: soon } }
          b: { path: /b, rate_limit: { requests: 2, per: 0s, burst: 1 } }
    """
    root = project(
        tmp_path / "p",
        api,
        source,
        "INSERT INTO {{ sink('wh', 'x') }}\n"
        "SELECT * FROM {{ source('api', 'a') }}, {{ source('api', 'b') }}\n",
    )
    result = run(root, "validate")
    assert result.exit_code == 2
    out = result.output
    assert "rate_limit requests must be a whole number of at least 1" in out
    assert "rate_limit per: 'soon' is not a duration" in out
    assert "rate_limit per: must be a positive duration" in out
    assert "burst" in out
    assert "PZ0304" in out


def test_a_server_that_ignores_the_page_parameter_is_an_error(tmp_path: Path, api: ApiServer) -> None:
    api.state.datasets["items"] = ROWS
    api.state.ignore_page = True
    source = """
        connector: http
        connection: { base_url: BASE }
        datasets:
          items: { path: /page/items, records: results, pagination: { style: page, page_param: p } }
    """
    root = project(
        tmp_path / "p",
        api,
        source,
        "INSERT INTO {{ sink('wh', 'items') }}\nSELECT * FROM {{ source('api', 'items') }}\n",
    )
    result = run(root, "run")
    assert result.exit_code == 1
    assert "answered the same page" in result.node("src_api__items")["error"]["message"]


def test_validate_reports_pagination_and_url_mistakes(tmp_path: Path, api: ApiServer) -> None:
    source = """
        connector: http
        connection: { base_url: "ftp://example.org?x=1", timeout: soon }
        datasets:
          a: { path: /a, pagination: { style: cursor } }
          b: { path: /b, pagination: { style: offset, page_param: p } }
          c: { path: /c, pagination: { style: scroll } }
    """
    root = project(
        tmp_path / "p",
        api,
        source,
        "INSERT INTO {{ sink('wh', 'x') }}\nSELECT * FROM {{ source('api', 'a') }}, "
        "{{ source('api', 'b') }}, {{ source('api', 'c') }}\n",
    )
    result = run(root, "validate")
    assert result.exit_code == 2
    out = result.output
    assert "base_url must be an http:// or https:// URL" in out
    assert "timeout:" in out
    assert "cursor needs cursor_path" in out
    assert "offset needs limit" in out
    assert "page_param does not apply to style offset" in out
    assert "scroll" in out


# -- sink -----------------------------------------------------------------------------------------

SINK = """
    connector: http
    connection:
      base_url: BASE
      headers: { Authorization: "Bearer {{ env('API_TOKEN') }}" }
    retry: { max_attempts: ATTEMPTS, base_delay: 10ms, max_delay: 20ms }
    outputs:
      events: { path: /sink/events, strategy: append, batch_size: 4, format: FORMAT }
"""
PUSH = (
    "INSERT INTO {{ sink('api', 'events') }}\n"
    "SELECT i AS id, 'e' || i AS name, DATE '2024-01-01' + i::INT AS day FROM range(10) t(i) ORDER BY i\n"
)


def sink_project(root: Path, api: ApiServer, attempts: int = 1, fmt: str = "json") -> Path:
    files = {
        "project.yml": """
            name: push
            env:
              API_TOKEN: { required: true, secret: true }
        """,
        "sinks/api.yml": SINK.replace("BASE", api.url)
        .replace("ATTEMPTS", str(attempts))
        .replace("FORMAT", fmt),
        "pipelines/push.sql": PUSH,
    }
    return write_project(root, files)


@pytest.mark.parametrize("fmt", ["json", "ndjson"])
def test_sink_posts_batches_and_records_each_acknowledged_one(
    tmp_path: Path, api: ApiServer, fmt: str
) -> None:
    api.state.token = TOKEN
    root = sink_project(tmp_path / "p", api, fmt=fmt)
    result = run(root, "run")
    assert result.exit_code == 0, result.output
    assert [r["id"] for r in api.state.received["events"]] == list(range(10))
    assert api.state.received["events"][2] == {"id": 2, "name": "e2", "day": "2024-01-03"}
    posts = api.state.posts("events")
    assert [len(p.body.splitlines()) if fmt == "ndjson" else len(json.loads(p.body)) for p in posts] == [
        4,
        4,
        2,
    ]
    assert posts[0].headers["Content-Type"] == (
        "application/x-ndjson" if fmt == "ndjson" else "application/json"
    )
    node = result.node("api.events")
    assert node["status"] == "success" and node["rows"] == 10 and node["batches_committed"] == 3
    checkpoint = node["checkpoint"]
    assert checkpoint["batch_rows"] == 4
    assert [(b["index"], b["rows"]) for b in checkpoint["batches"]] == [(0, 4), (1, 4), (2, 2)]
    assert all(b["fingerprint"].startswith("sha256:") for b in checkpoint["batches"])
    assert_no_secret(root, result)
    # the checkpoint is part of the published run_results schema
    from jsonschema import Draft202012Validator

    schema_path = Path(__file__).parents[2] / "pipelinez/engine/state/schemas/run_results.v1.json"
    schema = json.loads(schema_path.read_text())
    Draft202012Validator(schema).validate(result.run_results())


def test_sink_failing_mid_stream_records_what_was_acknowledged(tmp_path: Path, api: ApiServer) -> None:
    api.state.faults[("POST", "/sink/events")] = Fault(status=503, times=1, after=2, retry_after="0")
    root = sink_project(tmp_path / "p", api, attempts=1)
    result = run(root, "run")
    assert result.exit_code == 1
    node = result.node("api.events")
    assert node["status"] == "failed" and node["error"]["transient"] is True
    assert node["batches_committed"] == 2 and node["rows"] == 8
    assert [b["rows"] for b in node["checkpoint"]["batches"]] == [4, 4]
    assert [r["id"] for r in api.state.received["events"]] == list(range(8))


def test_a_retried_attempt_resumes_past_acknowledged_batches(tmp_path: Path, api: ApiServer) -> None:
    api.state.faults[("POST", "/sink/events")] = Fault(status=503, times=1, after=2, retry_after="0")
    root = sink_project(tmp_path / "p", api, attempts=2)
    result = run(root, "run")
    assert result.exit_code == 0, result.output
    assert [r["id"] for r in api.state.received["events"]] == list(range(10))  # each row exactly once
    assert "resuming past 2 acknowledged batch(es) (8 rows)" in result.output
    node = result.node("api.events")
    assert node["attempts"] == 2 and node["rows"] == 10 and node["batches_committed"] == 3


def test_sink_output_without_append_is_refused(tmp_path: Path, api: ApiServer) -> None:
    root = write_project(
        tmp_path / "p",
        {
            "project.yml": "name: push\n",
            "sinks/api.yml": f"connector: http\nconnection: {{ base_url: {api.url} }}\n",
            "pipelines/push.sql": PUSH,
        },
    )
    result = pz(root, "run")
    assert result.exit_code == 2
    assert (
        "PZ0305 pipelines/push.sql:1:13: sink 'api' output 'events' has no entry in sinks/api.yml"
        in result.output
    )
    assert "strategy: append" in result.output
    assert not api.state.requests


def test_pz_retry_sends_everything_again_when_the_result_changed(tmp_path: Path, api: ApiServer) -> None:
    # the same node (same SQL, same id) produces different rows on the retry: the fingerprints of the
    # acknowledged batches no longer match, so every batch is sent again, with a note
    api.state.faults[("POST", "/sink/events")] = Fault(status=503, times=1, after=1, retry_after="0")
    root = write_project(
        tmp_path / "p",
        {
            "project.yml": "name: push\n",
            "sinks/api.yml": f"""
                connector: http
                connection: {{ base_url: {api.url} }}
                retry: {{ max_attempts: 1 }}
                outputs:
                  events: {{ path: /sink/events, strategy: append, batch_size: 4 }}
            """,
            "pipelines/push.sql": """
                INSERT INTO {{ sink('api', 'events') }}
                SELECT i AS id, epoch_us(now()) AS sent_at FROM range(6) t(i) ORDER BY i
            """,
        },
    )
    failed = pz(root, "run")
    assert failed.exit_code == 1
    assert [r["id"] for r in api.state.received["events"]] == [0, 1, 2, 3]
    retry = pz(root, "retry")
    assert retry.exit_code == 0, retry.output
    assert "sending every batch again: what would be sent no longer matches the 1 batch(es)" in retry.output
    assert [r["id"] for r in api.state.received["events"]] == [0, 1, 2, 3, 0, 1, 2, 3, 4, 5]
    node = retry.node("api.events")
    assert node["rows"] == 6 and node["batches_committed"] == 2


def test_validate_connect_fetches_the_first_page_and_caches_its_schema(
    tmp_path: Path, api: ApiServer
) -> None:
    api.state.datasets["items"] = ROWS
    api.state.token = TOKEN
    source = """
        connector: http
        connection:
          base_url: BASE
          params: { api_key: "{{ env('API_TOKEN') }}" }
        datasets:
          items:
            path: /cursor/items
            records: data.items
            pagination: { style: cursor, cursor_path: meta.next_cursor }
          gone: { path: /cursor/nothing, records: data.items }
    """
    root = project(
        tmp_path / "p",
        api,
        source,
        "INSERT INTO {{ sink('wh', 'items') }}\n"
        "SELECT * FROM {{ source('api', 'items') }}, {{ source('api', 'gone') }}\n",
    )
    result = run(root, "validate", "--connect")
    assert result.exit_code == 2
    assert "PZ0602" in result.output and "HTTP 404" in result.output and "/cursor/nothing" in result.output
    schemas = json.loads((root / ".pz" / "target" / "schemas.json").read_text())
    cached = schemas["datasets"]["api.items"]
    assert [c[0] for c in cached] == ["id", "name", "ts", "tags"]
    gets = [r for r in api.state.requests if r.path == "/cursor/items"]
    assert len(gets) == 1  # the first page only
    assert_no_secret(root, result)


def test_a_refused_token_in_the_query_never_shows_up(tmp_path: Path, api: ApiServer) -> None:
    api.state.datasets["items"] = ROWS
    api.state.token = "the-right-one"
    source = """
        connector: http
        connection:
          base_url: BASE
          params: { api_key: "{{ env('API_TOKEN') }}" }
        datasets:
          items: { path: /offset/items, records: items, pagination: { style: offset, limit: 4 } }
    """
    root = project(
        tmp_path / "p",
        api,
        source,
        "INSERT INTO {{ sink('wh', 'items') }}\nSELECT * FROM {{ source('api', 'items') }}\n",
    )
    result = run(root, "run", "--log-format", "json")
    assert result.exit_code == 1
    message = result.node("src_api__items")["error"]["message"]
    assert "GET http://127.0.0.1:" in message and "/offset/items (page 1): HTTP 401" in message
    assert "api_key" not in message  # the URL is printed without its query string
    assert_no_secret(root, result)


def test_a_server_that_is_down_is_transient_and_retried_by_the_engine(tmp_path: Path, api: ApiServer) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    source = f"""
        connector: http
        connection: {{ base_url: "http://127.0.0.1:{port}", timeout: 2s }}
        retry: {{ max_attempts: 2, base_delay: 10ms }}
        datasets:
          items: {{ path: /link/items }}
    """
    root = project(
        tmp_path / "p",
        api,
        source,
        "INSERT INTO {{ sink('wh', 'items') }}\nSELECT * FROM {{ source('api', 'items') }}\n",
    )
    result = run(root, "run")
    assert result.exit_code == 1
    node = result.node("src_api__items")
    assert node["attempts"] == 2 and node["error"]["transient"] is True
    assert "cannot connect" in node["error"]["message"]


def test_retry_reuses_the_staged_api_read_and_resumes_the_api_write(tmp_path: Path, api: ApiServer) -> None:
    # both directions in one project: the read lands in staging once; the write fails after one batch
    api.state.datasets["items"] = ROWS
    api.state.faults[("POST", "/sink/copy")] = Fault(status=503, times=1, after=1, retry_after="0")
    root = write_project(
        tmp_path / "p",
        {
            "project.yml": "name: both\n",
            "sources/api.yml": f"""
                connector: http
                connection: {{ base_url: {api.url} }}
                datasets:
                  items:
                    path: /cursor/items
                    records: data.items
                    pagination: {{ style: cursor, cursor_path: meta.next_cursor }}
            """,
            "sinks/out.yml": f"""
                connector: http
                connection: {{ base_url: {api.url} }}
                retry: {{ max_attempts: 1 }}
                outputs:
                  copy: {{ path: /sink/copy, strategy: append, batch_size: 3, format: ndjson }}
            """,
            "pipelines/copy.sql": """
                INSERT INTO {{ sink('out', 'copy') }}
                SELECT id, name FROM {{ source('api', 'items') }} ORDER BY id
            """,
        },
    )
    plan = pz(root, "plan")
    assert "delivery: at-least-once (append); checkpointed delivery" in plan.output
    assert pz(root, "run").exit_code == 1
    gets = len([r for r in api.state.requests if r.method == "GET"])
    retry = pz(root, "retry")
    assert retry.exit_code == 0, retry.output
    assert len([r for r in api.state.requests if r.method == "GET"]) == gets  # the API is not read again
    assert "resuming past 1 acknowledged batch(es) (3 rows)" in retry.output
    assert [r["id"] for r in api.state.received["copy"]] == list(range(10))
    assert retry.node("src_api__items")["provenance"] == "reused"


def test_keys_that_only_later_pages_have_are_noted_not_silently_dropped(
    tmp_path: Path, api: ApiServer
) -> None:
    api.state.datasets["items"] = [{"id": i, **({"late": "x"} if i >= 6 else {})} for i in range(8)]
    source = """
        connector: http
        connection: { base_url: BASE }
        datasets:
          items: { path: /link/items, pagination: { style: link } }
    """
    root = project(
        tmp_path / "p",
        api,
        source,
        "INSERT INTO {{ sink('wh', 'items') }}\nSELECT * FROM {{ source('api', 'items') }}\n",
    )
    result = run(root, "run")
    assert result.exit_code == 0, result.output
    notes = [line for line in result.lines if line.startswith("note:")]
    assert len(notes) == 1 and "key(s) late are not in the columns inferred from the first page" in notes[0]
    assert "(page 3)" in notes[0] and "declare columns:" in notes[0]
