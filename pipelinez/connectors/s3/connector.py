"""The `s3` connector: CSV, Parquet and JSON objects in one bucket of any S3-compatible store, read and
written natively by DuckDB's httpfs extension (see `files.objconnector` and `files.objects`).

Connection: `bucket`; `endpoint` (`host:port` or `http(s)://host:port`; default AWS), `region` (default
us-east-1), `url_style` (`path` or `vhost`; default `path` with an endpoint, else `vhost`), `use_ssl`
(default: from the endpoint's scheme, else true); `access_key_id` + `secret_access_key` (+ `session_token`),
the secret ones from secret env vars; without keys the bucket is read anonymously.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pipelinez.connectors.files.objconnector import ObjectStoreConnector
from pipelinez.connectors.files.objects import ObjectStore
from pipelinez.connectors.sdk import ConnectorIssue
from pipelinez.core.sqlnames import quote_literal

if TYPE_CHECKING:
    import pyarrow.fs as pafs

DEFAULT_REGION = "us-east-1"


class S3Store(ObjectStore):
    scheme = "s3"
    extension = ("duckdb_extension_httpfs", "httpfs")
    settings = ("SET http_retries = 0",)

    def __init__(self, connection: dict[str, Any]):
        super().__init__(str(connection["bucket"]).strip("/"))
        endpoint = connection.get("endpoint")
        use_ssl = connection.get("use_ssl")
        host = None
        if endpoint:
            text = str(endpoint)
            parts = urlsplit(text if "://" in text else f"//{text}")
            host = parts.netloc or text
            if parts.scheme and use_ssl is None:
                use_ssl = parts.scheme == "https"
        self.endpoint: str | None = host
        self.use_ssl = True if use_ssl is None else bool(use_ssl)
        self.region = str(connection.get("region") or DEFAULT_REGION)
        self.url_style = str(connection.get("url_style") or ("path" if host else "vhost"))
        self.key_id = connection.get("access_key_id")
        self.secret = connection.get("secret_access_key")
        self.token = connection.get("session_token")

    def identity(self) -> tuple[str, ...]:
        return (self.endpoint or "aws", self.region)

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
