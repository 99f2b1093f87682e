"""The manifest of a table on shared staging (`_manifest.json`, written last in the table's folder): its
files in row order, rows (per partition for a partitioned load), exact DuckDB column types beside the types
Parquet reads back, and a fingerprint. See `shared_staging` for the layout it describes."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from pipelinez.core.json_types import JsonObject

MANIFEST = "_manifest.json"
MANIFEST_VERSION = 1
# types Parquet would not hold exactly: written as text, cast back on read
_LOSSY = ("HUGEINT", "UHUGEINT", "VARINT", "BIGNUM", "BIT")


@dataclass(frozen=True)
class StagedColumn:
    name: str
    type: str  # the DuckDB type of the staged table
    stored: str  # the type the Parquet file reads back as; a cast restores `type` when they differ


@dataclass(frozen=True)
class ManifestPartition:
    """One partition of a partitioned load, as its staged table's manifest lists it."""

    index: int
    rows: int
    fingerprint: str | None  # of the partition's definition: a retry reuses it only for the same slice

    def to_dict(self) -> JsonObject:
        return {"index": self.index, "rows": self.rows, "fingerprint": self.fingerprint}

    @staticmethod
    def from_dict(data: Any) -> ManifestPartition:
        fingerprint = data.get("fingerprint")
        return ManifestPartition(
            int(data["index"]), int(data["rows"]), None if fingerprint is None else str(fingerprint)
        )


@dataclass(frozen=True)
class TableManifest:
    run_id: str
    table: str
    node: str
    node_id: str
    rows: int
    files: tuple[str, ...]  # file names in the table's folder, in row order
    columns: tuple[StagedColumn, ...]
    partitions: tuple[ManifestPartition, ...] = ()  # a partitioned load's partitions
    fingerprint: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    written_at: str = ""
    union_by_name: bool = False  # files of several partitions whose types differ: unified, then cast

    def to_dict(self) -> JsonObject:
        return {
            "manifest_version": MANIFEST_VERSION,
            "run_id": self.run_id,
            "table": self.table,
            "node": self.node,
            "node_id": self.node_id,
            "rows": self.rows,
            "files": list(self.files),
            "columns": [{"name": c.name, "type": c.type, "stored": c.stored} for c in self.columns],
            "partitions": [p.to_dict() for p in self.partitions],
            "fingerprint": self.fingerprint,
            "versions": dict(self.versions),
            "written_at": self.written_at,
            "union_by_name": self.union_by_name,
        }

    @staticmethod
    def from_dict(data: JsonObject) -> TableManifest:
        if data.get("manifest_version") != MANIFEST_VERSION:
            raise ValueError(f"manifest_version {data.get('manifest_version')!r} is not {MANIFEST_VERSION}")
        return TableManifest(
            str(data["run_id"]),
            str(data["table"]),
            str(data["node"]),
            str(data["node_id"]),
            int(data["rows"]),
            tuple(str(f) for f in data["files"]),
            tuple(StagedColumn(str(c["name"]), str(c["type"]), str(c["stored"])) for c in data["columns"]),
            tuple(ManifestPartition.from_dict(p) for p in data.get("partitions") or ()),
            str(data.get("fingerprint", "")),
            {str(k): str(v) for k, v in (data.get("versions") or {}).items()},
            str(data.get("written_at", "")),
            bool(data.get("union_by_name", False)),
        )


def lossy(duck_type: str) -> bool:
    """Whether Parquet would not hold a column of this DuckDB type exactly (it is staged as text)."""
    words = duck_type.upper().replace("(", " ").replace(")", " ").replace("[", " ").replace(",", " ").split()
    return any(w in _LOSSY for w in words)


def fingerprint(
    node_id: str, rows: int, columns: tuple[StagedColumn, ...], files: tuple[tuple[str, int], ...]
) -> str:
    """The staged table's identity: its node, rows, column types and files (name, size)."""
    text = json.dumps(
        {"node_id": node_id, "rows": rows, "columns": [[c.name, c.type] for c in columns], "files": files},
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:32]
