"""An atomic JSON document in an object store (a shared state backend's committed watermarks), over any
store's conditional calls (`files.conditional`).

An update is one conditional object write: read the document with its ETag, apply the change to what was
read, write it back with `If-Match` on that ETag (`If-None-Match: *` when there was none). A reader sees the
old document or the new one, never a mix; two writers never both win on the same version. The writer that
lost re-reads and applies its change again, up to `attempts` times, then fails with PZ0592 having written
nothing. A call that got no answer raises the store's `ObjectStoreError` (transient): the write may or may
not have landed, and the document is whole either way.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from pipelinez.connectors.files.conditional import ConditionalObjects, Written
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.json_types import JsonObject

__all__ = ["JsonDocument"]

Change = Callable[[JsonObject | None], JsonObject]


class JsonDocument:
    """The JSON object `key` of `objects`."""

    def __init__(self, objects: ConditionalObjects, key: str, attempts: int = 5):
        self.objects, self.key, self.attempts = objects, key, attempts
        self.name = objects.name(key)

    def read(self) -> JsonObject | None:
        """The document, None when there is none; PZ0594 when the object is not a JSON object."""
        current = self.objects.read(self.key)
        return self._decode(current.data) if current is not None else None

    def update(self, change: Change, guard: Callable[[], None] | None = None) -> JsonObject:
        """Write `change(document)` (None when there is none yet) in one conditional write; on a lost race
        apply `change` again to the document that won. The document written; PZ0592 after `attempts`.
        `guard` runs before each attempt and raises to stop it (`ObjectLease.check`: the lease that
        guards this state is still held)."""
        for _ in range(self.attempts):
            if guard is not None:
                guard()
            current = self.objects.read(self.key)
            before = self._decode(current.data) if current is not None else None
            after = change(before)
            data = json.dumps(after, sort_keys=True, separators=(",", ":")).encode()
            if current is None:
                result = self.objects.put_if_absent(self.key, data)
            else:
                result = self.objects.put_if_match(self.key, data, current.etag)
            if isinstance(result, Written):
                return after
        raise PzConnectorError(
            f"the state document {self.name} changed under each of {self.attempts} attempts to update it "
            "(another writer kept replacing it); nothing was written: make sure one run at a time writes "
            "this state, then run again",
            code="PZ0592",
        )

    def _decode(self, data: bytes) -> JsonObject:
        try:
            doc = json.loads(data)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            raise PzConnectorError(
                f"{self.name} is not a JSON object as pz writes its state documents: look at it; if no run "
                "is live, delete it",
                code="PZ0594",
            )
        return doc
