"""Which Azure storage account an azureblob connection block signs in to (`container` aside): read once here
for the connector's store and for the Azure Blob state backend, which signs its own requests (`rest`) and so
never imports the connector's DuckDB and pyarrow side."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pipelinez.connectors.azureblob.rest import BlobRest
from pipelinez.core.diagnostics import PzConnectorError

DEFAULT_SUFFIX = "core.windows.net"


@dataclass(frozen=True)
class Account:
    name: str
    key: str | None
    sas: str | None
    blob_url: str  # scheme://host[:port][/path] of the blob service

    @staticmethod
    def of(connection: dict[str, Any]) -> Account:
        text = connection.get("connection_string")
        if text:
            fields: dict[str, str] = {}
            for part in str(text).split(";"):
                if "=" in part:
                    k, v = part.split("=", 1)
                    fields[k.strip().lower()] = v.strip()
            name = fields.get("accountname", "")
            proto = fields.get("defaultendpointsprotocol", "https")
            suffix = fields.get("endpointsuffix", DEFAULT_SUFFIX)
            blob = fields.get("blobendpoint") or (f"{proto}://{name}.blob.{suffix}" if name else "")
            if not blob:
                raise PzConnectorError(
                    "connection_string names neither AccountName nor BlobEndpoint", code="PZ0304"
                )
            if not name:
                name = urlsplit(blob).netloc.split(".", 1)[0]
            return Account(
                name, fields.get("accountkey"), fields.get("sharedaccesssignature"), blob.rstrip("/")
            )
        name = str(connection.get("account_name") or "")
        endpoint = connection.get("endpoint")
        blob = str(endpoint).rstrip("/") if endpoint else f"https://{name}.blob.{DEFAULT_SUFFIX}"
        key = connection.get("account_key")
        return Account(name, str(key) if key else None, None, blob)

    def connection_string(self) -> str:
        parts = [f"DefaultEndpointsProtocol={urlsplit(self.blob_url).scheme or 'https'}"]
        parts.append(f"AccountName={self.name}")
        if self.key:
            parts.append(f"AccountKey={self.key}")
        if self.sas:
            parts.append(f"SharedAccessSignature={self.sas}")
        parts.append(f"BlobEndpoint={self.blob_url}")
        return ";".join(parts) + ";"

    def where(self) -> str:
        return f"blob service {self.blob_url}"

    def rest(self, container: str) -> BlobRest:
        return BlobRest(self.name, self.key, self.sas, self.blob_url, container)
