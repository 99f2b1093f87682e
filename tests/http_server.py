"""A loopback JSON API for the http connector's tests: it paginates (cursor, page number, offset, Link
header), throttles (429/503 with Retry-After, or a
rate limit of N GETs per window), fails mid-stream, checks a token, and counts what it
received. It runs on a thread of the test process, on 127.0.0.1 with a free port; tests start and stop it
(`api_server` fixture in the http tests).

Resources:
- GET /cursor/<name>?cursor=&limit=  -> {"data": {"items": [...]}, "meta": {"next_cursor": "..." | null}}
- GET /page/<name>?page=&per_page=   -> {"results": [...], "page": n}
- GET /offset/<name>?offset=&limit=  -> {"items": [...], "total": n}
- GET /link/<name>?page=             -> [...] with `Link: <...?page=n+1>; rel="next"` while more remain
- POST/PUT /sink/<name>              -> JSON array or NDJSON body appended to `received[name]`
- a path in `redirects` (any method) -> 302 to the URL `redirects[path]` with the query string asked
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Fault:
    """Answer `status` (with Retry-After when set) to `times` requests, after `after` requests of the
    same method and path were answered normally."""

    status: int = 503
    times: int = 1
    after: int = 0
    retry_after: str | None = "0"


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    status: int


@dataclass
class ApiState:
    datasets: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    page_size: int = 3  # cursor and link styles
    token: str | None = None  # required as `Authorization: Bearer <token>` or `?api_key=<token>`
    faults: dict[tuple[str, str], Fault] = field(default_factory=dict)  # (method, path) -> fault
    received: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    requests: list[Seen] = field(default_factory=list)
    answered: Counter[tuple[str, str]] = field(default_factory=Counter)
    ignore_page: bool = False  # a broken server that always answers the first page
    parse_posts: bool = True  # False (benchmarks): accept a body without parsing or keeping its rows
    cache_pages: bool = False  # True (benchmarks): serialize each page once
    # (requests, seconds): a GET beyond `requests` in the last `seconds` is answered 429 Retry-After: 1.
    # The window is counted at half of `seconds` so a client pacing exactly at the limit is never refused
    # for the network's jitter between its send and our receipt.
    rate_limit: tuple[int, float] | None = None
    # path -> a URL (on this server or another): requests of the path are answered 302 to that URL with the
    # query string asked, after the token check
    redirects: dict[str, str] = field(default_factory=dict)
    _gets: list[float] = field(default_factory=list)
    _pages: dict[str, bytes] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def posts(self, name: str) -> list[Seen]:
        return [
            r for r in self.requests if r.method != "GET" and r.path == f"/sink/{name}" and r.status < 300
        ]


class _Handler(BaseHTTPRequestHandler):
    state: ApiState
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def _handle(self, method: str) -> None:
        parts = urlsplit(self.path)
        query = parse_qs(parts.query, keep_blank_values=True)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        state = self.state
        status, headers, payload = self._answer(method, parts.path, query, body)
        with state.lock:
            state.requests.append(Seen(method, parts.path, query, dict(self.headers.items()), body, status))
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _answer(
        self, method: str, path: str, query: dict[str, list[str]], body: bytes
    ) -> tuple[int, dict[str, str], Any]:
        state = self.state
        if state.token is not None:
            bearer = self.headers.get("Authorization") == f"Bearer {state.token}"
            if not bearer and query.get("api_key") != [state.token]:
                return 401, {}, {"error": "unauthorized"}
        if path in state.redirects:
            query_string = urlsplit(self.path).query
            target = state.redirects[path] + (f"?{query_string}" if query_string else "")
            return 302, {"Location": target}, {"moved": target}
        key = (method, path)
        if method == "GET" and state.rate_limit is not None:
            count, seconds = state.rate_limit
            with state.lock:
                now = time.monotonic()
                state._gets = [t for t in state._gets if now - t < seconds * 0.5]
                if len(state._gets) >= count:
                    return 429, {"Retry-After": "1"}, {"error": "rate limited"}
                state._gets.append(now)
        with state.lock:
            fault = state.faults.get(key)
            done = state.answered[key]
            if fault is not None and fault.after <= done and fault.times > 0:
                fault.times -= 1
                headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
                return fault.status, headers, {"error": "throttled"}
            state.answered[key] += 1
        segments = path.strip("/").split("/")
        if len(segments) != 2:
            return 404, {}, {"error": "not found"}
        style, name = segments
        if method != "GET":
            if style != "sink":
                return 405, {}, {"error": "method not allowed"}
            if not state.parse_posts:
                return 200, {}, {"accepted": None}
            text = body.decode()
            rows = (
                json.loads(text)
                if text.lstrip().startswith("[")
                else [json.loads(line) for line in text.splitlines() if line.strip()]
            )
            with state.lock:
                state.received.setdefault(name, []).extend(rows)
            return 200, {}, {"accepted": len(rows)}
        rows = state.datasets.get(name)
        if rows is None:
            return 404, {}, {"error": f"no dataset {name}"}
        if not state.cache_pages:
            return self._page(style, name, rows, query)
        key = self.path
        if key not in state._pages:
            status, headers, payload = self._page(style, name, rows, query)
            if status != 200 or headers:
                return status, headers, payload
            state._pages[key] = json.dumps(payload).encode()
        return 200, {}, state._pages[key]

    def _page(
        self, style: str, name: str, rows: list[dict[str, Any]], query: dict[str, list[str]]
    ) -> tuple[int, dict[str, str], Any]:
        state = self.state

        def arg(key: str, default: int) -> int:
            return int(query.get(key, [str(default)])[0] or default)

        if style == "cursor":
            start = arg("cursor", 0)
            chunk = rows[start : start + state.page_size]
            nxt = start + state.page_size
            return (
                200,
                {},
                {
                    "data": {"items": chunk},
                    "meta": {"next_cursor": str(nxt) if nxt < len(rows) else None},
                },
            )
        if style == "page":
            page, size = arg("page", 1), arg("per_page", state.page_size)
            if state.ignore_page:
                page = 1
            return 200, {}, {"results": rows[(page - 1) * size : page * size], "page": page}
        if style == "offset":
            offset, limit = arg("offset", 0), arg("limit", state.page_size)
            return 200, {}, {"items": rows[offset : offset + limit], "total": len(rows)}
        if style == "link":
            page = arg("page", 1)
            chunk = rows[(page - 1) * state.page_size : page * state.page_size]
            headers = {}
            if page * state.page_size < len(rows):
                headers["Link"] = (
                    f'</link/{name}?page={page + 1}>; rel="next", </link/{name}?page=1>; rel="first"'
                )
            return 200, headers, chunk
        return 404, {}, {"error": "unknown style"}


class ApiServer:
    def __init__(self) -> None:
        self.state = ApiState()
        handler = type("Handler", (_Handler,), {"state": self.state})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="api-server", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> ApiServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def running() -> Iterator[ApiServer]:
    server = ApiServer().start()
    try:
        yield server
    finally:
        server.stop()
