"""How one request travels: a urllib opener whose connections share one deadline for the whole answer, and
whose redirects never carry credentials to another origin.

- Deadline: every connection the request opens (the first and each redirect's) connects within the time
  left, and when the deadline passes a timer shuts the open sockets down, so a read blocked on a server
  that trickles bytes (each one arriving before a per-read timeout would fire) ends there. `expired` then
  says the answer is late, whatever the interrupted read raised or returned.
- Redirects: a 3xx to the same origin keeps the request's headers; a 3xx to another origin (scheme, host
  or port differ: an https -> http downgrade counts) drops every header the connection configured (an
  Authorization or API-key header, a Cookie) and the configured query parameters from the target URL. Once
  dropped they stay dropped for the rest of the chain. A redirect of a request with a body (a sink's POST,
  PUT or PATCH) is refused: urllib would re-send it as a GET without its rows.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Collection
from typing import IO, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pipelinez.core.diagnostics import PzConnectorError

# what a request keeps when it is redirected to another origin (urllib's header names are capitalized)
KEPT_ACROSS_ORIGINS = frozenset({"User-agent", "Accept"})


def origin(url: str) -> str:
    """scheme://host:port of a URL (the port made explicit), for comparing where requests go."""
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme, 0)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"


class Deadline:
    """The time one answer may take, shared by every connection it opens."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._ends = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.expired = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def left(self) -> float:
        return max(0.001, self._ends - time.monotonic())

    def connection(
        self, kind: type[_WatchedHttp | _WatchedHttps]
    ) -> Callable[..., http.client.HTTPConnection]:
        """A factory of `kind` connections that connect within the time left and are watched."""

        def make(host: str, **options: Any) -> http.client.HTTPConnection:
            options["timeout"] = min(float(options.get("timeout") or self.seconds), self.left())
            conn = kind(host, **options)
            conn.deadline = self
            return conn

        return make

    def watch(self, sock: socket.socket | None) -> None:
        """A connected socket of the answer (urllib drops the connection's reference to it once the
        headers are in, while the response still reads from it): shut down when the deadline passes."""
        if sock is None:
            return
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shutdown(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shutdown(sock)


def _shutdown(sock: socket.socket) -> None:
    # the plain socket's shutdown: an SSL socket's own would tear down its TLS state under a reader
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _WatchedHttp(http.client.HTTPConnection):
    deadline: Deadline

    def connect(self) -> None:
        super().connect()
        self.deadline.watch(self.sock)


class _WatchedHttps(http.client.HTTPSConnection):
    deadline: Deadline

    def connect(self) -> None:
        super().connect()
        self.deadline.watch(self.sock)


class _Http(urllib.request.HTTPHandler):
    def __init__(self, deadline: Deadline):
        super().__init__()
        self.deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self.deadline.connection(_WatchedHttp), req)


class _Https(urllib.request.HTTPSHandler):
    def __init__(self, deadline: Deadline):
        super().__init__()
        self.deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(
            self.deadline.connection(_WatchedHttps),
            req,
            context=self._context,  # type: ignore[attr-defined]
        )


class _Redirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirects, minus the credentials when the target is another origin."""

    def __init__(self, home: str, private_params: Collection[str]):
        super().__init__()
        self.home = home
        self.private_params = frozenset(private_params)

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
        method = req.get_method()
        if method not in ("GET", "HEAD"):
            # urllib would re-send a POST answered 301/302/303 as a GET without its body: a batch the API
            # never received would count as delivered
            raise PzConnectorError(
                f"{method} {shown(req.full_url)}: the server redirected it (HTTP {code}) to {shown(newurl)}; "
                "pz does not follow a redirect of a request that carries rows (they would not arrive): set "
                "the output's path (or base_url) to where the API moved"
            )
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is None or origin(new.full_url) == self.home:
            return new
        for name in [n for n in new.headers if n not in KEPT_ACROSS_ORIGINS]:
            new.remove_header(name)
        new.full_url = without_params(new.full_url, self.private_params)
        return new


def shown(url: str) -> str:
    """The URL as messages print it: no credentials, no query string."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path or '/'}"


def without_params(url: str, names: Collection[str]) -> str:
    """`url` without the query parameters called `names`."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in names]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), parts.fragment))


def opener(url: str, deadline: Deadline, private_params: Collection[str]) -> urllib.request.OpenerDirector:
    """An opener for one request to `url`: its connections under `deadline`, its redirects to other
    origins without the configured headers and `private_params`."""
    return urllib.request.build_opener(
        _Redirects(origin(url), private_params), _Http(deadline), _Https(deadline)
    )
