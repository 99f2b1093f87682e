"""The shipped JSON Schemas: valid draft 2020-12, in sync with schema_defs, written by write_schemas."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from pipelinez.config import schema_defs
from pipelinez.config.schemas import KINDS, load_schema, write_schemas
from pipelinez.core.durations import DURATION_PATTERN


@pytest.mark.parametrize("kind", KINDS)
def test_schema_is_valid_draft_2020_12(kind: str) -> None:
    schema = load_schema(kind)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("kind", KINDS)
def test_shipped_schema_matches_its_definition(kind: str) -> None:
    # regenerate with: python -m pipelinez.config.schema_defs
    assert load_schema(kind) == schema_defs.build_schema(kind)
    shipped = Path(schema_defs.__file__).parent / "schemas" / f"{kind}.schema.json"
    assert shipped.read_text(encoding="utf-8") == schema_defs.render(kind)


def test_write_schemas_writes_every_schema(tmp_path: Path) -> None:
    out = tmp_path / "nested" / "schemas"
    written = write_schemas(out)
    assert [p.name for p in written] == [f"{k}.schema.json" for k in KINDS]
    for kind, path in zip(KINDS, written, strict=True):
        assert path.parent == out
        assert json.loads(path.read_text(encoding="utf-8")) == load_schema(kind)
    assert write_schemas(out) == written  # idempotent: overwrites


def test_load_schema_refuses_unknown_kinds_and_returns_copies() -> None:
    with pytest.raises(ValueError, match="unknown schema kind"):
        load_schema("pipeline")
    first = load_schema("project")
    first["properties"].clear()
    assert load_schema("project")["properties"]


def _walk(node: object) -> list[dict]:
    found = []
    if isinstance(node, dict):
        found.append(node)
        for value in node.values():
            found += _walk(value)
    elif isinstance(node, list):
        for value in node:
            found += _walk(value)
    return found


@pytest.mark.parametrize("kind", KINDS)
def test_engine_owned_objects_are_closed(kind: str) -> None:
    schema = load_schema(kind)
    for node in _walk(schema):
        if node.get("type") == "object" or (isinstance(node.get("type"), list) and "object" in node["type"]):
            assert "additionalProperties" in node, node.get("description", node)


def test_connector_owned_blocks_stay_open_and_engine_keys_are_typed() -> None:
    source = load_schema("source")
    assert source["properties"]["connection"].get("additionalProperties", True) is not False
    dataset = source["properties"]["datasets"]["additionalProperties"]
    assert dataset["additionalProperties"] is True
    assert set(dataset["properties"]) == {"columns", "sync", "retry", "checks", "data_tests", "description"}
    output = load_schema("sink")["properties"]["outputs"]["additionalProperties"]
    assert output["additionalProperties"] is True
    assert {"strategy", "keys", "on_delete", "duplicates", "allow_empty", "retry"} <= set(
        output["properties"]
    )


def test_durations_use_the_core_pattern() -> None:
    retry = load_schema("project")["$defs"]["retry"]["properties"]
    assert retry["base_delay"]["pattern"] == DURATION_PATTERN
    assert (
        load_schema("project")["$defs"]["breaker"]["properties"]["cool_down"]["pattern"] == DURATION_PATTERN
    )


def test_reference_examples_validate() -> None:
    project = {
        "name": "shop",
        "vars": {"min_date": {"type": "date", "default": "2024-01-01"}},
        "env": {"PG_PASSWORD": {"required": True, "secret": True}, "HOST": {"default": "localhost"}},
        "connectors": {"postgres": ">=1.0,<2"},
        "engine": {
            "threads": 4,
            "fail_fast": False,
            "force_universal": False,
            "retry": {"max_attempts": 3, "base_delay": "1s", "max_delay": "30s"},
            "breaker": {"failure_threshold": 5, "cool_down": "30s"},
        },
        "retention": {"keep_last": 10},
    }
    assert list(Draft202012Validator(load_schema("project")).iter_errors(project)) == []
    sidecar = {"checks": [{"freshness": {"column": "u", "max_age": "1d"}, "severity": "warn"}]}
    assert list(Draft202012Validator(load_schema("sidecar")).iter_errors(sidecar)) == []
