"""The JSON nesting-depth scan agrees with a real parser on every depth, across chunk boundaries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelinez.connectors.files import jsondepth
from pipelinez.core.diagnostics import PzConnectorError

_TEXT = st.text(alphabet='ab{}[]"\\/\n', max_size=6)
_JSON = st.recursive(
    st.none() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=30,
)


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


@settings(max_examples=60, deadline=None)
@given(records=st.lists(_JSON, min_size=1, max_size=4), chunk=st.sampled_from([3, 16, 4 << 20]))
def test_scan_matches_parsed_depth(
    tmp_path_factory: pytest.TempPathFactory, records: list[Any], chunk: int
) -> None:
    path = tmp_path_factory.mktemp("j") / "data.json"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records), encoding="utf-8")
    deepest = max(_depth(r) for r in records)
    original = jsondepth._CHUNK
    jsondepth._CHUNK = chunk
    try:
        for limit in (0, 1, 2, 3, 5):
            assert jsondepth.too_deep(path, limit) == (deepest > limit)
    finally:
        jsondepth._CHUNK = original


def test_refuses_past_the_limit_only(tmp_path: Path) -> None:
    at_limit = tmp_path / "ok.json"
    at_limit.write_text("[" * jsondepth.MAX_DEPTH + "]" * jsondepth.MAX_DEPTH)
    over = tmp_path / "deep.json"
    over.write_text('{"k": ' * (jsondepth.MAX_DEPTH + 1) + "1" + "}" * (jsondepth.MAX_DEPTH + 1))
    jsondepth.refuse_too_deep([at_limit])
    with pytest.raises(PzConnectorError, match="more than 1000 levels deep") as caught:
        jsondepth.refuse_too_deep([at_limit, over])
    assert caught.value.code == "PZ0505" and str(over) in caught.value.message


def test_a_compressed_file_is_scanned_decompressed(tmp_path: Path) -> None:
    import gzip

    deep = tmp_path / "deep.json.gz"
    deep.write_bytes(gzip.compress(b"[" * (jsondepth.MAX_DEPTH + 1) + b"]" * (jsondepth.MAX_DEPTH + 1)))
    assert jsondepth.too_deep(deep)
