"""The properties files (schema.yml and friends) of models, seeds and sources, and the constructs pz
skips (unit tests, semantic models, metrics, saved queries, exposures, ...)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelinez.core.json_types import JsonObject
from pipelinez.importers.dbt.yamlio import load_yaml, mapping

SKIPPED_KEYS = {
    "unit_tests": "unit test",
    "semantic_models": "semantic model",
    "metrics": "metric",
    "saved_queries": "saved query",
    "exposures": "exposure",
    "snapshots": "snapshot properties",
    "analyses": "analysis properties",
    "groups": "group",
    "macros": "macro properties",
}


@dataclass
class Properties:
    models: dict[str, JsonObject] = field(default_factory=dict)
    seeds: dict[str, JsonObject] = field(default_factory=dict)
    sources: list[tuple[str, JsonObject]] = field(default_factory=list)  # (file, source)
    skipped: list[str] = field(default_factory=list)


def _yml_files(root: Path, folders: list[str]) -> list[Path]:
    found: list[Path] = []
    for folder in folders:
        base = root / folder
        if base.is_dir():
            found += [
                p
                for p in base.rglob("*")
                if p.suffix in (".yml", ".yaml")
                and p.is_file()
                and not any(part.startswith(".") for part in p.relative_to(base).parts)
            ]
    return sorted(set(found))


def read_properties(root: Path, folders: list[str]) -> Properties:
    props = Properties()
    for path in _yml_files(root, folders):
        rel = path.relative_to(root).as_posix()
        data = mapping(load_yaml(path, rel))
        for key, label in SKIPPED_KEYS.items():
            for entry in data.get(key) or []:
                name = mapping(entry).get("name", "?")
                props.skipped.append(f"{label} `{name}` ({rel})")
        for entry in data.get("models") or []:
            entry = mapping(entry)
            if entry.get("name"):
                props.models[str(entry["name"])] = {**entry, "_file": rel}
        for entry in data.get("seeds") or []:
            entry = mapping(entry)
            if entry.get("name"):
                props.seeds[str(entry["name"])] = {**entry, "_file": rel}
        for entry in data.get("sources") or []:
            if mapping(entry).get("name"):
                props.sources.append((rel, mapping(entry)))
    return props


def columns_of(entry: JsonObject) -> list[JsonObject]:
    """A node's `columns:` as a list of mappings (dbt writes a list; a mapping is accepted too)."""
    columns = entry.get("columns") or []
    if isinstance(columns, dict):
        return [{"name": k, **mapping(v)} for k, v in columns.items()]
    return [mapping(c) for c in columns if mapping(c).get("name")]


def tests_of(entry: JsonObject) -> list[Any]:
    return list(entry.get("data_tests") or []) + list(entry.get("tests") or [])


def description(entry: JsonObject) -> str | None:
    """The description with doc("x") written as pz reads it: {{ doc('x') }}."""
    text = entry.get("description")
    if not isinstance(text, str) or not text.strip():
        return None
    import re

    return re.sub(r"doc\(\s*\"(\w+)\"\s*\)", r"doc('\1')", text.strip())
