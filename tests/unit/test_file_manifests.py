"""The file connectors (s3, azureblob, localfiles) share one definition of their dataset and output options
(`connectors/files/options.json`); their manifests must stay what it generates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelinez.connectors.files import manifests
from pipelinez.connectors.registry import manifest_of


def test_every_file_connector_manifest_is_what_the_shared_options_generate() -> None:
    assert manifests.stale() == [], "run: python -m pipelinez.connectors.files.manifests"


def test_the_shared_options_are_the_schemas_the_registry_reads() -> None:
    for name in manifests.FILE_CONNECTORS:
        loaded = manifest_of(name)
        shared = manifests.shared_schemas(name)
        assert loaded.dataset_schema == shared["dataset_schema"]
        assert loaded.output_schema == shared["output_schema"]
    words = [
        manifests.shared_schemas(n)["output_schema"]["properties"]["path"] for n in manifests.FILE_CONNECTORS
    ]
    assert len({w["description"] for w in words}) == 3  # each connector keeps its own wording


def test_a_change_to_the_shared_options_makes_every_manifest_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = json.loads(manifests.OPTIONS.read_text(encoding="utf-8"))
    options["output_schema"]["properties"]["allow_empty"]["description"] = "changed"
    changed = tmp_path / "options.json"
    changed.write_text(manifests.render(options), encoding="utf-8")
    monkeypatch.setattr(manifests, "OPTIONS", changed)
    assert manifests.stale() == list(manifests.FILE_CONNECTORS)
    assert manifests.main(["--check"]) == 1


def test_render_writes_the_same_json() -> None:
    value = {"a": [1, {"b": "x" * 200}], "c": {}, "d": "…"}
    assert json.loads(manifests.render(value)) == value
