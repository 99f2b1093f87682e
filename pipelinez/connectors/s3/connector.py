"""The `s3` connector: CSV, Parquet and JSON objects in one bucket of any S3-compatible store, read and
written natively by DuckDB's httpfs extension (see `files.objconnector` and `files.objects`).

Connection: `bucket`; `endpoint` (`host:port` or `http(s)://host:port`; default AWS), `region` (default
us-east-1), `url_style` (`path` or `vhost`; default `path` with an endpoint, else `vhost`), `use_ssl`
(default: from the endpoint's scheme, else true); `access_key_id` + `secret_access_key` (+ `session_token`),
the secret ones from secret env vars; without keys the bucket is read anonymously.

Promoting a finished object (replace, append) is a server-side copy. CopyObject is capped at 5 GiB by AWS,
so a larger object is copied as a multipart upload of ranged part copies (UploadPartCopy) that S3
assembles into the destination only when the last part is in: the destination still changes in one step.
A copy that fails aborts its upload, and every write starts by aborting the incomplete uploads under its
temp prefixes and its output prefix (a killed write's leftovers). Those calls go through `rest.S3Rest`.
`PZ_S3_COPY_PART_BYTES` (a test seam) lowers the single-copy limit and the part size, so the multipart path
runs in tests on small objects.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.files.objconnector import ObjectStoreConnector
from pipelinez.connectors.files.objects import ObjectStore
from pipelinez.connectors.s3.place import S3Place
from pipelinez.connectors.s3.rest import S3Rest
from pipelinez.connectors.sdk import ConnectorIssue
from pipelinez.core import failpoints
from pipelinez.core.sqlnames import quote_literal

if TYPE_CHECKING:
    import pyarrow.fs as pafs

SINGLE_COPY_MAX = 5 * 1024**3  # CopyObject's cap (AWS); larger objects are copied in parts
MIN_PART = 512 * 1024**2  # part size of a multipart copy (S3 allows 5 MiB .. 5 GiB, at most 10,000 parts)
MAX_PARTS = 10_000
PART_ENV = "PZ_S3_COPY_PART_BYTES"


def copy_limits() -> tuple[int, int]:
    """(the largest object copied in one CopyObject, the smallest part of a multipart copy)."""
    seam = os.environ.get(PART_ENV)
    if seam and seam.isdigit() and int(seam) > 0:
        return int(seam), int(seam)
    return SINGLE_COPY_MAX, MIN_PART


def part_ranges(size: int, part: int) -> list[tuple[int, int]]:
    """Inclusive byte ranges of a multipart copy of `size` bytes: parts of at least `part` bytes, at most
    MAX_PARTS of them."""
    step = max(part, -(-size // MAX_PARTS))
    return [(start, min(start + step, size) - 1) for start in range(0, size, step)]


class S3Store(ObjectStore):
    scheme = "s3"
    extension = ("duckdb_extension_httpfs", "httpfs")
    settings = ("SET http_retries = 0",)

    def __init__(self, connection: dict[str, Any]):
        super().__init__(str(connection["bucket"]).strip("/"))
        self.place = S3Place.of(connection)
        self.endpoint, self.use_ssl, self.region = self.place.endpoint, self.place.use_ssl, self.place.region
        self.url_style, self.key_id = self.place.url_style, self.place.key_id
        self.secret, self.token = self.place.secret, self.place.token

    def identity(self) -> tuple[str, ...]:
        return (self.endpoint or "aws", self.region)

    def where(self) -> str:
        return self.place.where()

    def secret_options(self) -> str:
        opts = [
            "TYPE s3",
            "PROVIDER config",
            f"REGION {quote_literal(self.region)}",
            f"URL_STYLE {quote_literal(self.url_style)}",
            f"USE_SSL {'true' if self.use_ssl else 'false'}",
        ]
        if self.endpoint:
            opts.append(f"ENDPOINT {quote_literal(self.endpoint)}")
        if self.key_id:
            opts.append(f"KEY_ID {quote_literal(str(self.key_id))}")
            opts.append(f"SECRET {quote_literal(str(self.secret or ''))}")
        if self.token:
            opts.append(f"SESSION_TOKEN {quote_literal(str(self.token))}")
        return ", ".join(opts)

    def conditional(self) -> S3Rest:
        return self.rest()

    def rest(self) -> S3Rest:
        return self.place.rest(self.root)

    def copy(self, source: str, dest: str) -> None:
        single, part = copy_limits()
        size = self.fs.get_file_info(self._fs_path(source)).size or 0
        if size <= single:
            super().copy(source, dest)
            return
        rest = self.rest()
        upload = rest.create_upload(dest)
        try:
            etags = []
            for number, (first, last) in enumerate(part_ranges(size, part), start=1):
                etags.append(rest.copy_part(dest, upload, number, source, first, last))
                failpoints.hit("s3.part_copied")
            rest.complete(dest, upload, etags)
        except BaseException:
            with contextlib.suppress(OSError):
                rest.abort(dest, upload)
            raise

    def abort_uploads(self, prefix: str) -> None:
        rest = self.rest()
        for upload in rest.uploads(prefix):
            rest.abort(upload.key, upload.upload_id)

    def make_filesystem(self) -> pafs.FileSystem:
        import pyarrow.fs as pafs

        kwargs: dict[str, Any] = {
            "region": self.region,
            "scheme": "https" if self.use_ssl else "http",
            "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=0),
            "connect_timeout": 10,
            "request_timeout": 60,
        }
        if self.endpoint:
            kwargs["endpoint_override"] = self.endpoint
            kwargs["force_virtual_addressing"] = self.url_style == "vhost"
        if self.key_id:
            kwargs.update(access_key=str(self.key_id), secret_key=str(self.secret or ""))
            if self.token:
                kwargs["session_token"] = str(self.token)
        else:
            kwargs["anonymous"] = True
        return pafs.S3FileSystem(**kwargs)


class S3Connector(ObjectStoreConnector):
    secret_keys = ("secret_access_key", "session_token")

    @classmethod
    def make_store(cls, connection: dict[str, Any]) -> ObjectStore:
        return S3Store(connection)

    @classmethod
    def connection_issues(cls, connection: dict[str, Any]) -> list[ConnectorIssue]:
        issues: list[ConnectorIssue] = []
        has_id, has_secret = "access_key_id" in connection, "secret_access_key" in connection
        if has_id != has_secret:
            missing = "secret_access_key" if has_id else "access_key_id"
            issues.append(
                ConnectorIssue(
                    f"access_key_id and secret_access_key go together: add {missing}, or remove both to "
                    "read the bucket anonymously",
                    (missing,),
                )
            )
        if "session_token" in connection and not has_id:
            issues.append(
                ConnectorIssue("session_token needs access_key_id and secret_access_key", ("session_token",))
            )
        endpoint = connection.get("endpoint")
        if isinstance(endpoint, str) and "://" in endpoint and "{{" not in endpoint:
            scheme = endpoint.split("://", 1)[0].lower()
            if scheme not in ("http", "https"):
                issues.append(
                    ConnectorIssue(f"endpoint scheme '{scheme}' is not http or https", ("endpoint",))
                )
            elif "use_ssl" in connection and bool(connection["use_ssl"]) != (scheme == "https"):
                issues.append(
                    ConnectorIssue(f"use_ssl contradicts the endpoint's scheme {scheme}", ("use_ssl",))
                )
        return issues
