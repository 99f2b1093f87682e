"""Content-hash node ids: the hash of one canonical serialization of the node itself, so what is hashed is
exactly what runs. Fields marked `{"id": "exclude"}` (retry policy, max_concurrency, where the project lives,
the node's place in the graph) are left out: they say how an attempt is made, not what it does. Fields marked
`{"id": "digest"}` (a connection, which may hold secrets) enter as a SHA-256 digest, never in the clear.
A node's inputs enter as their ids, so an edit upstream changes every id downstream.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import hashlib
import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import PurePath
from typing import Any

from pipelinez.core.json_types import JsonObject

ID_LENGTH = 16


def canonical(value: Any) -> Any:
    """`value` as plain JSON data: dataclasses as objects of their hashed fields, enums as their values,
    tuples as lists; anything else JSON cannot hold as its `str`."""
    kind = type(value)
    if kind in _PLAIN or value is None:
        return value
    fields = _HASHED_FIELDS.get(kind)
    if fields is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = _HASHED_FIELDS[kind] = tuple(
            (f.name, f.metadata.get("id"))
            for f in dataclasses.fields(value)
            if f.metadata.get("id") != "exclude"
        )
    if fields is not None:
        out: JsonObject = {}
        for name, how in fields:
            item = canonical(getattr(value, name))
            out[name] = digest(item) if how == "digest" else item
        return out
    if isinstance(value, enum.Enum):
        return canonical(value.value)
    if isinstance(value, str | bool | int | float) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, Sequence | set | frozenset):
        items = [canonical(v) for v in value]
        return sorted(items, key=_dumps) if isinstance(value, set | frozenset) else items
    if isinstance(value, Decimal | dt.date | dt.time | PurePath):
        return str(value)
    raise TypeError(f"no canonical form for {type(value).__name__}")


_PLAIN = frozenset({str, bool, int, float})  # exactly these types (an enum of str is not one)
_HASHED_FIELDS: dict[type, tuple[tuple[str, Any], ...]] = {}  # a dataclass type's (field, how) to hash


def _dumps(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(data: Any) -> str:
    return "sha256:" + hashlib.sha256(_dumps(data).encode("utf-8")).hexdigest()


def canonical_text(node: Any, input_ids: Sequence[str]) -> str:
    """The one serialization a node's id is the hash of."""
    return _dumps({"node": canonical(node), "inputs": sorted(input_ids)})


def content_id(node: Any, input_ids: Sequence[str]) -> str:
    return hashlib.sha256(canonical_text(node, input_ids).encode("utf-8")).hexdigest()[:ID_LENGTH]


def id_parts(node: Any) -> dict[str, str]:
    """A digest of each part of what a node's id hashes (`work.sql`, `work.endpoint.connection`, …), so a
    retry can say which part of an edited node changed without keeping the parts (secrets stay digests)."""
    parts: dict[str, str] = {}

    def walk(prefix: str, value: Any, depth: int) -> None:
        if isinstance(value, dict) and depth < 3:
            for key, item in value.items():
                walk(f"{prefix}.{key}" if prefix else key, item, depth + 1)
        else:
            parts[prefix] = value if isinstance(value, str) and value.startswith("sha256:") else digest(value)

    walk("", canonical(node), 0)
    return parts
