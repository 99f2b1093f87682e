"""The file-format kit's pure helpers: globs over object keys, formats, option rules."""

from __future__ import annotations

import pytest

from pipelinez.connectors.files import formats
from pipelinez.connectors.files.objconnector import key_problem
from pipelinez.connectors.files.objects import _hidden


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("a/*.csv", "a/x.csv", True),
        ("a/*.csv", "a/b/x.csv", False),
        ("a/**/x.csv", "a/x.csv", True),
        ("a/**/x.csv", "a/b/c/x.csv", True),
        ("a/**", "a/b/c", True),
        ("d/[ab]?.json", "d/a1.json", True),
        ("d/[!ab]?.json", "d/a1.json", False),
        ("d/[!ab]?.json", "d/c1.json", True),
        ("e/v1.2/*.parquet", "e/v1x2/p.parquet", False),  # '.' is literal
        ("e/*.parquet", "e/.hidden.parquet", True),  # hidden names are dropped by the listing, not the glob
    ],
)
def test_glob_regex(pattern: str, name: str, matches: bool) -> None:
    assert bool(formats.glob_regex(pattern).match(name)) is matches


def test_hidden_segments_below_the_listed_prefix_never_match() -> None:
    assert _hidden("out/.orders.pz-tmp-1/part-00000.parquet", "out")
    assert _hidden("data/x/.keep", "data")
    assert not _hidden(".config/data/x.csv", ".config/data")  # a hidden folder the user names is read
    assert not _hidden("data/x.csv", "data")


def test_formats_and_option_rules() -> None:
    assert formats.format_of_path("a/b.tsv.gz") == "csv"
    assert formats.format_of_path("prefix/") is None
    assert formats.glob_escaped("s3://b/k[1]*.csv") == "s3://b/k[[]1][*].csv"
    issues = formats.dataset_issues({"path": "x.parquet", "delimiter": ";"}, key_problem)
    assert issues == [("'delimiter' is a csv option, but this dataset's format is parquet", ("delimiter",))]
    assert key_problem("a/../b") is not None and key_problem("a/b/") is None
