"""`discovery.split_ext`: `os.path.splitext` for every path, its quick way taken for the usual name."""

from __future__ import annotations

import os

import pytest

from pipelinez.config.discovery import split_ext


@pytest.mark.parametrize(
    "path",
    [
        "a.sql",
        "/x/y/a.sql",
        "/x.d/y",
        ".hidden",
        "..x",
        "/a/..x.sql",
        "/a/.b.c",
        "a.b.c",
        "a.",
        "/a/b.",
        "",
        ".",
        "/a/",
        "x/.sql",
        "p_0001.yaml",
        "x/...",
        "dir.v2/name",
    ],
)
def test_split_ext_is_splitext(path: str) -> None:
    assert split_ext(path) == os.path.splitext(path)
