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

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pipelinez.connectors.azureblob.account import DEFAULT_SUFFIX, Account
from pipelinez.connectors.azureblob.copying import copy_blob
from pipelinez.connectors.azureblob.rest import BlobRest
from pipelinez.connectors.files.objconnector import ObjectStoreConnector
from pipelinez.connectors.files.objects import ObjectStore
from pipelinez.connectors.sdk import ConnectorIssue
from pipelinez.core.sqlnames import quote_literal

if TYPE_CHECKING:
    import pyarrow.fs as pafs


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
        return self.account.where()

    def secret_options(self) -> str:
        return f"TYPE azure, CONNECTION_STRING {quote_literal(self.account.connection_string())}"

    def conditional(self) -> BlobRest:
        return self.rest()

    def rest(self) -> BlobRest:
        return self.account.rest(self.root)

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
