"""The http connector never leaks or hangs: a redirect to another origin goes without the connection's
credentials (a sink's redirected POST is refused, not re-sent as a GET without its rows), a pagination that
never ends stops at a page cap (PZ0536), a server's Retry-After is capped by the retry policy's max_delay,
and `timeout` bounds the whole answer (a server trickling bytes cannot hold a read open)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelinez.connectors.http import settings
from tests.conftest import pz, write_project
from tests.faults.http_server import FaultyHttpServer, Reply, always
from tests.functional.test_http_connector import (
    ROWS,
    TOKEN,
    assert_no_secret,
    project,
    rows_in,
    run,
    sink_project,
)
from tests.http_server import ApiServer, Fault, running

COPY = "INSERT INTO {{ sink('wh', 'items') }}\nSELECT id, name FROM {{ source('api', 'items') }}\n"


@pytest.fixture
def api() -> Iterator[ApiServer]:
    yield from running()


@pytest.fixture
def other() -> Iterator[ApiServer]:
    """A second server: another origin (same host, another port)."""
    yield from running()


CREDENTIALED = """
    connector: http
    connection:
      base_url: BASE
      headers:
        Authorization: "Bearer {{ env('API_TOKEN') }}"
        X-Api-Key: "{{ env('API_TOKEN') }}"
        Cookie: "session={{ env('API_TOKEN') }}"
      params: { api_key: "{{ env('API_TOKEN') }}" }
    datasets:
      items:
        path: PATH
        records: results
        pagination: { style: page, size_param: per_page, size: 4 }
        columns: { id: bigint, name: varchar }
"""


def test_a_redirect_to_another_origin_goes_without_any_credential(
    tmp_path: Path, api: ApiServer, other: ApiServer
) -> None:
    api.state.token = TOKEN
    api.state.redirects["/page/items"] = f"{other.url}/page/items"  # keeps the query string (api_key=...)
    other.state.datasets["items"] = ROWS
    root = project(tmp_path / "p", api, CREDENTIALED.replace("PATH", "/page/items"), COPY)
    result = run(root, "run")
    assert result.exit_code == 0, result.output
    assert [r[0] for r in rows_in(root, "items")] == list(range(10))
    # the API's origin got the credentials (it checks them) and redirected each page
    assert [r.status for r in api.state.requests] == [302, 302, 302]
    assert all(r.headers.get("Authorization") == f"Bearer {TOKEN}" for r in api.state.requests)
    # the other origin got the pages' own parameters, and no header, cookie or parameter carrying a secret
    assert [r.query.get("page") for r in other.state.requests] == [["1"], ["2"], ["3"]]
    for seen in other.state.requests:
        assert "api_key" not in seen.query and TOKEN not in json.dumps(seen.query), seen.query
        assert TOKEN not in json.dumps(seen.headers), seen.headers
        assert not {"authorization", "x-api-key", "cookie"} & {k.lower() for k in seen.headers}
    assert_no_secret(root, result)


def test_a_redirect_within_the_origin_keeps_the_credentials(tmp_path: Path, api: ApiServer) -> None:
    api.state.token = TOKEN
    api.state.datasets["items"] = ROWS
    api.state.redirects["/page/old"] = f"{api.url}/page/items"
    root = project(tmp_path / "p", api, CREDENTIALED.replace("PATH", "/page/old"), COPY)
    result = run(root, "run")
    assert result.exit_code == 0, result.output
    assert [r[0] for r in rows_in(root, "items")] == list(range(10))
    moved = [r for r in api.state.requests if r.path == "/page/items"]
    assert [r.status for r in moved] == [200, 200, 200]  # the token check passed after each redirect


def test_a_sink_post_that_is_redirected_fails_instead_of_arriving_as_a_get(
    tmp_path: Path, api: ApiServer
) -> None:
    api.state.datasets["items"] = ROWS
    api.state.redirects["/sink/events"] = f"{api.url}/page/items"  # a GET there answers 200
    result = run(sink_project(tmp_path / "p", api), "run")
    assert result.exit_code == 1, result.output
    error = result.node("api.events")["error"]
    assert "redirected it (HTTP 302)" in error["message"] and not error["transient"], error
    assert [(r.method, r.path) for r in api.state.requests] == [("POST", "/sink/events")]  # never a GET
    assert api.state.received == {}


ENDLESS = """
    connector: http
    connection: { base_url: BASE }
    datasets:
      items:
        path: /cursor/items
        records: data.items
        pagination: { style: cursor, cursor_path: meta.next_cursor PAGE_CAP }
        columns: { id: bigint, name: varchar }
"""


def test_a_pagination_that_does_not_end_stops_at_the_page_cap(tmp_path: Path, api: ApiServer) -> None:
    api.state.datasets["items"] = ROWS
    api.state.page_size = 1  # 10 pages, each naming a next one but the last
    root = project(tmp_path / "p", api, ENDLESS.replace(" PAGE_CAP", ", page_cap: 3"), COPY)
    result = run(root, "run")
    assert result.exit_code == 1, result.output
    error = result.node("src_api__items")["error"]
    assert error["code"] == "PZ0536", error
    assert "(page 3)" in error["message"] and "pagination.page_cap" in error["message"]
    assert len(api.state.requests) == 3  # never a 4th page


def test_without_page_cap_the_default_cap_applies(
    tmp_path: Path, api: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(settings, "DEFAULT_PAGE_CAP", 4)  # the default (10000) would take 10000 requests
    api.state.datasets["items"] = ROWS
    api.state.page_size = 1
    root = project(tmp_path / "p", api, ENDLESS.replace(" PAGE_CAP", ""), COPY)
    result = run(root, "run")
    assert result.exit_code == 1, result.output
    assert result.node("src_api__items")["error"]["code"] == "PZ0536"
    assert len(api.state.requests) == 4


def test_max_pages_stops_early_without_error_and_excludes_page_cap(
    tmp_path: Path, api: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(settings, "DEFAULT_PAGE_CAP", 1)  # max_pages, set, is the bound: not the cap
    api.state.datasets["items"] = ROWS
    api.state.page_size = 1
    root = project(tmp_path / "p", api, ENDLESS.replace(" PAGE_CAP", ", max_pages: 2"), COPY)
    result = run(root, "run")
    assert result.exit_code == 0, result.output
    assert len(rows_in(root, "items")) == 2
    both = ENDLESS.replace(" PAGE_CAP", ", max_pages: 2, page_cap: 5")
    result = run(project(tmp_path / "q", api, both, COPY), "validate")
    assert result.exit_code == 2, result.output
    assert "PZ0304" in result.output and "both max_pages (stop after" in result.output


def test_a_retry_after_longer_than_max_delay_waits_max_delay(tmp_path: Path, api: ApiServer) -> None:
    api.state.datasets["items"] = ROWS
    api.state.faults[("GET", "/cursor/items")] = Fault(status=429, times=1, after=1, retry_after="100000")
    source = ENDLESS.replace(" PAGE_CAP", "").replace(
        "connection: { base_url: BASE }",
        "connection: { base_url: BASE }\n    retry: { max_attempts: 2, base_delay: 10ms, max_delay: 50ms }",
    )
    root = project(tmp_path / "p", api, source, COPY)
    result = run(root, "run", "--log-format", "json")
    assert result.exit_code == 0, result.output
    retries = [e for e in map(json.loads, filter(None, result.lines)) if e.get("event") == "node_retry"]
    assert len(retries) == 1 and retries[0]["delay_ms"] <= 50, retries  # not 100000 s: the policy caps it
    assert "Retry-After 100000s" in retries[0]["error"]["message"]
    assert len(rows_in(root, "items")) == 10


def test_the_timeout_bounds_the_whole_answer_of_a_trickling_server(tmp_path: Path) -> None:
    body = json.dumps([{"id": i} for i in range(20)]).encode()  # ~200 bytes: minutes at 1 byte per 0.5s
    with FaultyHttpServer({"/items": body}, always(Reply.trickle(every=0.5))) as srv:
        root = write_project(
            tmp_path / "p",
            {
                "project.yml": "name: apis\n",
                "sources/api.yml": f"""
                    connector: http
                    connection: {{ base_url: "{srv.url("")}", timeout: 1s }}
                    retry: {{ max_attempts: 1 }}
                    datasets:
                      items: {{ path: /items, columns: {{ id: bigint }} }}
                """,
                "sinks/wh.yml": "connector: duckdb\nconnection: { path: wh.duckdb }\n",
                "pipelines/p.sql": "INSERT INTO {{ sink('wh', 'items') }}\n"
                "SELECT id FROM {{ source('api', 'items') }}\n",
            },
        )
        result = pz(root, "run")
    assert result.exit_code == 1, result.output
    error = result.node("src_api__items")["error"]
    assert error["transient"] is True, error
    assert "did not arrive within the timeout of 1s" in error["message"], error
    assert len(srv.requests) == 1
