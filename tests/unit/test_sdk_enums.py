"""The SDK types a manifest's tiers and strategies as enums (StrEnum: still equal to their strings); the
manifest file stays JSON, and a tier or strategy it does not know is refused, never carried as a string."""

from __future__ import annotations

import json

import pytest

from pipelinez.connectors.registry import manifest_of
from pipelinez.connectors.sdk import Manifest, choose_tier
from pipelinez.core.vocabulary import Strategy, Tier

CAPS = {"source": True, "sink": True}
BASE = {"name": "x", "version": "0.1.0", "capabilities": CAPS}


def test_builtin_manifests_load_tiers_and_strategies_as_enums() -> None:
    for name in ("duckdb", "localfiles", "postgres", "mysql", "http", "s3", "azureblob"):
        manifest = manifest_of(name)
        caps = manifest.capabilities
        tiers = (*caps.source_tiers, *caps.sink_tiers, *(t for ts in manifest.formats.values() for t in ts))
        assert tiers and all(type(t) is Tier for t in tiers), name
        assert all(type(s) is Strategy for s in caps.strategies), name
    postgres = manifest_of("postgres").capabilities
    assert postgres.strategies == ("replace", "merge", "append", "view")  # equal to the JSON's strings
    assert json.dumps(list(postgres.source_tiers)) == '["native", "universal"]'
    assert choose_tier(postgres.source_tiers, force_universal=True) is Tier.UNIVERSAL


@pytest.mark.parametrize(
    "capabilities",
    [{"source_tiers": ["native", "warp"]}, {"strategies": ["replace", "upsert"]}],
    ids=["tier", "strategy"],
)
def test_an_unknown_tier_or_strategy_is_refused(capabilities: dict[str, list[str]]) -> None:
    data = {**BASE, "capabilities": {**CAPS, **capabilities}}
    with pytest.raises(ValueError):
        Manifest.from_dict(data)


def test_an_unknown_format_tier_is_refused() -> None:
    with pytest.raises(ValueError):
        Manifest.from_dict({**BASE, "formats": {"csv": ["native", "quantum"]}})
