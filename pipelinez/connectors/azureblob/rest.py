"""The few Blob service calls pyarrow's Azure file system does not offer, over the standard library's HTTP
client, signed with the account key (Shared Key, HMAC-SHA256) or authorized by the connection's SAS token:
the asynchronous Copy Blob a promote uses (pyarrow's `copy_file` is the synchronous Copy Blob From URL,
which Azure caps at 256 MiB of source blob), Get Blob Properties to follow it, Abort Copy Blob, and the blob
snapshot that lets a failed copy be rolled back (`copying`), and the conditional calls of a shared state
backend (`files.conditional`: Get Blob with its ETag, Put Blob with `If-None-Match: *` or `If-Match`,
Delete Blob with `If-Match`; a failed precondition is a `Conflict` result).

One attempt per call, like the rest of the connector (the engine owns retries): a refused, reset or timed-out
connection and HTTP 408/429/500/502/503/504 are transient. The account key only ever goes into the
signature and a SAS token only into request URLs and the copy source header: neither is put into a message
(`_scrub` removes a SAS from whatever text the service sends back, which may echo a request's headers).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from email.utils import formatdate
from urllib.parse import parse_qsl, quote, urlsplit

from pipelinez.connectors.files.conditional import Conflict, ConflictReason, Versioned, Written
from pipelinez.connectors.files.rest import TRANSIENT_STATUS, NoReply, Reply, send
from pipelinez.connectors.sdk_errors import ObjectStoreError

API_VERSION = "2021-08-06"
TIMEOUT = 60.0  # seconds per request: every call here answers without moving data
_SIGNED_STANDARD_HEADERS = (
    "content-encoding",
    "content-language",
    "content-length",
    "content-md5",
    "content-type",
    "date",
    "if-modified-since",
    "if-match",
    "if-none-match",
    "if-unmodified-since",
    "range",
)


class AzureRestError(ObjectStoreError):
    """A Blob service call failed. `transient`: another attempt may succeed; `status`: the HTTP status the
    service answered (None when no answer came, so the call may or may not have taken effect); `code`: its
    x-ms-error-code."""

    def __init__(self, message: str, transient: bool, status: int | None = None, code: str | None = None):
        super().__init__(message, transient)
        self.status = status
        self.code = code


@dataclass(frozen=True)
class CopyState:
    """A blob's last Copy Blob as the service reports it (`x-ms-copy-*`)."""

    copy_id: str
    status: str  # pending | success | aborted | failed
    description: str = ""  # x-ms-copy-status-description (failed or pending only)
    progress: str = ""  # x-ms-copy-progress: "<bytes copied>/<total>"


class BlobRest:
    """Signed requests to one container of one account's blob service."""

    def __init__(self, account: str, key: str | None, sas: str | None, blob_url: str, container: str):
        url = urlsplit(blob_url)
        self.account, self.container = account, container
        self.use_ssl = url.scheme != "http"
        self.host = url.netloc
        self.base = url.path.rstrip("/")  # Azurite: /<account>
        self._key = _account_key(key) if key else None
        self._sas = (sas or "").lstrip("?") or None
        self._sig = dict(parse_qsl(self._sas)).get("sig") if self._sas else None

    # -- operations ------------------------------------------------------------------------------
    def name(self, blob: str) -> str:
        """How messages name a blob: `az://<container>/<blob>`."""
        return f"az://{self.container}/{blob}"

    def path(self, blob: str) -> str:
        """The request path of `blob` (of the container itself when `blob` is empty)."""
        container = f"{self.base}/{quote(self.container, safe='')}"
        return f"{container}/{quote(blob, safe='/~')}" if blob else container

    def url(self, blob: str, snapshot: str | None = None) -> str:
        """The blob's URL as a copy source: with the SAS token when that authorizes requests (a Shared Key
        request may read any blob of its account)."""
        sas = self._sas if self._key is None else None
        query = "&".join(
            part for part in (f"snapshot={quote(snapshot, safe='')}" if snapshot else "", sas) if part
        )
        scheme = "https" if self.use_ssl else "http"
        return f"{scheme}://{self.host}{self.path(blob)}" + (f"?{query}" if query else "")

    def start_copy(self, source_url: str, dest: str) -> CopyState:
        """Copy Blob (asynchronous: no x-ms-requires-sync) of `source_url` over the blob `dest`."""
        reply = self._call(
            "PUT", dest, {}, {"x-ms-copy-source": source_url}, what=f"starting a copy to {self.name(dest)}"
        )
        return self._scrubbed(_copy_state(reply, dest))

    def copy_state(self, blob: str) -> CopyState | None:
        """Get Blob Properties' view of the blob's last copy; None when the blob does not exist or was not
        the destination of a copy since it was last written."""
        try:
            reply = self._call("HEAD", blob, {}, what=f"reading the copy status of {self.name(blob)}")
        except AzureRestError as exc:
            if exc.status == 404:
                return None
            raise
        return self._scrubbed(_copy_state(reply, blob)) if "x-ms-copy-id" in reply.headers else None

    def abort_copy(self, blob: str, copy_id: str) -> None:
        """Abort Copy Blob (the service then leaves the blob empty: `copying` restores it)."""
        try:
            self._call(
                "PUT",
                blob,
                {"comp": "copy", "copyid": copy_id},
                {"x-ms-copy-action": "abort"},
                what=f"aborting the copy to {self.name(blob)}",
            )
        except AzureRestError as exc:
            if exc.code != "NoPendingCopyOperation":  # it ended meanwhile: nothing left to abort
                raise

    def snapshot(self, blob: str) -> str | None:
        """Snapshot Blob: the new snapshot's time stamp, or None when the blob does not exist."""
        try:
            reply = self._call("PUT", blob, {"comp": "snapshot"}, what=f"snapshotting {self.name(blob)}")
        except AzureRestError as exc:
            if exc.status == 404:
                return None
            raise
        stamp = reply.headers.get("x-ms-snapshot")
        if not stamp:
            raise AzureRestError(
                f"the blob service returned no snapshot time for {self.name(blob)}", transient=False
            )
        return stamp

    def delete(self, blob: str, snapshot: str | None = None) -> None:
        """Delete Blob: the blob with its snapshots, or only the snapshot `snapshot`; gone already is fine."""
        query = {"snapshot": snapshot} if snapshot else {}
        headers = {} if snapshot else {"x-ms-delete-snapshots": "include"}
        what = (
            f"deleting snapshot {snapshot} of {self.name(blob)}"
            if snapshot
            else f"deleting {self.name(blob)}"
        )
        try:
            self._call("DELETE", blob, query, headers, what=what)
        except AzureRestError as exc:
            if exc.status != 404:
                raise

    # -- conditional calls (files.conditional.ConditionalObjects) -------------------------------
    def read(self, blob: str) -> Versioned | None:
        """Get Blob: the blob's bytes and ETag; None when there is no blob."""
        try:
            reply = self._call("GET", blob, {}, what=f"reading {self.name(blob)}")
        except AzureRestError as exc:
            if exc.code == "BlobNotFound":
                return None
            raise
        return Versioned(reply.body, reply.headers.get("etag", ""))

    def put_if_absent(self, blob: str, data: bytes) -> Written | Conflict:
        return self._put(blob, data, {"If-None-Match": "*"}, "exists")

    def put_if_match(self, blob: str, data: bytes, etag: str) -> Written | Conflict:
        return self._put(blob, data, {"If-Match": etag}, "changed")

    def delete_if_match(self, blob: str, etag: str) -> Written | Conflict:
        headers = {"If-Match": etag, "x-ms-delete-snapshots": "include"}
        try:
            self._call("DELETE", blob, {}, headers, what=f"deleting {self.name(blob)} if unchanged")
        except AzureRestError as exc:
            return _conflict(exc, blob, "changed")
        return Written()

    def _put(
        self, blob: str, data: bytes, condition: dict[str, str], reason: ConflictReason
    ) -> Written | Conflict:
        """Put Blob (one block blob, all or nothing) under a precondition."""
        headers = {**condition, "x-ms-blob-type": "BlockBlob", "Content-Type": "application/octet-stream"}
        what = f"writing {self.name(blob)} conditionally"
        try:
            reply = self._call("PUT", blob, {}, headers, what=what, body=data)
        except AzureRestError as exc:
            return _conflict(exc, blob, reason)
        return Written(reply.headers.get("etag", ""))

    # -- plain calls of a shared state backend (blobs only the lock's holder writes) -------------
    def put(self, blob: str, data: bytes) -> None:
        """Put Blob: replace `blob` (one block blob) in one request."""
        headers = {"x-ms-blob-type": "BlockBlob", "Content-Type": "application/octet-stream"}
        self._call("PUT", blob, {}, headers, what=f"writing {self.name(blob)}", body=data)

    def remove(self, blob: str) -> None:
        """Delete Blob with its snapshots; gone already is fine."""
        self.delete(blob)

    def keys(self, prefix: str) -> list[str]:
        """List Blobs: the name of every blob starting with `prefix`, sorted."""
        found: list[str] = []
        marker: dict[str, str] = {}
        while True:
            query = {"restype": "container", "comp": "list", "prefix": prefix, **marker}
            reply = self._call("GET", "", query, what=f"listing {self.name(prefix)}")
            root = _xml(reply.body)
            if root is None:
                return sorted(found)
            for elem in root.iter():
                if elem.tag.rsplit("}", 1)[-1] == "Blob":
                    name = next((c.text for c in elem if c.tag.rsplit("}", 1)[-1] == "Name"), None)
                    if name:
                        found.append(name)
            following = next((c.text for c in root if c.tag.rsplit("}", 1)[-1] == "NextMarker"), None)
            if not following:
                return sorted(found)
            marker = {"marker": following}

    # -- transport -------------------------------------------------------------------------------
    def _call(
        self,
        method: str,
        blob: str,
        query: dict[str, str],
        headers: dict[str, str] | None = None,
        what: str = "",
        body: bytes = b"",
    ) -> Reply:
        path = self.path(blob)
        encoded = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in sorted(query.items()))
        if self._sas and not self._key:
            encoded = f"{encoded}&{self._sas}" if encoded else self._sas
        headers = dict(headers or {})
        if body:
            headers["content-length"] = str(len(body))
        all_headers = self._signed(method, path, query, headers)
        target = path + (f"?{encoded}" if encoded else "")
        try:
            reply = send(self.host, self.use_ssl, method, target, all_headers, body, TIMEOUT)
        except NoReply as exc:
            raise AzureRestError(self._scrub(f"Azure {what}: {exc}"), transient=True) from None
        status, data = reply.status, reply.body
        if status >= 300:
            code = reply.headers.get("x-ms-error-code") or _error_field(data, "Code") or ""
            said = (_error_field(data, "Message") or "").strip().splitlines()
            detail = f"{code}: {said[0]}" if code and said else code or (said[0] if said else "")
            message = f"Azure {what}: HTTP {status}" + (f" {detail}" if detail else "")
            raise AzureRestError(self._scrub(message), status in TRANSIENT_STATUS, status, code or None)
        return reply

    def _signed(
        self, method: str, path: str, query: dict[str, str], headers: dict[str, str]
    ) -> dict[str, str]:
        """The request's headers with its Shared Key `Authorization` (none when a SAS token authorizes)."""
        headers = {k.lower(): v for k, v in headers.items()}
        headers.setdefault("x-ms-date", formatdate(usegmt=True))
        headers["x-ms-version"] = API_VERSION
        if method in ("PUT", "POST"):
            headers.setdefault("content-length", "0")
        if self._key is None:
            return headers
        to_sign = string_to_sign(method, self.account, path, query, headers)
        digest = hmac.new(self._key, to_sign.encode(), hashlib.sha256).digest()
        headers["authorization"] = f"SharedKey {self.account}:{base64.b64encode(digest).decode()}"
        return headers

    def _scrubbed(self, state: CopyState) -> CopyState:
        """`state` with its description scrubbed (it is the service's text, and may quote the copy source)."""
        return dataclasses.replace(state, description=self._scrub(state.description))

    def _scrub(self, text: str) -> str:
        """`text` without the SAS token or its signature (a service message may echo a request)."""
        for secret in (self._sas, self._sig, quote(self._sig or "", safe="") or None):
            if secret:
                text = text.replace(secret, "***")
        return text


def string_to_sign(
    method: str, account: str, path: str, query: dict[str, str], headers: dict[str, str]
) -> str:
    """Shared Key's string-to-sign for the Blob service (version 2015-02-21 and later): the verb, eleven
    standard headers (Content-Length empty when 0), the x-ms-* headers (lower-case, sorted) and the
    canonicalized resource `/<account><encoded path>` with each query parameter as `\\n<name>:<value>`."""
    lowered = {k.lower(): v for k, v in headers.items()}
    standard = [lowered.get(name, "") for name in _SIGNED_STANDARD_HEADERS]
    if standard[2] == "0":
        standard[2] = ""
    canonical_headers = "".join(
        f"{name}:{' '.join(lowered[name].split())}\n"
        for name in sorted(n for n in lowered if n.startswith("x-ms-"))
    )
    resource = f"/{account}{path}" + "".join(f"\n{k.lower()}:{v}" for k, v in sorted(query.items()))
    return "\n".join([method, *standard]) + "\n" + canonical_headers + resource


def _account_key(key: str) -> bytes:
    try:
        return base64.b64decode(key, validate=True)
    except (binascii.Error, ValueError):
        raise AzureRestError(
            "the account key is not valid base64 (copy it again from the storage account's access keys)",
            transient=False,
        ) from None


def _copy_state(reply: Reply, blob: str) -> CopyState:
    copy_id, status = reply.headers.get("x-ms-copy-id"), reply.headers.get("x-ms-copy-status")
    if not copy_id or not status:
        raise AzureRestError(f"the blob service reported no copy status for {blob}", transient=False)
    return CopyState(
        copy_id,
        status.lower(),
        reply.headers.get("x-ms-copy-status-description", ""),
        reply.headers.get("x-ms-copy-progress", ""),
    )


def _conflict(exc: AzureRestError, blob: str, reason: ConflictReason) -> Conflict:
    """A failed precondition as a result: 412 ConditionNotMet, 409 BlobAlreadyExists (If-None-Match: *
    found a blob), 404 BlobNotFound (no blob to match); any other error raises."""
    if exc.status == 412 or exc.code == "BlobAlreadyExists":
        return Conflict(blob, reason)
    if exc.code == "BlobNotFound":
        return Conflict(blob, "missing")
    raise exc


def _xml(data: bytes) -> ET.Element | None:
    if not data.strip():
        return None
    try:
        return ET.fromstring(data)
    except ET.ParseError:
        return None


def _error_field(data: bytes, name: str) -> str | None:
    root = _xml(data)
    if root is None:
        return None
    for child in root:
        if child.tag.rsplit("}", 1)[-1] == name:
            return child.text
    return None
