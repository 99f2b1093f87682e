"""Network failures of the object stores' own DuckDB reads and writes: the connector-reported transient path.

The engine's closed list (`pipelinez.core.transient`) stays as "Validation and errors" gives it. A DuckDB
statement the s3 or azureblob connector runs itself (the data read, CSV type detection, a parquet schema read,
a write) reaches a server through httpfs' or the azure extension's HTTP client; the connector knows these
words are a dropped, refused or unanswered connection of *its* request, so it reports them as transient
(`PzConnectorError(is_transient=True)`) -- as the postgres connector does with libpq's words.

Matched on `core.transient.summarize(message)` (before any LINE context, quoted names and URLs removed),
case-insensitively, whole words, besides the closed list itself (`NETWORK_PHRASES`):

- httpfs (curl / httplib): ``Could not connect to server``, ``Couldn't connect to server``, ``Failure when
  receiving data from the peer``, ``Failed sending data to the peer``, ``Failure when sending data``,
  ``Server returned nothing``, ``Connection closed``, ``Connection was reset``, ``Broken pipe``.
- azure extension: ``Error while reading from network socket``, ``Fail to get a new connection``.
- an HTTP status 500, 502, 503, 504, 408 or 429 of the store's reply in the shapes the closed list does not
  take: the status followed by its reason phrase (``503 (Service Unavailable)``, ``503 Service
  Unavailable``), or after ``status code`` / ``status`` / ``code`` (``Status Code: 503``).

The azure extension wraps the Azure SDK's own message in quotes (``AzureStorageFileSystem could not open
file: '<url>', unknown error occurred, ... Original error message: '<the SDK's message>'``): the quoted text
after ``Original error message:`` is the SDK's words, not a name, and is matched the same way. The listing
and promotion (pyarrow's file systems) report the same words outside quotes (`objects.io_error`).

Nothing else: a missing object (404), a refused credential (403), a bad file are terminal.
"""

from __future__ import annotations

import re

from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.transient import HTTP_STATUS_CODES, is_transient_native, summarize

NETWORK_PHRASES: tuple[str, ...] = (
    "could not connect to server",
    "couldn't connect to server",
    "failure when receiving data from the peer",
    "failed sending data to the peer",
    "failure when sending data",
    "server returned nothing",
    "connection closed",
    "connection was reset",
    "broken pipe",
    "error while reading from network socket",
    "fail to get a new connection",
)
_REASONS = (
    "internal server error",
    "bad gateway",
    "service unavailable",
    "gateway timeout",
    "request timeout",
    "too many requests",
)
_EDGE_BEFORE = r"(?<![A-Za-z0-9_])"
_EDGE_AFTER = r"(?![A-Za-z0-9_])"
_CODES = "(?:" + "|".join(str(code) for code in HTTP_STATUS_CODES) + ")"
_NETWORK = re.compile(
    _EDGE_BEFORE
    + "(?:"
    + "|".join(r"\s+".join(re.escape(w) for w in phrase.split()) for phrase in NETWORK_PHRASES)
    + ")"
    + _EDGE_AFTER,
    re.IGNORECASE,
)
_STATUS = re.compile(
    _EDGE_BEFORE
    + _CODES
    + r"[ \t]*\(?[ \t]*(?:"
    + "|".join(r"\s+".join(reason.split()) for reason in _REASONS)
    + ")"
    + _EDGE_AFTER
    + "|"
    + _EDGE_BEFORE
    + r"(?:status[ \t]+code|status|code)[ \t]*[:=#]?[ \t]*"
    + _CODES
    + _EDGE_AFTER,
    re.IGNORECASE,
)


_AZURE_ORIGINAL = re.compile(r"Original error message:\s*'([^']*)'", re.IGNORECASE)


def is_network_failure(message: str) -> bool:
    """True when a DuckDB error of an object store's own statement is a network failure or a transient HTTP
    status of the store (see the module docstring); the closed list counts too."""
    if is_transient_native(message):
        return True
    texts = [summarize(message), *(m.group(1) for m in _AZURE_ORIGINAL.finditer(message))]
    return any(_NETWORK.search(text) or _STATUS.search(text) for text in texts)


def as_transient(err: PzConnectorError, cause: BaseException) -> PzConnectorError:
    """`err` (made from `cause`, a DuckDB error of the store's own statement), transient when `cause` is a
    network failure."""
    if not err.is_transient and is_network_failure(str(cause)):
        err.is_transient = True
    return err
