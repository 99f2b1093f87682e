"""Where an s3 connection block points and how it signs in (`bucket` aside): read once here for the
connector's store and for the S3 state backend, which signs its own requests (`rest`) and so never imports
the connector's DuckDB and pyarrow side."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pipelinez.connectors.s3.rest import S3Rest

DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class S3Place:
    endpoint: str | None  # host:port of an S3-compatible server; None: AWS
    use_ssl: bool
    region: str
    url_style: str  # path | vhost
    key_id: str | None
    secret: str | None
    token: str | None

    @staticmethod
    def of(connection: dict[str, Any]) -> S3Place:
        """`endpoint` (`host:port` or `http(s)://host:port`), `region`, `url_style` (default `path` with an
        endpoint, else `vhost`), `use_ssl` (default: the endpoint's scheme, else true) and the keys."""
        endpoint = connection.get("endpoint")
        use_ssl = connection.get("use_ssl")
        host = None
        if endpoint:
            text = str(endpoint)
            parts = urlsplit(text if "://" in text else f"//{text}")
            # user info in an endpoint signs nothing (S3 requests are signed with the keys) and could hold a
            # credential that messages would print: only host:port is kept
            host = (parts.netloc or text).rsplit("@", 1)[-1]
            if parts.scheme and use_ssl is None:
                use_ssl = parts.scheme == "https"
        return S3Place(
            host,
            True if use_ssl is None else bool(use_ssl),
            str(connection.get("region") or DEFAULT_REGION),
            str(connection.get("url_style") or ("path" if host else "vhost")),
            _text(connection.get("access_key_id")),
            _text(connection.get("secret_access_key")),
            _text(connection.get("session_token")),
        )

    def where(self) -> str:
        place = f"endpoint {self.endpoint}" if self.endpoint else "AWS S3"
        return f"{place} (region {self.region})"

    def rest(self, bucket: str) -> S3Rest:
        return S3Rest(
            bucket,
            self.region,
            self.endpoint,
            self.use_ssl,
            self.url_style,
            self.key_id,
            self.secret,
            self.token,
        )


def _text(value: Any) -> str | None:
    return str(value) if value else None
