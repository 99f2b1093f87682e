"""The `azureblob` connector: CSV, Parquet and JSON blobs in one Azure Blob Storage container, read and
written natively by DuckDB's azure extension (see `files.objconnector` and `files.objects`).

Connection: `container`; and either `connection_string` (from a secret env var) or `account_name` +
`account_key` (the key from a secret env var), optionally `endpoint` (the blob service URL, e.g. Azurite's
`http://127.0.0.1:10000/devstoreaccount1`; default `https://<account>.blob.core.windows.net`).
DuckDB's azure extension 1.5.5 writes blobs too (`COPY … TO 'az://…'`), so the connector is a sink as well.
A finished blob is promoted (replace, append) with Azure's asynchronous Copy Blob, signed by pz itself
(`rest`, `copying`): pyarrow's copy is the synchronous Copy Blob From URL, capped at 256 MiB per blob.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pipelinez.connectors.azureblob.copying import copy_blob
from pipelinez.connectors.azureblob.rest import BlobRest
from pipelinez.connectors.files.objconnector import ObjectStoreConnector
from pipelinez.connectors.files.objects import ObjectStore
from pipelinez.connectors.sdk import ConnectorIssue
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_literal

if TYPE_CHECKING:
    import pyarrow.fs as pafs

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


class AzureStore(ObjectStore):
    scheme = "az"
    kind = "container"
    extension = ("duckdb_extension_azure", "azure")

    def __init__(self, connection: dict[str, Any]):
        super().__init__(str(connection["container"]).strip("/"))
        self.account = Account.of(connection)

    def identity(self) -> tuple[str, ...]:
        return (self.account.blob_url,)

    def where(self) -> str:
        return f"blob service {self.account.blob_url}"

    def secret_options(self) -> str:
        return f"TYPE azure, CONNECTION_STRING {quote_literal(self.account.connection_string())}"

    def conditional(self) -> BlobRest:
        return self.rest()

    def rest(self) -> BlobRest:
        return BlobRest(
            self.account.name, self.account.key, self.account.sas, self.account.blob_url, self.root
        )

    def copy(self, source: str, dest: str) -> None:
        """Azure's asynchronous Copy Blob (no size cap within the account), followed to its end; a copy that
        does not succeed leaves `dest` as it was (`copying`)."""
        copy_blob(self.rest(), source, dest, self.uri)

    def delete(self, key: str) -> None:
        """Delete Blob with its snapshots: Azure refuses to delete a blob that has any, and a write killed
        while a copy was pending leaves the snapshot taken before it (`copying`)."""
        self.rest().delete(key)

    def make_filesystem(self) -> pafs.FileSystem:
        import pyarrow.fs as pafs

        url = urlsplit(self.account.blob_url)
        scheme = url.scheme or "https"
        kwargs: dict[str, Any] = {"account_name": self.account.name}
        if self.account.key:
            kwargs["account_key"] = self.account.key
        elif self.account.sas:
            kwargs["sas_token"] = "?" + self.account.sas.lstrip("?")  # without '?' Arrow puts it in the path
        if url.netloc != f"{self.account.name}.blob.{DEFAULT_SUFFIX}":
            kwargs.update(
                blob_storage_authority=url.netloc,
                dfs_storage_authority=url.netloc,
                blob_storage_scheme=scheme,
                dfs_storage_scheme=scheme,
            )
        return pafs.AzureFileSystem(**kwargs)


class AzureBlobConnector(ObjectStoreConnector):
    secret_keys = ("connection_string", "account_key")

    @classmethod
    def make_store(cls, connection: dict[str, Any]) -> ObjectStore:
        return AzureStore(connection)

    @classmethod
    def connection_issues(cls, connection: dict[str, Any]) -> list[ConnectorIssue]:
        has_string, has_name = "connection_string" in connection, "account_name" in connection
        if has_string and (has_name or "account_key" in connection or "endpoint" in connection):
            extra = next(k for k in ("account_name", "account_key", "endpoint") if k in connection)
            return [
                ConnectorIssue(
                    f"use either connection_string or account_name + account_key (+ endpoint), not both; "
                    f"remove {extra} or connection_string",
                    (extra,),
                )
            ]
        if not has_string and not has_name:
            return [ConnectorIssue("set connection_string, or account_name and account_key", ())]
        if has_name and "account_key" not in connection:
            return [ConnectorIssue("account_name needs account_key", ("account_key",))]
        return []
