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


# a dataclass instance's canonical form by its id(), for one pass over nodes that share instances (the
# endpoint of every write to one sink): (the instance, kept alive so its id is not reused, its form)
Memo = dict[int, tuple[Any, Any]]


def canonical(value: Any, memo: Memo | None = None) -> Any:
    """`value` as plain JSON data: dataclasses as objects of their hashed fields, enums as their values,
    tuples as lists; anything else JSON cannot hold as its `str`. `memo`: forms of frozen dataclass
    instances already seen (the caller never changes a form it is given)."""
    kind = type(value)
    if kind in _PLAIN or value is None:
        return value
    if kind is tuple or kind is list:  # before the ABC checks below, which cost more than the items
        return [v if type(v) in _PLAIN else canonical(v) for v in value]
    fields = _HASHED_FIELDS.get(kind)
    if fields is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = _HASHED_FIELDS[kind] = tuple(
            (f.name, f.metadata.get("id"))
            for f in dataclasses.fields(value)
            if f.metadata.get("id") != "exclude"
        )
    if fields is not None:
        if memo is not None and (seen := memo.get(id(value))) is not None and seen[0] is value:
            return seen[1]
        out: JsonObject = {}
        for name, how in fields:
            item = canonical(getattr(value, name), memo)
            out[name] = digest(item) if how == "digest" else item
        if memo is not None and _frozen(kind):
            memo[id(value)] = (value, out)
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


# one encoder for every id (json.dumps with arguments would build one per call)
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _dumps(data: Any) -> str:
    return _ENCODER.encode(data)


def digest(data: Any) -> str:
    return "sha256:" + hashlib.sha256(_dumps(data).encode("utf-8")).hexdigest()


def _frozen(kind: type) -> bool:
    known = _FROZEN.get(kind)
    if known is None:
        params = getattr(kind, "__dataclass_params__", None)
        known = _FROZEN[kind] = bool(params is not None and params.frozen)
    return known


_FROZEN: dict[type, bool] = {}  # a dataclass type: whether it is frozen (only those are memoized)


def canonical_text(node: Any, input_ids: Sequence[str], memo: Memo | None = None) -> str:
    """The one serialization a node's id is the hash of."""
    return _dumps({"node": canonical(node, memo), "inputs": sorted(input_ids)})


def content_id(node: Any, input_ids: Sequence[str], memo: Memo | None = None) -> str:
    """The node's id; `memo` shared by the ids of one graph (the same text, found once per instance)."""
    return hashlib.sha256(canonical_text(node, input_ids, memo).encode("utf-8")).hexdigest()[:ID_LENGTH]


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
