"""A state backend in an object store (`state: {backend: s3 | azureblob, url: ..., connection: {...}}`): the
part S3 and Azure Blob share; each store adds how its url and connection become a bucket's calls
(`s3.state_backend`, `azureblob.state_backend`).

Layout under the url's prefix, one folder per project (several projects can share one prefix):
- `<project>/watermarks.json`: every committed watermark in one JSON document (`sdk_document.JsonDocument`),
  replaced by one conditional write per commit (a run's watermarks land all or none). While this backend
  holds the project lock the commit is fenced: it is refused (PZ0581, the run's PZ0525) unless the lease is
  still ours by our own clock and the lease object still carries our token, read just before the write;
- `<project>/runs/<run_id>/run_results.json` and `events.jsonl`: each replaced by one PUT (atomic);
- `<project>/lease.json`: the project lock, an `sdk_lease.ObjectLease` (conditional create, renewal with
  `If-Match`, takeover of an expired lease with `If-Match`; the store decides every race);
- `<project>/blobs/<name>`: small named files (the `--connect` schema cache).

Every store failure is a `StateBackendError` naming the backend by its url (never a credential) with a next
step: PZ0580 when the store gives no answer, PZ0583 when the bucket or container does not exist, PZ0581
when it refuses a call, PZ0584 when it ignores a conditional write (it cannot hold a lock: tier 5).
"""

from __future__ import annotations

import threading
import time
import uuid
from abc import abstractmethod
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from pipelinez.connectors.files.conditional import ConditionalObjects, Written
from pipelinez.connectors.sdk_document import JsonDocument
from pipelinez.connectors.sdk_errors import ObjectStoreError
from pipelinez.connectors.sdk_lease import LeaseError, LeaseHolder, ObjectLease, decode
from pipelinez.core import failpoints
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.json_types import JsonObject
from pipelinez.core.run_state import Watermark
from pipelinez.core.state.backend import (
    RESULTS,
    Holder,
    LeaseInfo,
    StateBackend,
    StateBackendError,
    backend_error,
    fenced_commit_error,
)

WATERMARKS = "watermarks.json"
LEASE = "lease.json"
_MISSING_ROOT = ("NoSuchBucket", "ContainerNotFound")
_REFUSED_STATUS = (401, 403)
# an ETag no object has: the tier 5 probe's If-Match must fail with it
_NO_SUCH_ETAG = '"00000000000000000000000000000000"'
T = TypeVar("T")


class StateObjects(ConditionalObjects, Protocol):
    """A bucket's calls a state backend uses: the conditional ones, plus plain put, delete and listing for
    the objects only the lock's holder writes (run files, blobs)."""

    def put(self, key: str, data: bytes) -> None: ...

    def remove(self, key: str) -> None: ...

    def keys(self, prefix: str) -> list[str]: ...


def split_url(url: str, scheme: str) -> tuple[str, str] | None:
    """(bucket, prefix without slashes) of `<scheme>://bucket[/prefix]`; None when `url` is not one."""
    head = f"{scheme}://"
    if not url.startswith(head):
        return None
    root, _, prefix = url[len(head) :].partition("/")
    if not root or "?" in url or "#" in url:
        return None
    return root, prefix.strip("/")


class ObjectStateBackend(StateBackend):
    """The state of project `project` under `url` (`scheme`://root/prefix). A subclass builds the
    store's calls (`objects`) and says where the store is (`where`)."""

    scheme = ""
    root_kind = "bucket"  # what the url's first segment is called: bucket, container

    def __init__(self, project: str, settings: Mapping[str, Any]):
        super().__init__(project, settings)
        self.url = str(settings.get("url") or "")
        parts = split_url(self.url, self.scheme)
        if parts is None:
            raise backend_error(
                "PZ0134",
                self.name,
                f"url '{self.url}' is not {self.scheme}://<{self.root_kind}>/<prefix>",
                f"write state.url as {self.scheme}://<{self.root_kind}>/<prefix> in project.yml",
            )
        self.root, prefix = parts
        self.base = "/".join(p for p in (prefix, project) if p) + "/"
        connection = dict(settings.get("connection") or {})
        try:
            self.objects = self.make_objects(self.root, connection)
        except (PzConnectorError, ObjectStoreError) as exc:
            raise backend_error(
                "PZ0134", self.name, f"state.connection is not usable: {exc}", "fix state.connection"
            ) from None
        self.document = JsonDocument(self.objects, self.base + WATERMARKS)
        self._lease: ObjectLease | None = None
        self._lock = threading.Lock()

    @abstractmethod
    def make_objects(self, root: str, connection: dict[str, Any]) -> StateObjects:
        """The calls of bucket/container `root` with the store connector's connection keys."""

    @abstractmethod
    def where(self) -> str:
        """Where the store is (an endpoint, an account), never a secret."""

    def describe(self) -> str:
        return f"{self.name} {self.url.rstrip('/')}/{self.project} ({self.where()})"

    # -- errors --------------------------------------------------------------------------------------
    def _failed(self, what: str, exc: Exception) -> StateBackendError:
        if isinstance(exc, PzConnectorError) and exc.code in ("PZ0592", "PZ0594"):
            return backend_error(exc.code, self.name, f"{what} failed: {exc}")
        status, code = getattr(exc, "status", None), getattr(exc, "code", None)
        if status is None and isinstance(exc, ObjectStoreError) and exc.transient:
            return backend_error(
                "PZ0580",
                self.name,
                f"cannot be reached ({what}): {exc}",
                "check that the store in state.connection is up and reachable from here, then run the "
                "command again (nothing was recorded)",
            )
        if code in _MISSING_ROOT:
            return backend_error(
                "PZ0583",
                self.name,
                f"{self.root_kind} '{self.root}' does not exist at {self.where()} ({what})",
                f"create the {self.root_kind}, or fix state.url in project.yml; pz never creates one",
            )
        hint = (
            "check the credentials in state.connection and that they may read, write and list "
            if status in _REFUSED_STATUS
            else "check that the credentials in state.connection may read, write and list "
        )
        return backend_error(
            "PZ0581",
            self.name,
            f"{what} failed: {exc}",
            f"{hint}{self.url}, then run the command again",
        )

    def _call(self, what: str, work: Callable[[], T]) -> T:
        """`work`, its store failures raised as coded errors naming the backend."""
        try:
            return work()
        except (ObjectStoreError, PzConnectorError) as exc:
            raise self._failed(what, exc) from None

    # -- watermarks ----------------------------------------------------------------------------------
    def watermarks(self) -> dict[tuple[str, str], Watermark]:
        doc = self._call("reading the watermarks", self.document.read)
        return _marks(doc)

    def commit_watermarks(self, marks: Iterable[Watermark]) -> None:
        marks = list(marks)
        if not marks:
            return

        def change(doc: JsonObject | None) -> JsonObject:
            merged = _marks(doc)
            merged.update({(m.source, m.dataset): m for m in marks})
            return {
                "pz_state": 1,
                "project": self.project,
                "committed_by": self._lease.token if self._lease is not None else "",
                "watermarks": [m.__dict__ for _, m in sorted(merged.items())],
            }

        failpoints.hit("state.commit_watermarks")
        self._call("committing the watermarks", lambda: self.document.update(change, guard=self._fence))

    def _fence(self) -> None:
        """Before the document's conditional write: refuse unless the lease this backend holds is still
        ours (renewed within its length by our clock, and the lease object still carries our token).
        Nothing to check outside a lock (`pz state migrate` outside a run holds one too)."""
        lease = self._lease
        if lease is None:
            return
        why = ""
        try:
            lease.check()
            current = lease.objects.read(lease.key)
            if current is None or decode(lease.name, current.data).token != lease.token:
                why = "was taken over"
        except LeaseError:
            why = "expired"
        if why:
            raise fenced_commit_error(self.name, why, "the store")

    # -- runs ------------------------------------------------------------------------------------------
    def _run_key(self, run_id: str, name: str) -> str:
        return f"{self.base}runs/{run_id}/{name}"

    def put_run_file(self, run_id: str, name: str, text: str) -> None:
        key = self._run_key(run_id, name)
        self._call(f"recording {name} of run {run_id}", lambda: self.objects.put(key, text.encode()))

    def get_run_file(self, run_id: str, name: str) -> str | None:
        found = self._call(
            f"reading {name} of run {run_id}", lambda: self.objects.read(self._run_key(run_id, name))
        )
        return None if found is None else bytes(found.data).decode("utf-8", errors="replace")

    def run_ids(self) -> list[str]:
        prefix = f"{self.base}runs/"
        keys = self._call("listing the runs", lambda: self.objects.keys(prefix))
        ids = {k[len(prefix) :].split("/", 1)[0] for k in keys if k.endswith(f"/{RESULTS}")}
        return sorted(ids)

    def delete_run(self, run_id: str) -> None:
        prefix = f"{self.base}runs/{run_id}/"

        def delete() -> None:
            for key in self.objects.keys(prefix):
                self.objects.remove(key)

        self._call(f"deleting run {run_id}", delete)

    # -- the lease ---------------------------------------------------------------------------------------
    def acquire(self, holder: Holder) -> LeaseInfo | None:
        lease = ObjectLease(self.objects, self.base + LEASE, holder.run_id, self.lease_seconds)
        # the engine's holder: the lease object names it, and its renewals and release find this lease
        lease.token, lease.host, lease.pid = holder.token, holder.host, holder.pid
        try:
            lease.acquire()
        except LeaseError as exc:
            if exc.code != "PZ0590":
                raise self._failed("taking the project lock", exc) from None
            if exc.holder is not None:
                return _info(exc.holder)
            current = self.lease()
            if current is None:
                raise backend_error(
                    "PZ0581", self.name, "the project lock changed hands too fast to be taken"
                ) from None
            return current
        except ObjectStoreError as exc:
            raise self._failed("taking the project lock", exc) from None
        with self._lock:
            self._lease = lease
        return None

    def _held(self, holder: Holder) -> ObjectLease | None:
        with self._lock:
            lease = self._lease
        return lease if lease is not None and lease.token == holder.token else None

    def renew(self, holder: Holder) -> bool:
        lease = self._held(holder)
        if lease is None:
            return False
        lease.run_id = holder.run_id  # the run it serves (`pz state show`, a takeover's interrupted run)
        try:
            lease.renew()
        except LeaseError:
            return False
        except ObjectStoreError as exc:
            raise self._failed("renewing the project lock", exc) from None
        return True

    def release(self, holder: Holder) -> None:
        lease = self._held(holder)
        with self._lock:
            self._lease = None
        if lease is None:
            return
        try:
            lease.release()
        except (ObjectStoreError, LeaseError) as exc:
            raise self._failed("releasing the project lock", exc) from None

    def lease(self) -> LeaseInfo | None:
        found = self._call("reading the project lock", lambda: self.objects.read(self.base + LEASE))
        if found is None:
            return None
        try:
            return _info(decode(self.objects.name(self.base + LEASE), found.data))
        except LeaseError as exc:
            raise self._failed("reading the project lock", exc) from None

    # -- blobs -----------------------------------------------------------------------------------------------
    def put_blob(self, name: str, data: bytes) -> None:
        self._call(f"recording {name}", lambda: self.objects.put(f"{self.base}blobs/{name}", data))

    def get_blob(self, name: str) -> bytes | None:
        found = self._call(f"reading {name}", lambda: self.objects.read(f"{self.base}blobs/{name}"))
        return None if found is None else bytes(found.data)

    def check_writable(self) -> None:
        """Tier 5: a probe object created with `If-None-Match: *`, then created again, replaced and deleted
        under an ETag it does not have (the store must refuse all three: else it ignores a condition the
        lease or the watermark document relies on, and cannot hold a lock, PZ0584), the prefix listed, the
        probe deleted."""
        key = f"{self.base}.pz-write-probe-{uuid.uuid4().hex}"

        def probe() -> None:
            first = self.objects.put_if_absent(key, b"probe")
            try:
                ignored = [
                    condition
                    for condition, result in (
                        ("If-None-Match: * on an existing object", self.objects.put_if_absent(key, b"probe")),
                        ("If-Match on a write", self.objects.put_if_match(key, b"probe", _NO_SUCH_ETAG)),
                        ("If-Match on a delete", self.objects.delete_if_match(key, _NO_SUCH_ETAG)),
                    )
                    if isinstance(result, Written)
                ]
                self.objects.keys(self.base)
            finally:
                self.objects.remove(key)
            if not isinstance(first, Written) or ignored:
                raise backend_error(
                    "PZ0584",
                    self.name,
                    f"the store at {self.where()} "
                    + (
                        f"ignores {', '.join(ignored)}"
                        if ignored
                        else "refuses If-None-Match: * on a new object"
                    )
                    + ": it cannot hold the project lock or commit watermarks atomically",
                    "use a store that honours If-None-Match and If-Match (AWS S3, Azure Blob Storage, "
                    "a recent MinIO), or another state backend",
                )

        self._call("the write probe", probe)


def _marks(doc: JsonObject | None) -> dict[tuple[str, str], Watermark]:
    rows = (doc or {}).get("watermarks") or []
    marks = {}
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict):
            mark = Watermark(
                *(str(row.get(k, "")) for k in ("source", "dataset", "column", "value", "run_id"))
            )
            marks[(mark.source, mark.dataset)] = mark
    return marks


def _info(holder: LeaseHolder) -> LeaseInfo:
    until = datetime.fromtimestamp(holder.expires_at, UTC).isoformat(timespec="milliseconds")
    return LeaseInfo(
        Holder(holder.host, holder.pid, holder.run_id, holder.token),
        until.replace("+00:00", "Z"),
        holder.expired(time.time()),
    )
