"""dbt_project.yml: name, profile, folders, vars and the `models:`/`seeds:` config trees."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelinez.core.diagnostics import PzError, error
from pipelinez.core.json_types import JsonObject
from pipelinez.importers.dbt.yamlio import load_yaml, mapping

# config keys dbt accepts without a `+` in the models:/seeds: trees (anything else that maps is a folder)
CONFIG_KEYS = frozenset(
    [
        "materialized",
        "schema",
        "database",
        "alias",
        "tags",
        "enabled",
        "docs",
        "persist_docs",
        "pre-hook",
        "post-hook",
        "pre_hook",
        "post_hook",
        "full_refresh",
        "unique_key",
        "incremental_strategy",
        "on_schema_change",
        "meta",
        "grants",
        "contract",
        "column_types",
        "quote_columns",
        "delimiter",
        "sql_header",
        "group",
        "access",
        "event_time",
        "batch_size",
        "lookback",
        "begin",
        "indexes",
        "location",
        "external_location",
        "options",
        "format",
        "partition_by",
        "cluster_by",
    ]
)


# dbt_project.yml keys the import reads, or that mean nothing for the pz project (paths dbt cleans, versions)
_READ_KEYS = frozenset(
    [
        "name",
        "version",
        "config-version",
        "profile",
        "model-paths",
        "seed-paths",
        "test-paths",
        "macro-paths",
        "snapshot-paths",
        "analysis-paths",
        "docs-paths",
        "asset-paths",
        "target-path",
        "clean-targets",
        "packages-install-path",
        "log-path",
        "require-dbt-version",
        "vars",
        "models",
        "seeds",
        "on-run-start",
        "on-run-end",
        "dbt-cloud",
    ]
)


@dataclass
class DbtProject:
    root: Path
    name: str
    profile: str
    model_paths: list[str]
    seed_paths: list[str]
    macro_paths: list[str]
    test_paths: list[str]
    snapshot_paths: list[str]
    analysis_paths: list[str]
    docs_paths: list[str]
    target_path: str
    vars: JsonObject
    models_tree: JsonObject
    seeds_tree: JsonObject
    hooks: list[str] = field(default_factory=list)
    other_trees: list[str] = field(default_factory=list)  # models: keys naming other packages
    unused_keys: list[str] = field(default_factory=list)  # dbt_project.yml keys the import does not use
    packages: list[str] = field(default_factory=list)


def _paths(data: JsonObject, key: str, default: list[str]) -> list[str]:
    value = data.get(key, default)
    return [str(v).strip("/") for v in value] if isinstance(value, list) else default


def read_project(root: Path) -> DbtProject:
    path = root / "dbt_project.yml"
    if not path.is_file():
        raise PzError(
            [error("PZ0140", f"{root} holds no dbt_project.yml: it is not a dbt project", file=str(root))]
        )
    data = mapping(load_yaml(path, "dbt_project.yml"))
    name = str(data.get("name") or root.name)
    project_tree = mapping(mapping(data.get("models")).get(name))
    seeds_tree = mapping(mapping(data.get("seeds")).get(name))
    hooks = [key for key in ("on-run-start", "on-run-end") if data.get(key)]
    return DbtProject(
        root=root,
        name=name,
        profile=str(data.get("profile") or name),
        model_paths=_paths(data, "model-paths", ["models"]),
        seed_paths=_paths(data, "seed-paths", ["seeds"]),
        macro_paths=_paths(data, "macro-paths", ["macros"]),
        test_paths=_paths(data, "test-paths", ["tests"]),
        snapshot_paths=_paths(data, "snapshot-paths", ["snapshots"]),
        analysis_paths=_paths(data, "analysis-paths", ["analyses"]),
        docs_paths=_paths(data, "docs-paths", []),
        target_path=str(data.get("target-path") or "target"),
        vars=mapping(data.get("vars")),
        models_tree=project_tree,
        seeds_tree=seeds_tree,
        hooks=hooks,
        unused_keys=sorted(str(k) for k in data if str(k) not in _READ_KEYS),
        other_trees=sorted(
            str(k) for k in mapping(data.get("models")) if k != name and not str(k).startswith("+")
        ),
        packages=_packages(root),
    )


def _packages(root: Path) -> list[str]:
    names: list[str] = []
    for file in ("packages.yml", "dependencies.yml"):
        if (root / file).is_file():
            for entry in mapping(load_yaml(root / file, file)).get("packages") or []:
                spec = mapping(entry)
                text = str(spec.get("package") or spec.get("git") or spec.get("local") or "")
                names.append(text.rstrip("/").split("/")[-1].removesuffix(".git").replace("-", "_"))
    return sorted(set(names))


def _is_config(key: str, value: Any) -> bool:
    return key.startswith("+") or key in CONFIG_KEYS or not isinstance(value, dict)


def level_config(tree: JsonObject) -> JsonObject:
    """The configs set at one level of a models:/seeds: tree (`+` stripped)."""
    return {k.lstrip("+"): v for k, v in tree.items() if _is_config(k, v)}


def subtree(tree: JsonObject, part: str) -> JsonObject | None:
    value = tree.get(part)
    return value if isinstance(value, dict) and not _is_config(part, value) else None


def merge_config(base: JsonObject, top: JsonObject) -> JsonObject:
    """dbt's merge: tags add up, other keys of `top` win."""
    merged = dict(base)
    for key, value in top.items():
        if key == "tags":
            tags = [value] if isinstance(value, str) else list(value or [])
            merged["tags"] = list(dict.fromkeys([*merged.get("tags", []), *tags]))
        else:
            merged[key] = value
    return merged


def effective_config(tree: JsonObject, parts: list[str]) -> JsonObject:
    """The config of the node at `parts` (folders, then the node's own name) from the project tree."""
    config = level_config(tree)
    node: JsonObject | None = tree
    for part in parts:
        node = subtree(node, part) if node is not None else None
        if node is None:
            break
        config = merge_config(config, level_config(node))
    if "tags" in config:
        config = {**config, **merge_config({}, {"tags": config["tags"]})}
    return config


def folder_keys(tree: JsonObject, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every folder (or node) path the tree configures, depth first in file order."""
    found: list[tuple[str, ...]] = []
    for key, value in tree.items():
        if not _is_config(key, value):
            found.append((*prefix, key))
            found.extend(folder_keys(value, (*prefix, key)))
    return found
