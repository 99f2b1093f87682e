"""Conditional object writes: the primitives a shared state backend builds on (a lease, an atomic document).

A store that offers them answers three calls on keys of its bucket or container, each one request:
`read` (the bytes with their ETag), `put` with a precondition (`If-None-Match: *`: only when the key is
absent; `If-Match: <etag>`: only when the object is still the one read) and `delete_if_match`. A failed
precondition is a result, `Conflict`, never an exception: another writer got there first, and the caller
decides (re-read, give up). Anything else that fails raises the store's `ObjectStoreError`, with
`transient` classified as the connector's other calls are (a call that got no answer may or may not have
taken effect: a caller re-reads before it concludes anything).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

ConflictReason = Literal["exists", "changed", "missing"]


@dataclass(frozen=True)
class Versioned:
    """An object's bytes and the ETag they were read with."""

    data: bytes
    etag: str


@dataclass(frozen=True)
class Written:
    """A conditional write took effect: the object's new ETag (none for a delete)."""

    etag: str = ""


@dataclass(frozen=True)
class Conflict:
    """A precondition failed: `exists` (put-if-absent found an object), `changed` (the ETag is no longer
    the object's) or `missing` (put/delete-if-match found no object)."""

    key: str
    reason: ConflictReason


class ConditionalObjects(Protocol):
    """The conditional calls of one bucket or container (keys are relative to it)."""

    def name(self, key: str) -> str:
        """How messages name the object `key` (a URI, never a secret)."""
        ...

    def read(self, key: str) -> Versioned | None:
        """The object with its ETag; None when there is none."""
        ...

    def put_if_absent(self, key: str, data: bytes) -> Written | Conflict:
        """Create `key` only if no object has that key (`If-None-Match: *`)."""
        ...

    def put_if_match(self, key: str, data: bytes, etag: str) -> Written | Conflict:
        """Replace `key` only if its ETag is still `etag` (`If-Match`)."""
        ...

    def delete_if_match(self, key: str, etag: str) -> Written | Conflict:
        """Delete `key` only if its ETag is still `etag`."""
        ...
