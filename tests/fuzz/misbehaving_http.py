"""A loopback HTTP API that misbehaves on purpose, for fuzz cases with an http source or sink.

One server runs per fuzzing process (a thread, 127.0.0.1, a free port). A case reaches it through the
`__FZ_HTTP__` placeholder, which the harness replaces with `http://127.0.0.1:<port>/c<n>`: `n` is new for
every case run, so what the server counts (requests, pages) starts afresh each time and a case's answers
depend only on its own requests. The rest of the path says how to answer:

    /<behaviour>/<arg>/<arg>...?cursor=&page=&offset=

Every page holds records `{"id", "at", "n"}` in `{"data": [...], "next": <cursor or null>}` (also a `Link:
rel="next"` header, and the page/offset parameters are honoured), so any pagination style of the http
connector reads it. Behaviours: `ok`, `redirect/<status>/<where>`, `endless/<how>`, `throttle/<status>/<retry
after>/<times>`, `trickle/<how>`, `garbage/<kind>`, `status/<code>`; writes (POST/PUT/PATCH) take the same
behaviours and answer `{"ok": true}` when they succeed.

Everything is bounded in time, whatever pz does: a trickle or a stall lasts at most TRICKLE_SECONDS, and once
a case made PAGE_BUDGET requests, or CASE_SECONDS passed since its first one, every further request is
answered `410 Gone` at once (so an endless API ends). The server also notes when a request that carries an
`Authorization` header arrives under another origin (`localhost` instead of `127.0.0.1`: a redirect followed
with the credentials): the harness reports that as a leaked secret.
"""

from __future__ import annotations

import email.utils
import json
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

PAGE_BUDGET = 300  # requests per case before every answer is 410 Gone
CASE_SECONDS = 6.0  # seconds after a case's first request before every answer is 410 Gone
TRICKLE_SECONDS = 1.5  # the longest any one answer takes
RECORDS = 5  # records of a well-behaved dataset (pages of 2)
PAGE_SIZE = 2

RETRY_AFTERS = ("0", "1", "-3", "1.5", "soon", "", "99999999999999999999", "past_date", "date_1s", "3600")
GARBAGE = (
    "html", "not_json", "truncated", "no_content", "big_length", "records_object", "records_scalar", "deep",
    "gzip_claimed", "bad_utf8", "nan",
)  # fmt: skip
BEHAVIOURS: dict[str, list[list[str]]] = {
    "ok": [[]],
    "redirect": [
        [str(code), where]
        for code in (301, 302, 303, 307, 308)
        for where in ("same", "loop", "chain", "other_origin", "scheme", "none", "relative")
    ],
    "endless": [["fresh"], ["same"], ["cycle"], ["empty_fresh"], ["link_self"], ["ignore_page"]],
    "throttle": [
        [str(status), after, str(times)]
        for status in (429, 503)
        for after in RETRY_AFTERS
        for times in (1, 2)
    ],
    "trickle": [["full"], ["short"], ["stall_headers"], ["stall_body"]],
    "garbage": [[kind] for kind in GARBAGE],
    "status": [["400"], ["401"], ["404"], ["413"], ["500"], ["502"]],
}


@dataclass
class _CaseState:
    started: float = 0.0
    requests: int = 0
    per_path: dict[str, int] = field(default_factory=lambda: defaultdict(int))


class MisbehavingApi:
    """The server and what it saw, per case prefix."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cases: dict[str, _CaseState] = defaultdict(_CaseState)
        self.leaks: dict[str, list[str]] = defaultdict(list)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def base(self, case: int) -> str:
        return f"http://127.0.0.1:{self.port}/c{case}"

    def leaked(self, case: int) -> list[str]:
        with self.lock:
            return list(self.leaks.pop(f"c{case}", []))

    def forget(self, case: int) -> None:
        with self.lock:
            self.cases.pop(f"c{case}", None)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


_API: MisbehavingApi | None = None
_API_LOCK = threading.Lock()


def api() -> MisbehavingApi:
    """The process's server, started on first use."""
    global _API
    with _API_LOCK:
        if _API is None:
            _API = MisbehavingApi()
        return _API


def _page(query: dict[str, list[str]], total: int = RECORDS) -> tuple[list[dict[str, Any]], int]:
    """The records of the page a request asks for (cursor, page or offset), and the next start."""
    first = query.get("cursor") or query.get("offset")
    start = int(first[0]) if first and first[0].lstrip("-").isdigit() else 0
    if "page" in query and query["page"][0].isdigit():
        start = (int(query["page"][0]) - 1) * PAGE_SIZE
    start = max(start, 0)
    end = min(start + PAGE_SIZE, total)
    rows = [{"id": i + 1, "at": f"2026-01-0{1 + i % 9} 10:00:00", "n": i * 10} for i in range(start, end)]
    return rows, end


def _handler(owner: MisbehavingApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def do_PUT(self) -> None:
            self._answer()

        def do_PATCH(self) -> None:
            self._answer()

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(min(length, 64 << 20))
            parts = urlsplit(self.path)
            segments = [s for s in parts.path.split("/") if s]
            if not segments or not segments[0].startswith("c"):
                return self._send(404, {"error": "no case"})
            case, rest = segments[0], segments[1:]
            host = (self.headers.get("Host") or "").split(":")[0]
            with owner.lock:
                state = owner.cases[case]
                now = time.monotonic()
                if not state.requests:
                    state.started = now
                state.requests += 1
                state.per_path[parts.path] += 1
                seen = state.per_path[parts.path]
                spent = state.requests > PAGE_BUDGET or now - state.started > CASE_SECONDS
                if host == "localhost" and self.headers.get("Authorization"):
                    owner.leaks[case].append(f"{self.command} {parts.path}: Authorization sent to localhost")
            if spent:
                return self._send(410, {"error": "the fuzz case's request budget is spent"})
            behaviour, args = (rest[0], rest[1:]) if rest else ("ok", [])
            query = parse_qs(parts.query, keep_blank_values=True)
            method = getattr(self, f"_{behaviour}", None)
            if method is None:
                return self._send(404, {"error": f"no behaviour {behaviour}"})
            method(case, args, query, seen)
            return None

        # --- answers -------------------------------------------------------------------------------

        def _send(
            self, status: int, body: Any, headers: dict[str, str] | None = None, raw: bytes | None = None
        ) -> None:
            data = raw if raw is not None else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def _records(self, query: dict[str, list[str]], total: int = RECORDS) -> None:
            if self.command != "GET":
                return self._send(200, {"ok": True})
            rows, end = _page(query, total)
            nxt = str(end) if end < total else None
            headers = {}
            if nxt is not None:
                page = end // PAGE_SIZE + 1
                headers["Link"] = f'<{urlsplit(self.path).path}?cursor={nxt}&page={page}>; rel="next"'
            return self._send(200, {"data": rows, "next": nxt}, headers)

        def _ok(self, case: str, args: list[str], query: dict[str, list[str]], seen: int) -> None:
            self._records(query)

        def _status(self, case: str, args: list[str], query: dict[str, list[str]], seen: int) -> None:
            code = int(args[0]) if args and args[0].isdigit() else 500
            self._send(code, {"error": f"fuzz status {code}"})

        def _redirect(self, case: str, args: list[str], query: dict[str, list[str]], seen: int) -> None:
            code = int(args[0]) if args and args[0].isdigit() else 302
            where = args[1] if len(args) > 1 else "same"
            port = owner.port
            q = urlsplit(self.path).query
            target = {
                "same": f"/{case}/ok?{q}",
                "loop": self.path,
                "chain": f"/{case}/redirect/{code}/chain/{seen}?{q}" if seen < 15 else f"/{case}/ok?{q}",
                "other_origin": f"http://localhost:{port}/{case}/ok?{q}",
                "scheme": "file:///etc/hostname",
                "relative": f"../ok?{q}",
            }.get(where)
            headers = {"Location": target} if target else {}
            self._send(code, {"moved": True}, headers)

        def _endless(self, case: str, args: list[str], query: dict[str, list[str]], seen: int) -> None:
            how = args[0] if args else "fresh"
            first = (query.get("cursor") or ["0"])[0]
            at = int(first) if first.lstrip("-").isdigit() else 0
            rows = [{"id": at + 1, "at": "2026-01-01 10:00:00", "n": at}]
            nxt: str | None = {
                "fresh": str(at + 1),
                "same": "0",
                "cycle": "1" if at == 0 else "0",
                "empty_fresh": str(at + 1),
                "link_self": str(at + 1),
                "ignore_page": str(at + 1),
            }.get(how, str(at + 1))
            if how == "empty_fresh":
                rows = []
            if how == "ignore_page":  # the same first page whatever is asked
                rows = [{"id": 1, "at": "2026-01-01 10:00:00", "n": 0}]
            headers = {"Link": f'<{urlsplit(self.path).path}>; rel="next"'} if how == "link_self" else {}
            if self.command != "GET":
                return self._send(200, {"ok": True})
            self._send(200, {"data": rows, "next": nxt}, headers)

        def _throttle(self, case: str, args: list[str], query: dict[str, list[str]], seen: int) -> None:
            status = int(args[0]) if args and args[0].isdigit() else 429
            after = args[1] if len(args) > 1 else "0"
            times = int(args[2]) if len(args) > 2 and args[2].isdigit() else 1
            if seen > times:
                return self._records(query)
            if after == "past_date":
                after = "Wed, 21 Oct 2015 07:28:00 GMT"
            elif after == "date_1s":
                after = email.utils.formatdate(time.time() + 1, usegmt=True)
            headers = {"Retry-After": after} if after != "" else {}
            self._send(status, {"error": "slow down"}, headers)

        def _trickle(self, case: str, args: list[str], query: dict[str, list[str]], seen: int) -> None:
            how = args[0] if args else "full"
            rows, end = _page(query)
            nxt = str(end) if end < RECORDS else None
            data = json.dumps({"data": rows, "next": nxt}).encode()
            deadline = time.monotonic() + TRICKLE_SECONDS
            try:
                if how == "stall_headers":
                    time.sleep(TRICKLE_SECONDS)
                    self.close_connection = True
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                declared = len(data) * (2 if how == "short" else 1)
                self.send_header("Content-Length", str(declared))
                self.end_headers()
                self.wfile.flush()
                if how == "stall_body":
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    time.sleep(TRICKLE_SECONDS)
                    self.close_connection = True
                    return
                step = max(1, len(data) // 20)
                for i in range(0, len(data), step):
                    if time.monotonic() > deadline:
                        break
                    self.wfile.write(data[i : i + step])
                    self.wfile.flush()
                    time.sleep(0.03)
                if how == "short":
                    self.close_connection = True
            except OSError:  # pz gave up on the answer: fine
                self.close_connection = True

        def _garbage(self, case: str, args: list[str], query: dict[str, list[str]], seen: int) -> None:
            kind = args[0] if args else "not_json"
            if kind == "no_content":
                self.send_response(204)
                self.end_headers()
                return
            if kind == "big_length":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(10**12))
                self.end_headers()
                self.wfile.write(b'{"data": [')
                self.close_connection = True
                return
            raw = {
                "html": b"<html><body>Service temporarily moved</body></html>",
                "not_json": b"this is not json",
                "truncated": b'{"data": [{"id": 1, "at": "2026-01-01',
                "records_object": b'{"data": {"id": 1, "at": "2026-01-01 10:00:00", "n": 1}, "next": null}',
                "records_scalar": b'{"data": 42, "next": null}',
                "deep": b'{"data": [{"id": 1, "n": ' + b"[" * 5000 + b"]" * 5000 + b'}], "next": null}',
                "gzip_claimed": json.dumps({"data": [{"id": 1}], "next": None}).encode(),
                "bad_utf8": b'{"data": [{"id": 1, "at": "\xff\xfe", "n": 1}], "next": null}',
                "nan": b'{"data": [{"id": NaN, "at": "2026-01-01", "n": Infinity}], "next": null}',
            }.get(kind, b"?")
            headers = {"Content-Encoding": "gzip"} if kind == "gzip_claimed" else {}
            self._send(200, None, headers, raw=raw)

    return Handler
