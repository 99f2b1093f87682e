"""The azureblob promote's asynchronous Copy Blob (`azureblob.copying`) against a loopback blob service that
answers as Azure does when a copy stays pending: polled until it ends; a copy that fails, is aborted or
outlives the wait leaves its destination as it was (restored from a snapshot, or deleted when it did not
exist); a SAS token never reaches a message. Azurite finishes every copy before it answers, so these paths
are tested here (the Azurite tests cover the signed calls and the copy that succeeds at once)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from pipelinez.connectors.azureblob import copying
from pipelinez.connectors.azureblob.copying import copy_blob
from pipelinez.connectors.azureblob.rest import BlobRest
from pipelinez.core.diagnostics import PzConnectorError

KEY = "c2VjcmV0LWtleS1mb3ItdGVzdHMtb25seS0wMTIzNDU2Nzg5"  # base64 of a test key
SAS = "sv=2021-08-06&ss=b&srt=sco&sp=rwdlac&se=2030-01-01T00:00:00Z&sig=S3cr3tS1gnatur3%2Bx%3D"


@dataclass
class Copy:
    copy_id: str
    source: bytes
    plan: list[str]  # the statuses successive reads report; the last one stays
    description: str = ""


@dataclass
class Service:
    """A container `c` of account `acct`: blobs, snapshots, and copies that follow `plan`."""

    blobs: dict[str, bytes] = field(default_factory=dict)
    snapshots: dict[tuple[str, str], bytes] = field(default_factory=dict)
    copies: dict[str, Copy] = field(default_factory=dict)  # each blob's latest copy
    started: list[str] = field(default_factory=list)  # every copy id, in order
    plan: list[str] = field(default_factory=lambda: ["success"])
    description: str = ""
    refuse_copy: tuple[int, str] | None = None  # (status, message) answered to a Copy Blob
    fail_after_copy: int | None = None  # do the (first) Copy Blob, then answer this server-error status
    drop_copy_answer: bool = False  # do the (first) Copy Blob, then close the connection unanswered
    seen: list[tuple[str, str, dict[str, list[str]], dict[str, str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def requests(self, method: str, **query: str) -> list[dict[str, str]]:
        return [
            headers
            for m, _, q, headers in self.seen
            if m == method and all(q.get(k) == [v] for k, v in query.items())
        ]


class _Handler(BaseHTTPRequestHandler):
    service: Service
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _answer(self, status: int, headers: dict[str, str] | None = None, body: bytes = b"") -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, code: str, message: str = "") -> None:
        body = f"<Error><Code>{code}</Code><Message>{message or code}</Message></Error>".encode()
        self._answer(status, {"x-ms-error-code": code}, body)

    def _blob(self) -> tuple[str, dict[str, list[str]]]:
        url = urlsplit(self.path)
        return unquote(url.path).removeprefix("/c/"), parse_qs(url.query)

    def _handle(self) -> None:
        blob, query = self._blob()
        svc = self.service
        with svc.lock:
            svc.seen.append((self.command, blob, query, {k.lower(): v for k, v in self.headers.items()}))
            if self.command == "HEAD":
                self._properties(blob)
            elif self.command == "DELETE":
                stamp = query.get("snapshot", [None])[0]
                found = svc.snapshots.pop((blob, stamp), None) if stamp else svc.blobs.pop(blob, None)
                self._answer(202) if found is not None else self._error(404, "BlobNotFound")
            elif query.get("comp") == ["snapshot"]:
                self._snapshot(blob)
            elif query.get("comp") == ["copy"]:
                self._abort(blob, query["copyid"][0])
            else:
                self._copy(blob, self.headers["x-ms-copy-source"])

    do_HEAD = do_PUT = do_DELETE = _handle

    def _properties(self, blob: str) -> None:
        copy = self.service.copies.get(blob)
        if blob not in self.service.blobs:
            return self._error(404, "BlobNotFound")
        if copy is None:
            return self._answer(200)
        status = copy.plan.pop(0) if len(copy.plan) > 1 else copy.plan[0]
        if status == "success":
            self.service.blobs[blob] = copy.source
        headers = {"x-ms-copy-id": copy.copy_id, "x-ms-copy-status": status}
        if status in ("failed", "pending") and copy.description:
            headers["x-ms-copy-status-description"] = copy.description
        return self._answer(200, headers)

    def _snapshot(self, blob: str) -> None:
        if blob not in self.service.blobs:
            return self._error(404, "BlobNotFound")
        stamp = f"2026-12-01T00:00:{len(self.service.snapshots):02d}.0000000Z"
        self.service.snapshots[(blob, stamp)] = self.service.blobs[blob]
        return self._answer(201, {"x-ms-snapshot": stamp})

    def _copy(self, blob: str, source_url: str) -> None:
        svc = self.service
        if svc.refuse_copy:
            return self._error(svc.refuse_copy[0], "CannotVerifyCopySource", svc.refuse_copy[1])
        source = urlsplit(source_url)
        name = unquote(source.path).removeprefix("/c/")
        stamp = parse_qs(source.query).get("snapshot", [None])[0]
        data = svc.snapshots.get((name, stamp)) if stamp else svc.blobs.get(name)
        if data is None:
            return self._error(404, "CannotVerifyCopySource")
        plan = ["success"] if stamp else list(svc.plan)  # copying a snapshot back over its blob is immediate
        copy = Copy(uuid.uuid4().hex, data, plan, svc.description)
        svc.copies[blob] = copy
        svc.started.append(copy.copy_id)
        status = plan.pop(0) if len(plan) > 1 else plan[0]
        svc.blobs[blob] = data if status == "success" else b""  # a pending copy's destination is unusable
        if svc.drop_copy_answer:
            svc.drop_copy_answer = False
            self.close_connection = True  # the copy happened; its answer is lost
            return None
        if svc.fail_after_copy is not None:
            status_code, svc.fail_after_copy = svc.fail_after_copy, None
            return self._error(status_code, "InternalError")  # the copy happened; the answer says 5xx
        return self._answer(202, {"x-ms-copy-id": copy.copy_id, "x-ms-copy-status": status})

    def _abort(self, blob: str, copy_id: str) -> None:
        copy = self.service.copies.get(blob)
        if copy is None or copy.copy_id != copy_id:
            return self._error(409, "CopyIdMismatch")
        if copy.plan[0] != "pending":
            return self._error(409, "NoPendingCopyOperation")
        copy.plan = ["aborted"]
        self.service.blobs[blob] = b""  # what Azure leaves after an abort: an empty blob
        return self._answer(204)


@pytest.fixture
def service() -> Iterator[tuple[Service, str]]:
    svc = Service()
    handler = type("Handler", (_Handler,), {"service": svc})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield svc, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(copying, "FIRST_DELAY", 0.01)
    monkeypatch.setattr(copying, "MAX_DELAY", 0.02)


def uri(blob: str) -> str:
    return f"az://c/{blob}"


def keyed(url: str) -> BlobRest:
    return BlobRest("acct", KEY, None, url, "c")


def test_a_pending_copy_is_followed_until_it_succeeds(service: tuple[Service, str]) -> None:
    svc, url = service
    svc.blobs.update({"tmp/part.parquet": b"new", "out/part.parquet": b"old"})
    svc.plan = ["pending", "pending", "pending", "success"]
    copy_blob(keyed(url), "tmp/part.parquet", "out/part.parquet", uri)
    assert svc.blobs["out/part.parquet"] == b"new"
    starts = [h for h in svc.requests("PUT") if "x-ms-copy-source" in h]
    assert len(starts) == 1 and "x-ms-requires-sync" not in starts[0]  # the asynchronous Copy Blob
    assert starts[0]["x-ms-copy-source"] == f"{url}/c/tmp/part.parquet"
    assert starts[0]["authorization"].startswith("SharedKey acct:")
    assert len(svc.requests("HEAD")) == 3  # polled until it was no longer pending
    assert svc.requests("PUT", comp="copy") == []  # nothing aborted
    assert svc.snapshots == {}  # the snapshot taken before the copy was deleted


@pytest.mark.parametrize("existed", [True, False], ids=["over-a-blob", "new-blob"])
def test_a_failed_copy_leaves_the_destination_as_it_was(service: tuple[Service, str], existed: bool) -> None:
    svc, url = service
    svc.blobs["tmp/part.parquet"] = b"new"
    if existed:
        svc.blobs["out/part.parquet"] = b"old"
    svc.plan, svc.description = (
        ["pending", "failed"],
        "500 InternalError Copy failed when reading the source.",
    )
    with pytest.raises(PzConnectorError) as caught:
        copy_blob(keyed(url), "tmp/part.parquet", "out/part.parquet", uri)
    err = caught.value
    assert err.code == "PZ0501" and err.is_transient  # Azure's 500: another attempt may succeed
    assert "promoting az://c/out/part.parquet" in err.message
    assert "ended 'failed' (500 InternalError Copy failed when reading the source.)" in err.message
    assert "az://c/out/part.parquet is as it was before the copy. Next: run again" in err.message
    if existed:
        assert svc.blobs["out/part.parquet"] == b"old"  # copied back from its snapshot
        restore = [h for h in svc.requests("PUT") if "snapshot=" in h.get("x-ms-copy-source", "")]
        assert len(restore) == 1
    else:
        assert "out/part.parquet" not in svc.blobs  # it did not exist: the empty leftover is deleted
    assert svc.snapshots == {}


def test_a_copy_pending_past_the_wait_is_aborted_and_undone(
    service: tuple[Service, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    svc, url = service
    monkeypatch.setenv(copying.WAIT_ENV, "0.2")
    svc.blobs.update({"tmp/part.parquet": b"new", "out/part.parquet": b"old"})
    svc.plan = ["pending"]
    with pytest.raises(PzConnectorError) as caught:
        copy_blob(keyed(url), "tmp/part.parquet", "out/part.parquet", uri)
    assert "did not finish within 0.2 s, so pz aborted it" in caught.value.message
    assert copying.WAIT_ENV in caught.value.message and not caught.value.is_transient
    copy_id = svc.started[0]
    aborts = [q for m, _, q, _ in svc.seen if m == "PUT" and q.get("comp") == ["copy"]]
    assert aborts[0]["copyid"] == [copy_id]  # pz aborted its own copy (then copied the snapshot back)
    assert svc.blobs["out/part.parquet"] == b"old" and svc.snapshots == {}


def test_a_refused_copy_changes_nothing_and_a_sas_never_reaches_the_message(
    service: tuple[Service, str],
) -> None:
    svc, url = service
    svc.blobs.update({"tmp/part.parquet": b"new", "out/part.parquet": b"old"})
    # Azure's AuthenticationFailed details echo the string it signed, copy source (with its SAS) included
    svc.refuse_copy = (403, f"Server failed to authenticate: x-ms-copy-source:{url}/c/tmp/part.parquet?{SAS}")
    rest = BlobRest("acct", None, f"?{SAS}", url, "c")
    with pytest.raises(OSError) as caught:
        copy_blob(rest, "tmp/part.parquet", "out/part.parquet", uri)
    text = str(caught.value)
    assert "HTTP 403 CannotVerifyCopySource" in text and "az://c/out/part.parquet" in text
    assert "sig=" not in text.replace("sig=***", "") and "S3cr3tS1gnatur3" not in text
    assert svc.blobs["out/part.parquet"] == b"old" and svc.snapshots == {}
    start = next(h for h in svc.requests("PUT") if "x-ms-copy-source" in h)
    assert "authorization" not in start  # a SAS authorizes: in the URL, and on the copy source
    assert start["x-ms-copy-source"].endswith(f"?{SAS}")
    assert all(q.get("sig") == ["S3cr3tS1gnatur3+x="] for _, _, q, _ in svc.seen)


def test_a_copy_whose_answer_is_lost_is_undone_and_transient(service: tuple[Service, str]) -> None:
    """No answer: pz cannot know whether the copy began, so it puts the blob back from the snapshot."""
    svc, url = service
    svc.blobs.update({"tmp/part.parquet": b"new", "out/part.parquet": b"old"})
    svc.drop_copy_answer = True
    with pytest.raises(OSError) as caught:
        copy_blob(keyed(url), "tmp/part.parquet", "out/part.parquet", uri)
    assert "Azure starting a copy to az://c/out/part.parquet: connection error" in str(caught.value)
    assert getattr(caught.value, "transient", False) is True
    assert svc.blobs["out/part.parquet"] == b"old" and svc.snapshots == {}
    assert len(svc.started) == 2  # the lost one, then the snapshot copied back


def test_a_server_error_answer_to_a_copy_is_undone_like_no_answer(service: tuple[Service, str]) -> None:
    """A 5xx answer does not say the copy did not begin (Azure may have started it): the blob is put back
    from its snapshot, as for a lost answer, and the error is transient."""
    svc, url = service
    svc.blobs.update({"tmp/part.parquet": b"new", "out/part.parquet": b"old"})
    svc.plan = ["pending", "failed"]  # the copy the 500 hid goes on, then fails: the blob must not be left
    svc.fail_after_copy = 500
    with pytest.raises(OSError) as caught:
        copy_blob(keyed(url), "tmp/part.parquet", "out/part.parquet", uri)
    assert "HTTP 500" in str(caught.value) and getattr(caught.value, "transient", False) is True
    assert svc.blobs["out/part.parquet"] == b"old" and svc.snapshots == {}
    assert len(svc.started) == 2  # the one behind the 500, then the snapshot copied back


def test_a_malformed_account_key_is_a_clear_error() -> None:
    with pytest.raises(OSError, match="account key is not valid base64"):
        BlobRest("acct", "not base64!", None, "http://127.0.0.1:1/acct", "c")
