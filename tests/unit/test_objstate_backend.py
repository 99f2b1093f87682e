"""The object-store state backend's core without a server: its url, how store failures become coded errors
naming the backend, and the fenced watermark commit (a holder whose lease was taken over commits nothing),
over an in-memory bucket with the same conditional semantics as S3 and Azure Blob."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

from pipelinez.connectors.azureblob.rest import AzureRestError
from pipelinez.connectors.files.conditional import Conflict, Versioned, Written
from pipelinez.connectors.files.objstate import ObjectStateBackend, StateObjects, split_url
from pipelinez.connectors.s3.rest import S3RestError
from pipelinez.core.run_state import Watermark
from pipelinez.core.state.backend import Holder, StateBackendError

_etags = itertools.count(1)


class MemoryObjects:
    """One bucket in memory: ETags change on every write, preconditions as the stores check them."""

    def __init__(self) -> None:
        self.objects: dict[str, Versioned] = {}

    def name(self, key: str) -> str:
        return f"mem://bucket/{key}"

    def read(self, key: str) -> Versioned | None:
        return self.objects.get(key)

    def _write(self, key: str, data: bytes) -> Written:
        self.objects[key] = Versioned(data, f'"{next(_etags)}"')
        return Written(self.objects[key].etag)

    def put_if_absent(self, key: str, data: bytes) -> Written | Conflict:
        return Conflict(key, "exists") if key in self.objects else self._write(key, data)

    def put_if_match(self, key: str, data: bytes, etag: str) -> Written | Conflict:
        current = self.objects.get(key)
        if current is None or current.etag != etag:
            return Conflict(key, "changed")
        return self._write(key, data)

    def delete_if_match(self, key: str, etag: str) -> Written | Conflict:
        current = self.objects.get(key)
        if current is None or current.etag != etag:
            return Conflict(key, "changed")
        del self.objects[key]
        return Written()

    def put(self, key: str, data: bytes) -> None:
        self._write(key, data)

    def remove(self, key: str) -> None:
        self.objects.pop(key, None)

    def keys(self, prefix: str) -> list[str]:
        return sorted(k for k in self.objects if k.startswith(prefix))


class MemoryBackend(ObjectStateBackend):
    name = "mem"
    scheme = "mem"
    shared = MemoryObjects()

    def make_objects(self, root: str, connection: dict[str, Any]) -> StateObjects:
        return self.shared

    def where(self) -> str:
        return "memory"


def _backend(lease: float = 60.0) -> MemoryBackend:
    return MemoryBackend("twin", {"url": "mem://bucket/pfx", "lease_seconds": lease})


@pytest.fixture(autouse=True)
def fresh_bucket() -> None:
    MemoryBackend.shared = MemoryObjects()


@pytest.mark.parametrize(
    ("url", "parts"),
    [
        ("s3://bucket/a/b", ("bucket", "a/b")),
        ("s3://bucket/", ("bucket", "")),
        ("s3://bucket", ("bucket", "")),
        ("s3:///prefix", None),
        ("https://bucket/prefix", None),
        ("s3://bucket/p?x=1", None),
    ],
)
def test_a_state_url_names_a_bucket_and_a_prefix(url: str, parts: tuple[str, str] | None) -> None:
    assert split_url(url, "s3") == parts


def test_every_project_keeps_its_state_under_its_own_folder() -> None:
    backend = _backend()
    backend.commit_watermarks([Watermark("s", "d", "id", "1", "r1")])
    backend.put_run_file("r1", "run_results.json", "{}")
    assert sorted(MemoryBackend.shared.objects) == [
        "pfx/twin/runs/r1/run_results.json",
        "pfx/twin/watermarks.json",
    ]
    other = MemoryBackend("other", {"url": "mem://bucket/pfx"})
    assert other.watermarks() == {} and other.run_ids() == []


def test_store_failures_are_coded_and_name_the_backend() -> None:
    backend = _backend()
    cases = [
        (S3RestError("S3 reading: connection refused", transient=True), "PZ0580"),
        (S3RestError("S3 reading: HTTP 404 NoSuchBucket", False, "NoSuchBucket", 404), "PZ0583"),
        (S3RestError("S3 reading: HTTP 403 AccessDenied", False, "AccessDenied", 403), "PZ0581"),
        (AzureRestError("Azure: HTTP 404", False, 404, "ContainerNotFound"), "PZ0583"),
        (AzureRestError("Azure reading: timed out", transient=True), "PZ0580"),
    ]
    for exc, code in cases:
        diag = backend._failed("reading the watermarks", exc).diagnostics[0]
        assert diag.code == code and "state backend mem" in diag.message and diag.next_step


def test_a_commit_after_the_lease_was_taken_over_is_refused_and_changes_nothing() -> None:
    a, b = _backend(lease=0.05), _backend(lease=0.05)
    holder_a, holder_b = Holder("a", 1, "run-a", "tok-a"), Holder("b", 2, "run-b", "tok-b")
    assert a.acquire(holder_a) is None
    a.commit_watermarks([Watermark("s", "d", "id", "3", "run-a")])
    time.sleep(0.1)  # A stopped renewing: its lease expired
    assert b.acquire(holder_b) is None  # B takes it over
    b.commit_watermarks([Watermark("s", "d", "id", "9", "run-b")])
    before = MemoryBackend.shared.read("pfx/twin/watermarks.json")
    with pytest.raises(StateBackendError) as refused:
        a.commit_watermarks([Watermark("s", "d", "id", "5", "run-a")])
    assert refused.value.diagnostics[0].code == "PZ0581"
    assert MemoryBackend.shared.read("pfx/twin/watermarks.json") == before  # not even rewritten
    assert not a.renew(holder_a)  # A's renewal learns it lost the lease
    assert b.watermarks()[("s", "d")].value == "9"


def test_a_stale_token_is_refused_even_while_its_own_clock_says_held() -> None:
    a = _backend()
    holder = Holder("a", 1, "run-a", "tok-a")
    assert a.acquire(holder) is None
    lease = MemoryBackend.shared.objects["pfx/twin/lease.json"]
    MemoryBackend.shared.put("pfx/twin/lease.json", lease.data.replace(b"tok-a", b"tok-x"))  # another token
    with pytest.raises(StateBackendError) as refused:
        a.commit_watermarks([Watermark("s", "d", "id", "5", "run-a")])
    assert "was taken over" in refused.value.diagnostics[0].message
    assert a.watermarks() == {}


def test_the_lease_names_the_engine_holder_and_a_second_taker_is_told_who() -> None:
    a, b = _backend(), _backend()
    assert a.acquire(Holder("host-a", 42, "run-a", "tok-a")) is None
    other = b.acquire(Holder("host-b", 7, "run-b", "tok-b"))
    assert other is not None and not other.expired
    assert (other.holder.host, other.holder.pid, other.holder.run_id) == ("host-a", 42, "run-a")
    assert a.renew(Holder("host-a", 42, "run-a2", "tok-a"))  # the run it serves is recorded
    lease = b.lease()
    assert lease is not None and lease.holder.run_id == "run-a2"
    a.release(Holder("host-a", 42, "run-a2", "tok-a"))
    assert b.lease() is None and b.acquire(Holder("host-b", 7, "run-b", "tok-b")) is None


class CarelessObjects(MemoryObjects):
    """A store that accepts `If-None-Match: *` on an object that exists (it ignores the condition)."""

    def put_if_absent(self, key: str, data: bytes) -> Written | Conflict:
        return self._write(key, data)


class IfMatchIgnoringObjects(MemoryObjects):
    """A store that honours `If-None-Match: *` but replaces whatever the ETag sent with `If-Match`: a lease
    renewal or takeover, a watermark commit, would overwrite another writer's object."""

    def put_if_match(self, key: str, data: bytes, etag: str) -> Written | Conflict:
        return self._write(key, data)


class DeleteIgnoringObjects(MemoryObjects):
    """A store that deletes whatever the ETag sent with `If-Match` on a DELETE: a holder that lost the lease
    would delete its new holder's lease on release (a third run could then take it: two holders)."""

    def delete_if_match(self, key: str, etag: str) -> Written | Conflict:
        self.objects.pop(key, None)
        return Written()


@pytest.mark.parametrize(
    ("careless", "said"),
    [
        (CarelessObjects, "ignores If-None-Match: * on an existing object"),
        (IfMatchIgnoringObjects, "ignores If-Match on a write"),
        (DeleteIgnoringObjects, "ignores If-Match on a delete"),
    ],
)
def test_a_store_that_ignores_conditional_writes_fails_the_tier_5_probe_with_pz0584(
    careless: type[MemoryObjects], said: str
) -> None:
    _backend().check_writable()  # honours them: passes, and leaves nothing behind
    assert MemoryBackend.shared.objects == {}
    MemoryBackend.shared = careless()
    with pytest.raises(StateBackendError) as refused:
        _backend().check_writable()
    assert refused.value.diagnostics[0].code == "PZ0584"
    assert said in refused.value.diagnostics[0].message
    assert MemoryBackend.shared.objects == {}
