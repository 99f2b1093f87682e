"""The Azure Blob state backend (`state: {backend: azureblob, url: az://container/prefix, connection:
{...}}`): the shared object-store backend (`files.objstate`) over the Blob service's signed REST calls.
`connection` holds the azureblob connector's connection keys without `container` (the url's):
connection_string, or account_name + account_key (+ endpoint)."""

from __future__ import annotations

from typing import Any

from pipelinez.connectors.azureblob.account import Account
from pipelinez.connectors.files.objstate import ObjectStateBackend, StateObjects


class AzureBlobStateBackend(ObjectStateBackend):
    account: Account
    name = "azureblob"
    scheme = "az"
    root_kind = "container"

    def make_objects(self, root: str, connection: dict[str, Any]) -> StateObjects:
        self.account = Account.of(connection)
        return self.account.rest(root)

    def where(self) -> str:
        return self.account.where()
