"""The SDK's object-store interface, for whoever keeps files in a bucket without being a connector (the Ray
executor's `--staging s3://…`): the store a connector builds from its connection block (`ObjectStore`:
objects, put/get, DuckDB secrets scoped to a prefix), the connector's own rules for that block, and how a
store's I/O error reads. The connector is found by name through the registry, never imported: the engine
and compile layers use object stores only through here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipelinez.connectors import registry
from pipelinez.connectors.files.objects import ObjectStore, io_error
from pipelinez.connectors.sdk import ConnectorIssue
from pipelinez.core.diagnostics import ConnectorHostError, error

if TYPE_CHECKING:
    from pipelinez.connectors.files.objconnector import ObjectStoreConnector

__all__ = ["ObjectStore", "io_error", "store_connection_issues", "store_of"]


def _store_connector(name: str) -> type[ObjectStoreConnector]:
    from pipelinez.connectors.files.objconnector import ObjectStoreConnector  # only for an object store

    cls = registry.load_class(name)
    if not issubclass(cls, ObjectStoreConnector):
        raise ConnectorHostError([error("PZ0701", f"connector '{name}' is not an object-store connector")])
    return cls


def store_of(connector: str, connection: dict[str, Any]) -> ObjectStore:
    """The store connector `connector` builds from `connection` (its connection block's keys)."""
    return _store_connector(connector).make_store(connection)


def store_connection_issues(connector: str, connection: dict[str, Any]) -> list[ConnectorIssue]:
    """What connector `connector`'s own rules say of a connection block (keys that go together, a secret
    written literally, an endpoint's scheme)."""
    return _store_connector(connector).validate(connection, {}, {})
