"""The JSON Schemas of project files, as shipped package data (`pipelinez/config/schemas/*.schema.json`)."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path

from pipelinez.config.schema_defs import KINDS
from pipelinez.core.diagnostics import PzConfigError
from pipelinez.core.json_types import JsonObject
from pipelinez.core.oserrors import os_error

_SCHEMA_NEXT = "pass --out a folder you can write (it is created if missing)"

__all__ = ["KINDS", "load_schema", "schema_file_name", "schema_text", "write_schemas"]


def schema_file_name(kind: str) -> str:
    return f"{kind}.schema.json"


def schema_text(kind: str) -> str:
    """The JSON Schema of `kind` as the shipped text."""
    if kind not in KINDS:
        raise ValueError(f"unknown schema kind {kind!r}; kinds: {', '.join(KINDS)}")
    return (resources.files("pipelinez.config") / "schemas" / schema_file_name(kind)).read_text("utf-8")


@cache
def _load(kind: str) -> JsonObject:
    loaded: JsonObject = json.loads(schema_text(kind))
    return loaded


def load_schema(kind: str) -> JsonObject:
    """The JSON Schema of `kind` (project, source, sink, sidecar). Callers get their own copy."""
    copied: JsonObject = json.loads(json.dumps(_load(kind)))
    return copied


def write_schemas(out_dir: Path) -> list[Path]:
    """Write every schema into `out_dir` (created if missing); returns the files written, in KINDS order."""
    written: list[Path] = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for kind in KINDS:
            target = out_dir / schema_file_name(kind)
            target.write_text(schema_text(kind), encoding="utf-8")
            written.append(target)
    except OSError as exc:
        raise PzConfigError([os_error(exc, "pz schema cannot write here", next_step=_SCHEMA_NEXT)]) from None
    return written
