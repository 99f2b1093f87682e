"""Content-hash node ids: what the node does, never how an attempt is made (retry, concurrency)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

ID_LENGTH = 16


def content_id(kind: str, payload: dict[str, Any], input_ids: list[str]) -> str:
    canonical = json.dumps(
        {"kind": kind, "payload": payload, "inputs": sorted(input_ids)},
        sort_keys=True,
        default=str,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:ID_LENGTH]
