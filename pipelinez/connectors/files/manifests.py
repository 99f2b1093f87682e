"""The file connectors' shared option schemas: one definition, `options.json`, of the dataset and output
options that s3, azureblob and localfiles all take (format, path, CSV dialect, partitioning, strategies...),
with each connector's own wording of the few options whose words differ (a bucket, a container, a folder).

A manifest stays a complete JSON document (the registry reads it as data, without importing connector code):
its `dataset_schema` and `output_schema` are generated from `options.json`. After editing `options.json`,
run `python -m pipelinez.connectors.files.manifests` to rewrite the three manifests; `--check` only says
which are out of date (exit status 1), as `tests/unit/test_file_manifests.py` does.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

FILE_CONNECTORS = ("s3", "azureblob", "localfiles")
SHARED_KEYS = ("dataset_schema", "output_schema")
OPTIONS = Path(__file__).with_name("options.json")
_WIDTH = 110  # a JSON value fitting this line width is written on one line


def manifest_path(connector: str) -> Path:
    return Path(__file__).parent.parent / connector / "manifest.json"


def shared_schemas(connector: str) -> dict[str, Any]:
    """The connector's `dataset_schema` and `output_schema`: the shared ones, in its wording."""
    options = json.loads(OPTIONS.read_text(encoding="utf-8"))
    schemas: dict[str, Any] = {}
    for key in SHARED_KEYS:
        schema = copy.deepcopy(options[key])
        for option, words in options["wording"][connector].get(key, {}).items():
            schema["properties"][option]["description"] = words
        schemas[key] = schema
    return schemas


def generated(connector: str) -> dict[str, Any]:
    """The connector's manifest with its shared schemas as `options.json` defines them."""
    manifest: dict[str, Any] = json.loads(manifest_path(connector).read_text(encoding="utf-8"))
    manifest.update(shared_schemas(connector))
    return manifest


def stale() -> list[str]:
    """The file connectors whose manifest differs from what `options.json` generates."""
    return [
        name
        for name in FILE_CONNECTORS
        if json.loads(manifest_path(name).read_text(encoding="utf-8")) != generated(name)
    ]


def write() -> list[str]:
    """Rewrite every stale manifest; returns the connectors rewritten."""
    rewritten = stale()
    for name in rewritten:
        manifest_path(name).write_text(render(generated(name)), encoding="utf-8")
    return rewritten


def render(value: Any) -> str:
    """JSON, two-space indented, with every object or list that fits one line written on one line."""
    return _render(value, 0) + "\n"


def _render(value: Any, indent: int) -> str:
    flat = json.dumps(value, ensure_ascii=False)
    if not isinstance(value, dict | list) or not value or indent + len(flat) <= _WIDTH:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = [
            f"{pad}{json.dumps(k, ensure_ascii=False)}: {_render(v, indent + 2)}" for k, v in value.items()
        ]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    items = [pad + _render(v, indent + 2) for v in value]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        out_of_date = stale()
        for name in out_of_date:
            print(f"{manifest_path(name)} is out of date: run python -m pipelinez.connectors.files.manifests")
        return 1 if out_of_date else 0
    for name in write():
        print(f"rewrote {manifest_path(name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
