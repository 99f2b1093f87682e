"""Within one load, data that has passed its schema passes again without jsonschema (sidecars written alike
are checked once), and data that has not is checked."""

from __future__ import annotations

from pathlib import Path

from pipelinez.config.shape_memo import ShapeMemo


def test_data_that_passed_earlier_in_the_same_load_passes_again(tmp_path: Path) -> None:
    memo = ShapeMemo(tmp_path)
    checks = {"checks": [{"not_null": {"columns": ["id"]}}]}
    first = memo.digest("{}", checks)
    assert not memo.passed(first)
    memo.remember(first)
    assert memo.passed(memo.digest("{}", {"checks": [{"not_null": {"columns": ["id"]}}]}))
    assert not memo.passed(memo.digest("{}", {"checks": [{"unique": {"columns": ["id"]}}]}))
    assert not memo.passed(memo.digest('{"type": "object"}', checks))  # another schema
