"""The few S3 calls pyarrow's S3 client does not offer, signed with AWS Signature Version 4 over the standard
library's HTTP client: multipart copy (for objects over CopyObject's 5 GiB cap) and listing and aborting
incomplete multipart uploads (which a killed or failed write leaves behind, billed until aborted), and the
conditional calls of a shared state backend (`files.conditional`: GET with its ETag, PUT with
`If-None-Match: *` or `If-Match`, DELETE with `If-Match`; a failed precondition is a `Conflict` result).

One attempt per call, like the rest of the connector (the engine owns retries): a refused, reset or timed-out
connection, HTTP 500/503 or the S3 codes SlowDown/RequestTimeout/InternalError are transient. S3 can answer a
part copy or a completion with `200 OK` and an `<Error>` body; that is an error too. Credentials only ever go
into the signature, never into a message.
"""

from __future__ import annotations

import hashlib
import hmac
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

from pipelinez.connectors.files.conditional import Conflict, ConflictReason, Versioned, Written
from pipelinez.connectors.files.rest import TRANSIENT_STATUS, NoReply, Reply, send
from pipelinez.connectors.sdk_errors import ObjectStoreError

_TRANSIENT_CODES = (
    "SlowDown",
    "RequestTimeout",
    "InternalError",
    "ServiceUnavailable",
    "RequestTimeTooSkewed",
)
_EMPTY_SHA = hashlib.sha256(b"").hexdigest()
TIMEOUT = 300.0  # seconds per request: a part copy (up to 5 GiB) runs inside the store before it answers
SMALL_TIMEOUT = 30.0  # seconds per conditional call (a small object): a lease lasts tens of seconds


class S3RestError(ObjectStoreError):
    """An S3 call failed; `transient` says whether another attempt may succeed."""

    def __init__(self, message: str, transient: bool, code: str | None = None, status: int | None = None):
        super().__init__(message, transient)
        self.code = code
        self.status = status


def _strip_ns(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _find(elem: ET.Element, name: str) -> str | None:
    for child in elem:
        if _strip_ns(child.tag) == name:
            return child.text
    return None


@dataclass(frozen=True)
class Upload:
    key: str
    upload_id: str


class S3Rest:
    """Signed requests to one bucket."""

    def __init__(
        self,
        bucket: str,
        region: str,
        endpoint: str | None,
        use_ssl: bool,
        url_style: str,
        key_id: str | None,
        secret: str | None,
        token: str | None,
    ):
        self.bucket = bucket
        self.region = region
        self.use_ssl = use_ssl
        self.key_id, self.secret, self.token = key_id, secret, token
        host = endpoint or f"s3.{region}.amazonaws.com"
        if url_style == "vhost":
            self.host, self.base = f"{bucket}.{host}", ""
        else:
            self.host, self.base = host, "/" + quote(bucket, safe="")

    # -- operations ------------------------------------------------------------------------------
    def create_upload(self, key: str) -> str:
        body = self._call("POST", key, {"uploads": ""}, what=f"starting a multipart copy to {key}")
        upload_id = _find(body, "UploadId") if body is not None else None
        if not upload_id:
            raise S3RestError(f"S3 did not return an upload id for {key}", transient=False)
        return upload_id

    def copy_part(self, key: str, upload_id: str, number: int, source: str, first: int, last: int) -> str:
        headers = {
            "x-amz-copy-source": f"/{quote(self.bucket, safe='')}/{quote(source, safe='/~')}",
            "x-amz-copy-source-range": f"bytes={first}-{last}",
        }
        body = self._call(
            "PUT",
            key,
            {"partNumber": str(number), "uploadId": upload_id},
            headers,
            what=f"copying part {number} of {source} to {key}",
        )
        etag = _find(body, "ETag") if body is not None else None
        if not etag:
            raise S3RestError(f"S3 returned no ETag for part {number} of {key}", transient=True)
        return etag

    def complete(self, key: str, upload_id: str, etags: list[str]) -> None:
        parts = "".join(
            f"<Part><PartNumber>{i}</PartNumber><ETag>{_xml_text(etag)}</ETag></Part>"
            for i, etag in enumerate(etags, start=1)
        )
        payload = f"<CompleteMultipartUpload>{parts}</CompleteMultipartUpload>".encode()
        self._call("POST", key, {"uploadId": upload_id}, body=payload, what=f"completing the copy to {key}")

    def abort(self, key: str, upload_id: str) -> None:
        try:
            self._call("DELETE", key, {"uploadId": upload_id}, what=f"aborting an upload to {key}")
        except S3RestError as exc:
            if exc.code != "NoSuchUpload":  # gone already is what was wanted
                raise

    def uploads(self, prefix: str) -> list[Upload]:
        """Every incomplete multipart upload whose key starts with `prefix`."""
        found: list[Upload] = []
        markers: dict[str, str] = {}
        while True:
            query = {"uploads": "", "prefix": prefix, **markers}
            body = self._call("GET", "", query, what=f"listing incomplete uploads under {prefix}")
            if body is None:
                return found
            for elem in body:
                if _strip_ns(elem.tag) == "Upload":
                    key, upload_id = _find(elem, "Key"), _find(elem, "UploadId")
                    if key and upload_id:
                        found.append(Upload(key, upload_id))
            if (_find(body, "IsTruncated") or "").lower() != "true":
                return found
            key_marker = _find(body, "NextKeyMarker") or ""
            id_marker = _find(body, "NextUploadIdMarker") or ""
            if not key_marker:
                return found
            markers = {"key-marker": key_marker, "upload-id-marker": id_marker}

    # -- conditional calls (files.conditional.ConditionalObjects) -------------------------------
    def name(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def read(self, key: str) -> Versioned | None:
        try:
            reply = self._request("GET", key, {}, what=f"reading {self.name(key)}", timeout=SMALL_TIMEOUT)
        except S3RestError as exc:
            if exc.code == "NoSuchKey":
                return None
            raise
        return Versioned(reply.body, reply.headers.get("etag", ""))

    def put_if_absent(self, key: str, data: bytes) -> Written | Conflict:
        return self._put(key, data, {"If-None-Match": "*"}, "exists")

    def put_if_match(self, key: str, data: bytes, etag: str) -> Written | Conflict:
        return self._put(key, data, {"If-Match": etag}, "changed")

    def delete_if_match(self, key: str, etag: str) -> Written | Conflict:
        what = f"deleting {self.name(key)} if unchanged"
        try:
            self._request("DELETE", key, {}, {"If-Match": etag}, what=what, timeout=SMALL_TIMEOUT)
        except S3RestError as exc:
            return _conflict(exc, key, "changed")
        return Written()

    def _put(
        self, key: str, data: bytes, condition: dict[str, str], reason: ConflictReason
    ) -> Written | Conflict:
        headers = {**condition, "Content-Type": "application/octet-stream"}
        try:
            reply = self._request(
                "PUT", key, {}, headers, data, f"writing {self.name(key)} conditionally", SMALL_TIMEOUT
            )
        except S3RestError as exc:
            return _conflict(exc, key, reason)
        return Written(reply.headers.get("etag", ""))

    # -- plain calls of a shared state backend (objects only the lock's holder writes) ------------
    def put(self, key: str, data: bytes) -> None:
        """PutObject: replace `key` in one request (readers see the old object or the new one)."""
        headers = {"Content-Type": "application/octet-stream"}
        self._request("PUT", key, {}, headers, data, f"writing {self.name(key)}", SMALL_TIMEOUT)

    def remove(self, key: str) -> None:
        """DeleteObject; gone already is fine (S3 answers 204 either way)."""
        self._request("DELETE", key, {}, what=f"deleting {self.name(key)}", timeout=SMALL_TIMEOUT)

    def keys(self, prefix: str) -> list[str]:
        """ListObjectsV2: every key starting with `prefix`, sorted."""
        found: list[str] = []
        token: dict[str, str] = {}
        while True:
            query = {"list-type": "2", "prefix": prefix, **token}
            reply = self._request(
                "GET", "", query, what=f"listing {self.name(prefix)}", timeout=SMALL_TIMEOUT
            )
            body = _parse(reply.body)
            if body is None:
                return sorted(found)
            if _strip_ns(body.tag) == "Error":
                raise _error(reply.status, body, f"listing {self.name(prefix)}")
            for elem in body:
                if _strip_ns(elem.tag) == "Contents":
                    key = _find(elem, "Key")
                    if key:
                        found.append(key)
            following = _find(body, "NextContinuationToken")
            if (_find(body, "IsTruncated") or "").lower() != "true" or not following:
                return sorted(found)
            token = {"continuation-token": following}

    # -- transport -------------------------------------------------------------------------------
    def _call(
        self,
        method: str,
        key: str,
        query: dict[str, str],
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        what: str = "",
    ) -> ET.Element | None:
        reply = self._request(method, key, query, headers, body, what)
        root = _parse(reply.body)
        if root is not None and _strip_ns(root.tag) == "Error":  # S3 can say 200 OK with an <Error> body
            raise _error(reply.status, root, what)
        return root

    def _request(
        self,
        method: str,
        key: str,
        query: dict[str, str],
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        what: str = "",
        timeout: float = TIMEOUT,
    ) -> Reply:
        """One signed request and its reply; an error status raises."""
        path = (self.base + "/" + quote(key, safe="/~")) if key else (self.base or "/")
        canonical_query = "&".join(
            f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(query.items())
        )
        all_headers = self._signed(method, path, canonical_query, dict(headers or {}), body)
        target = path + (f"?{canonical_query}" if canonical_query else "")
        try:
            reply = send(self.host, self.use_ssl, method, target, all_headers, body, timeout)
        except NoReply as exc:
            raise S3RestError(f"S3 {what}: {exc}", transient=True) from None
        if reply.status >= 300:
            root = _parse(reply.body)
            if root is not None and _strip_ns(root.tag) == "Error":
                raise _error(reply.status, root, what)
            raise S3RestError(
                f"S3 {what}: HTTP {reply.status}", reply.status in TRANSIENT_STATUS, status=reply.status
            )
        return reply

    def _signed(
        self,
        method: str,
        path: str,
        canonical_query: str,
        headers: dict[str, str],
        body: bytes,
        now: datetime | None = None,
    ) -> dict[str, str]:
        """The request's headers with its SigV4 signature (`now`: the signing time, for tests)."""
        now = now or datetime.now(UTC)
        amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        payload_hash = hashlib.sha256(body).hexdigest() if body else _EMPTY_SHA
        headers = {k.lower(): v for k, v in headers.items()}
        headers.update({"host": self.host, "x-amz-date": amz_date, "x-amz-content-sha256": payload_hash})
        if body:
            headers.setdefault("content-type", "application/xml")
        if self.token:
            headers["x-amz-security-token"] = self.token
        if not self.key_id:
            return headers  # anonymous
        names = sorted(headers)
        canonical_headers = "".join(f"{n}:{' '.join(headers[n].split())}\n" for n in names)
        signed_headers = ";".join(names)
        canonical = "\n".join(
            [method, path, canonical_query, canonical_headers, signed_headers, payload_hash]
        )
        scope = f"{day}/{self.region}/s3/aws4_request"
        to_sign = "\n".join(
            ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
        )
        key = _hmac(f"AWS4{self.secret or ''}".encode(), day)
        for part in (self.region, "s3", "aws4_request"):
            key = _hmac(key, part)
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={self.key_id}/{scope}, SignedHeaders={signed_headers}, "
            f"Signature={signature}"
        )
        return headers


def _error(status: int, root: ET.Element, what: str) -> S3RestError:
    code = _find(root, "Code") or "Error"
    message = _find(root, "Message") or ""
    transient = code in _TRANSIENT_CODES or status in TRANSIENT_STATUS
    return S3RestError(f"S3 {what}: HTTP {status} {code}: {message}".rstrip(": "), transient, code, status)


def _conflict(exc: S3RestError, key: str, reason: ConflictReason) -> Conflict:
    """A failed precondition as a result: 412 (the condition), 409 ConditionalRequestConflict (another
    conditional write to the key is in flight), 404 (no object to match); any other error raises."""
    if exc.status == 412 or exc.code == "ConditionalRequestConflict":
        return Conflict(key, reason)
    if exc.status == 404 and exc.code in ("NoSuchKey", None):
        return Conflict(key, "missing")
    raise exc


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _xml_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _parse(data: bytes) -> ET.Element | None:
    if not data.strip():
        return None
    try:
        return ET.fromstring(data)
    except ET.ParseError:
        return None
