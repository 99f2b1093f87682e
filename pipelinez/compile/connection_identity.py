"""What of a rendered connection is part of a node's identity: where the data is, never how pz signs in.

A node's id says what the node reads or writes (reference section 7). For a connection that is the data's
address: host, port, database, path, root, bucket, endpoint, container, account, base URL, and session
settings that change what a query returns (postgres/mysql `options`). Not part of it: how pz authenticates
(password, user, token, keys, headers) and transport knobs that reach the same data (TLS mode, timeout,
region, URL style). So rotating a password, a token or a user changes no id, and `pz retry` still finishes
the run; pointing a connection at another server, port, database, folder or bucket changes the ids of the
nodes that use it (they are no longer what the run ran), and the retry says so.

Each connector's manifest marks the keys of its `connection_schema` that are not identity:
`"x-pz-id": "exclude"` leaves the key out; `"x-pz-id": "strip-credentials"` keeps a connection string
(postgres/mysql `dsn`, azureblob `connection_string`) without the credentials and transport settings in it.
An unmarked key is identity (a third-party connector that marks nothing keeps every key: safe, only less
forgiving). The identity is hashed as a digest, never stored in the clear (it may still hold a secret).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pipelinez.connectors import registry
from pipelinez.core.diagnostics import ConnectorHostError
from pipelinez.core.json_types import JsonObject

ID_KEYWORD = "x-pz-id"
EXCLUDE, STRIP = "exclude", "strip-credentials"

# keys inside a connection string that sign in or choose a transport, never which data (lower case)
CREDENTIAL_KEYS = frozenset(
    {
        # libpq / PostgreSQL URIs
        "user",
        "password",
        "passfile",
        "sslmode",
        "sslcert",
        "sslkey",
        "sslrootcert",
        "sslpassword",
        "sslcrl",
        "connect_timeout",
        "gssencmode",
        "channel_binding",
        # MySQL URIs
        "ssl",
        "ssl-mode",
        "ssl_mode",
        "ssl-ca",
        "ssl_ca",
        # Azure storage connection strings
        "accountkey",
        "sharedaccesssignature",
        "defaultendpointsprotocol",
    }
)

_URI = re.compile(r"^[A-Za-z][\w+.-]*://")
_LIBPQ_PAIR = re.compile(r"(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S*)")


def connection_identity(connector: str, connection: JsonObject) -> JsonObject:
    """The part of `connection` that says where the data is (see the module docstring)."""
    try:
        properties = registry.manifest_of(connector).connection_schema.get("properties") or {}
    except ConnectorHostError:  # tier 3 reported it; without the manifest, every key is identity
        properties = {}
    identity: JsonObject = {}
    for key, value in connection.items():
        spec = properties.get(key)
        how = spec.get(ID_KEYWORD) if isinstance(spec, dict) else None
        if how == EXCLUDE:
            continue
        identity[key] = strip_credentials(value) if how == STRIP and isinstance(value, str) else value
    return identity


def strip_credentials(text: str) -> str:
    """A connection string without its credentials and transport settings: a URI loses its user info and
    such query parameters; `key=value` pairs (libpq's, separated by spaces; Azure's, by `;`) lose such
    keys. What is left is the data's address, in a canonical order."""
    if _URI.match(text):
        parts = urlsplit(text)
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        query = sorted((k, v) for k, v in parse_qsl(parts.query) if k.lower() not in CREDENTIAL_KEYS)
        return urlunsplit((parts.scheme, host, parts.path, urlencode(query), ""))
    if ";" in text:
        pairs = [p.partition("=") for p in text.split(";") if p.strip()]
        kept = sorted((k.strip(), v.strip()) for k, _, v in pairs if k.strip().lower() not in CREDENTIAL_KEYS)
        return ";".join(f"{k}={v}" for k, v in kept)
    found = _LIBPQ_PAIR.findall(text)
    if not found:
        return text
    return " ".join(sorted(f"{k}={v}" for k, v in found if k.lower() not in CREDENTIAL_KEYS))
