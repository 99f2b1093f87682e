"""The cores of output ownership: which files of a folder are pz's (`ownership`) and whether a glob can reach
into an output folder (`output_overlaps`)."""

from __future__ import annotations

import pytest

from pipelinez.compile.output_overlaps import glob_reaches
from pipelinez.connectors.files import ownership
from pipelinez.core.diagnostics import PzConnectorError


def test_a_manifest_names_pz_s_files_and_everything_else_is_foreign() -> None:
    manifest = ownership.manifest_bytes(["part-00000.parquet", "gone.parquet"])
    files = [".pz-manifest.json", "part-00000.parquet", "part-00001.parquet", "notes.txt", ".x.pz-tmp-1/a"]
    state = ownership.classify(files, manifest, "out/o")
    assert state.owned == {"part-00000.parquet"}
    # a pz-named file the manifest does not name is foreign once there is a manifest
    assert state.foreign == ("notes.txt", "part-00001.parquet")


@pytest.mark.parametrize(
    ("files", "owned"),
    [
        ([], True),
        (["part-00000.parquet", "part-20261001T000000Z-ab12-00003.csv", "day=1/hour=2/part-0.json"], True),
        (["part-00000.parquet", "readme.md"], False),
        (["part-00000.txt"], False),
        (["sub/part-00000.parquet"], False),  # not a <col>=<value>/ folder
        ([".gitkeep"], False),
    ],
)
def test_without_a_manifest_a_folder_is_pz_s_only_when_every_file_has_a_pz_name(
    files: list[str], owned: bool
) -> None:
    state = ownership.classify(files, None, "out/o")
    assert (state.foreign == ()) is owned
    assert state.owned == (frozenset(files) if owned else frozenset())


@pytest.mark.parametrize(
    "data", [b"{", b"[]", b'{"version": 2, "files": []}', b'{"version": 1, "files": [1]}']
)
def test_an_unreadable_manifest_is_pz0532(data: bytes) -> None:
    with pytest.raises(PzConnectorError) as caught:
        ownership.classify(["part-00000.parquet"], data, "out/o")
    assert caught.value.code == "PZ0532"


def test_a_replace_over_foreign_files_is_pz0530_unless_opted_in() -> None:
    files = [f"f{i}.csv" for i in range(7)]
    with pytest.raises(PzConnectorError) as caught:
        ownership.check_replace(files, None, "out/o", foreign_ok=False)
    assert caught.value.code == "PZ0530"
    assert "holds 7 file(s) pz did not write (f0.csv, f1.csv, f2.csv, f3.csv, f4.csv and 2 more)" in str(
        caught.value
    )
    ownership.check_replace(files, b"not even json", "out/o", foreign_ok=True)


@pytest.mark.parametrize(
    ("glob", "rest", "below", "reaches"),
    [
        (("*.csv",), ("sub",), True, False),  # files of data/ only: data/sub/... is out of its reach
        (("*.csv",), ("x.csv",), True, False),  # a folder named like the files it reads: nothing in it
        (("*.csv",), ("x.csv",), False, True),  # a file of that name: read
        (("*", "*.csv"), ("sub",), True, True),
        (("**", "*.csv"), ("a", "b"), True, True),
        (("2026", "**"), ("2025",), True, False),
        (("2026", "*.csv"), ("2026",), True, True),
        (("*.csv",), ("wh.duckdb",), False, False),  # a single file: only when the glob names it
        (("*",), ("wh.duckdb",), False, True),
        (("**",), ("a", "b", "c"), False, True),
    ],
)
def test_a_glob_reaches_into_a_folder_only_where_it_can_match(
    glob: tuple[str, ...], rest: tuple[str, ...], below: bool, reaches: bool
) -> None:
    assert glob_reaches(glob, rest, below) is reaches


def test_a_file_browser_s_clutter_is_nobody_s_data() -> None:
    """Opening an output folder in macOS Finder or Windows Explorer leaves .DS_Store, ._* or Thumbs.db
    there: that must not stop every later replace as PZ0530."""
    files = ["part-00000.parquet", ".DS_Store", "._part-00000.parquet", "sub/Thumbs.db", "desktop.ini"]
    ownership.check_replace(
        files, ownership.manifest_bytes(["part-00000.parquet"]), "out/o", foreign_ok=False
    )
    ownership.check_replace(files, None, "out/o", foreign_ok=False)  # an older pz's folder: still pz's
    with pytest.raises(PzConnectorError) as caught:
        ownership.check_replace([*files, "notes.txt"], None, "out/o", foreign_ok=False)
    message = str(caught.value)
    assert "notes.txt" in message and ".DS_Store" not in message and "Thumbs.db" not in message
    assert "Next:" not in message  # the registry's next step is the one next: line
