"""The parse cache gives back exactly the document it was given: values of the same types, the same
positions; a document JSON cannot carry exactly is not kept; a file signed with another salt is ignored."""

from __future__ import annotations

from pathlib import Path

from pipelinez.config.parse_cache import ParseCache
from pipelinez.config.positions import Positions
from pipelinez.config.yaml_loader import YamlDoc, parse_yaml

TEXT = """
name: shop
vars:
  a: { type: int, default: 1 }
  b: { type: decimal, default: 1.0 }
  c: { type: bool, default: true }
  d: { type: date, default: 2024-01-01 }
  e: { type: text, default: "1" }
  f: { type: text, default: null }
list: [1, 1.5, "x", [true, {k: v}]]
"""


def _types(value: object) -> object:
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_types(v) for v in value]
    return type(value).__name__


def test_a_document_comes_back_exactly(tmp_path: Path) -> None:
    doc, problems = parse_yaml(TEXT, "project.yml")
    assert doc is not None and not problems
    key = ParseCache.key("project", "project.yml", TEXT)
    cache = ParseCache(tmp_path, "salt", "pz test")
    cache.put(key, doc)
    cache.save()
    back = ParseCache(tmp_path, "salt", "pz test").get(key, "project.yml")
    assert back is not None
    assert back.data == doc.data and _types(back.data) == _types(doc.data)
    assert dict(back.positions.keys) == dict(doc.positions.keys)
    assert dict(back.positions.values) == dict(doc.positions.values)
    assert ParseCache(tmp_path, "another salt", "pz test").get(key, "project.yml") is None
    assert ParseCache(tmp_path, "salt", "another pz").get(key, "project.yml") is None


def test_data_json_cannot_carry_exactly_is_not_kept(tmp_path: Path) -> None:
    doc = YamlDoc("x.yml", {"a": (1, 2)}, Positions("x.yml"))  # a tuple would come back a list
    cache = ParseCache(tmp_path, "salt", "pz test")
    cache.put("k", doc)
    cache.save()
    assert not (tmp_path / "parsed.json").exists()
