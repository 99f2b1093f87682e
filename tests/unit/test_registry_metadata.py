"""Finding the installed connectors reads each distribution's METADATA once (issue 22): pz's own holds its
seven connectors, and every `.name` or `.version` of an entry point's distribution parsed the whole file
again (14 parses, the README included, on every run and every cold validate)."""

from __future__ import annotations

from collections import Counter
from importlib import metadata

import pytest

from pipelinez.connectors import registry


def test_each_distributions_metadata_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: Counter[str] = Counter()
    real = metadata.PathDistribution.read_text

    def counting(self: metadata.PathDistribution, filename: str) -> str | None:
        text = real(self, filename)
        # a parse of the metadata reads METADATA, or (an .egg-info, e.g. a source checkout's beside an
        # editable install) asks for METADATA in vain and then reads PKG-INFO: count the reads that found it
        if filename in ("METADATA", "PKG-INFO") and text is not None:
            reads[str(self._path)] += 1  # type: ignore[attr-defined]
        return text

    monkeypatch.setattr(metadata.PathDistribution, "read_text", counting)
    registry.installed.cache_clear()
    try:
        found = registry.installed()
    finally:
        registry.installed.cache_clear()
    assert {"duckdb", "postgres", "localfiles"} <= set(found)
    assert found["postgres"].distribution == "pipelinez" and found["postgres"].version
    assert reads and set(reads.values()) == {1}, reads
