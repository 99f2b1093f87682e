"""A loopback HTTP server that answers with faults on a schedule, for tests of HTTP clients (the `http`
connector, DuckDB's httpfs reading a file over http).

    with FaultyHttpServer({"/orders.csv": b"id\\n1\\n"}, first(2, Reply.unavailable(retry_after=1))) as srv:
        url = srv.url("/orders.csv")
        ...
    srv.requests  # one (index, method, path, status) per request, in arrival order

Every request gets a number (0, 1, 2, ... in arrival order) and the policy decides its reply:

- `Reply.ok()`: serve the file (GET and HEAD, with single `Range: bytes=a-b` requests answered 206); a POST or
  PUT is answered 200 `{}` and its body kept in `srv.bodies`;
- `Reply.unavailable(retry_after=s)`: 503 Service Unavailable with `Retry-After: s` (seconds; omitted when
  None);
- `Reply.status(code, retry_after=None)`: any other status (429 Too Many Requests, 500, 502, 504, 404);
- `Reply.reset()`: close the connection without answering;
- `Reply.trickle(every=s)`: serve the file (GET) as `ok` does, but its body one byte every `s` seconds (a
  server that keeps each read of a client alive and the whole answer late).

Policies (`HttpPolicy = Callable[[int, str, str], Reply]`, given index, method and path): `first(n, reply)`
(the first `n` requests get `reply`, later ones are served), `always(reply)`, or any callable. Files may be
added or replaced through `srv.files` at any time. Runs on a daemon thread; stopped on `__exit__`.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType


@dataclass(frozen=True)
class Reply:
    kind: str  # ok | status | reset | trickle
    code: int = 200
    retry_after: float | None = None
    every: float = 0.0  # trickle: seconds between the body's bytes

    @staticmethod
    def ok() -> Reply:
        return Reply("ok")

    @staticmethod
    def unavailable(retry_after: float | None = 1) -> Reply:
        return Reply("status", 503, retry_after)

    @staticmethod
    def status(code: int, retry_after: float | None = None) -> Reply:
        return Reply("status", code, retry_after)

    @staticmethod
    def reset() -> Reply:
        return Reply("reset")

    @staticmethod
    def trickle(every: float) -> Reply:
        return Reply("trickle", every=every)


HttpPolicy = Callable[[int, str, str], Reply]


def always(reply: Reply) -> HttpPolicy:
    return lambda _i, _method, _path: reply


def first(n: int, reply: Reply) -> HttpPolicy:
    return lambda i, _method, _path: reply if i < n else Reply.ok()


_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


class FaultyHttpServer:
    def __init__(self, files: dict[str, bytes], policy: HttpPolicy | None = None):
        self.files = dict(files)
        self.policy: HttpPolicy = policy or always(Reply.ok())
        self.requests: list[tuple[int, str, str, int]] = []
        self.bodies: list[bytes] = []  # what POST/PUT requests answered ok carried
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # quiet
                return

            def do_GET(self) -> None:
                server._answer(self, body=True)

            def do_HEAD(self) -> None:
                server._answer(self, body=False)

            def do_POST(self) -> None:
                server._receive(self)

            def do_PUT(self) -> None:
                server._receive(self)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="faulty-http", daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> FaultyHttpServer:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def statuses(self) -> list[int]:
        with self._lock:
            return [status for *_rest, status in self.requests]

    def _answer(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        with self._lock:
            index = len(self.requests)
            self.requests.append((index, handler.command, handler.path, 0))  # the status is filled in below
        path = handler.path.split("?", 1)[0]
        reply = self.policy(index, handler.command, path)
        if reply.kind == "reset":  # recorded with status 0: no answer
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        if reply.kind == "status":
            self._status(handler, index, reply)
            return
        data = self.files.get(path)
        if data is None:
            self._status(handler, index, Reply.status(404))
            return
        status, payload, extra = 200, data, {}
        match = _RANGE.match(handler.headers.get("Range", ""))
        if match:
            start = int(match.group(1))
            end = int(match.group(2)) if match.group(2) else len(data) - 1
            end = min(end, len(data) - 1)
            status, payload = 206, data[start : end + 1]
            extra["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
        with self._lock:
            self.requests[index] = (index, handler.command, handler.path, status)
        handler.send_response(status)
        handler.send_header("Content-Length", str(len(payload)))
        handler.send_header("Accept-Ranges", "bytes")
        handler.send_header("Content-Type", "application/octet-stream")
        for key, value in extra.items():
            handler.send_header(key, value)
        handler.end_headers()
        if body and reply.kind == "trickle":
            self._trickle(handler, payload, reply.every)
        elif body:
            handler.wfile.write(payload)

    def _trickle(self, handler: BaseHTTPRequestHandler, payload: bytes, every: float) -> None:
        try:
            for i in range(len(payload)):
                handler.wfile.write(payload[i : i + 1])
                handler.wfile.flush()
                time.sleep(every)
        except OSError:  # the client gave up
            handler.close_connection = True

    def _receive(self, handler: BaseHTTPRequestHandler) -> None:
        """POST/PUT: read the body, answer per policy; an ok keeps the body in `bodies`."""
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        with self._lock:
            index = len(self.requests)
            self.requests.append((index, handler.command, handler.path, 0))
        reply = self.policy(index, handler.command, handler.path.split("?", 1)[0])
        if reply.kind == "reset":
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        if reply.kind == "status":
            self._status(handler, index, reply)
            return
        with self._lock:
            self.requests[index] = (index, handler.command, handler.path, 200)
            self.bodies.append(body)
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", "2")
        handler.end_headers()
        handler.wfile.write(b"{}")

    def _status(self, handler: BaseHTTPRequestHandler, index: int, reply: Reply) -> None:
        with self._lock:
            self.requests[index] = (index, handler.command, handler.path, reply.code)
        text = f"status {reply.code}\n".encode()
        handler.send_response(reply.code)
        if reply.retry_after is not None:
            handler.send_header("Retry-After", str(int(reply.retry_after)))
        handler.send_header("Content-Length", str(len(text)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(text)
