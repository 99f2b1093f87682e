"""YAML loading: positions of keys and values, broken YAML as PZ0101, unreadable files as PZ0108."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelinez.config.positions import Positions, dotted
from pipelinez.config.textfile import MAX_FILE_BYTES, read_text
from pipelinez.config.yaml_loader import load_yaml_file, parse_yaml, position_of


def places(diagnostics: list) -> list[tuple[str, str]]:
    return [(d.code, d.place.render()) for d in diagnostics]


def test_positions_of_keys_values_and_items_are_one_based() -> None:
    doc, problems = parse_yaml(
        "name: shop\nengine:\n  retry: { max_attempts: 3, base_delay: 1s }\ntags:\n  - a\n  - b: 1\n", "p.yml"
    )
    assert problems == [] and doc is not None
    assert doc.data == {
        "name": "shop",
        "engine": {"retry": {"max_attempts": 3, "base_delay": "1s"}},
        "tags": ["a", {"b": 1}],
    }
    assert position_of(doc, ("name",)) == (1, 1)
    assert position_of(doc, ("name",), at="value") == (1, 7)
    assert position_of(doc, ("engine", "retry")) == (3, 3)
    assert position_of(doc, ("engine", "retry", "base_delay")) == (3, 29)
    assert position_of(doc, ("engine", "retry", "base_delay"), at="value") == (3, 41)
    assert position_of(doc, ("tags", 1)) == (6, 5)
    assert position_of(doc, ("tags", 1, "b"), at="value") == (6, 8)


def test_position_of_a_missing_path_is_its_nearest_existing_ancestor() -> None:
    doc, _ = parse_yaml("engine:\n  retry: {}\n", "p.yml")
    assert doc is not None
    assert position_of(doc, ("engine", "retry", "max_attempts", 0)) == (2, 3)
    assert position_of(doc, ("nope", "deeper"), at="value") == (1, 1)
    assert position_of(doc, ()) == (1, 1)
    assert doc.positions.place(("engine",)).render() == "p.yml:1:1"


def test_dotted_paths() -> None:
    assert dotted(("datasets", "orders", "checks", 2, "not_null")) == "datasets.orders.checks[2].not_null"
    assert dotted(()) == ""
    assert Positions("f.yml").locate(("x",)) == (1, 1)


def test_scalars_become_plain_python_and_timestamps_stay_as_written() -> None:
    doc, problems = parse_yaml(
        "d: 2024-01-01\nbad: 2024-13-45\nts: 2024-01-01T10:00:00Z\nb: &t true\nc: *t\n"
        "i: 0x10\nf: 1.5\nn: ~\nt: !custom text\n1: one\n",
        "x.yml",
    )
    assert problems == [] and doc is not None
    assert doc.data == {
        "d": "2024-01-01",
        "bad": "2024-13-45",
        "ts": "2024-01-01T10:00:00Z",
        "b": True,
        "c": True,
        "i": 16,
        "f": 1.5,
        "n": None,
        "t": "text",
        "1": "one",
    }
    assert type(doc.data["b"]) is bool and type(doc.data["i"]) is int


def test_merge_keys_are_resolved() -> None:
    doc, problems = parse_yaml("base: &b { p: 1 }\nder:\n  <<: *b\n  q: 2\n", "x.yml")
    assert problems == [] and doc is not None
    assert doc.data["der"] == {"q": 2, "p": 1}


@pytest.mark.parametrize(
    ("text", "where", "words"),
    [
        ("a:\n\tb: 1\n", "x.yml:2:1", "tab"),
        ("a: 1\nb: 2\na: 3\n", "x.yml:3:1", 'duplicate key "a"'),
        ("a: 'unclosed\nb: 2\n", "x.yml:3:1", "end of stream"),
        ("a: [1, 2\n", "x.yml:2:1", ""),
        ("a: 1\n---\nb: 2\n", "x.yml:2:1", "second YAML document"),
        ("a:\n  b: 1\n c: 2\n", "x.yml:3:2", ""),
        ("a: b\nc: \x00\n", "x.yml:2:4", "character"),
        ("", "x.yml:1:1", "empty"),
        ("# only a comment\n", "x.yml:1:1", "empty"),
        ("- a\n- b\n", "x.yml:1:1", "not a list"),
        ("just text", "x.yml:1:1", "mapping"),
        ("1: a\n'1': b\n", "x.yml:2:1", "twice"),
    ],
)
def test_broken_yaml_is_pz0101_with_its_position(text: str, where: str, words: str) -> None:
    doc, problems = parse_yaml(text, "x.yml")
    assert doc is None
    assert places(problems) == [("PZ0101", where)]
    assert words in problems[0].message


def test_alias_bombs_and_deep_nesting_are_refused_not_crashed() -> None:
    bomb = "a: &a [1,1,1,1,1,1,1,1,1,1]\n"
    for level, prev in zip("bcdefg", "abcdef", strict=True):
        bomb += f"{level}: &{level} [" + ",".join([f"*{prev}"] * 10) + "]\n"
    doc, problems = parse_yaml(bomb, "x.yml")
    assert doc is None and [d.code for d in problems] == ["PZ0101"]
    doc, problems = parse_yaml("a: " + "[" * 3000 + "]" * 3000 + "\n", "x.yml")
    assert doc is None and [d.code for d in problems] == ["PZ0101"]


@pytest.mark.parametrize(
    "text",
    [
        "name: x\nx: " + "[" * 100_000 + "]" * 100_000 + "\n",
        "name: x\nx:\n" + "".join(" " * i + "{\n" for i in range(5000)),
        "name: x\n" + "".join(" " * i + "a:\n" for i in range(300)),
        "name: x\nx:\n" + "- " * 500 + "leaf\n",
    ],
)
def test_deep_nesting_is_refused_before_parsing_with_where(text: str) -> None:
    """Found by the fuzz suite: 1,000 nested `[` took the parser 3-15 s (100,000: longer than a minute)."""
    doc, problems = parse_yaml(text, "x.yml")
    assert doc is None
    assert [d.code for d in problems] == ["PZ0101"]
    assert "nested more than 64 levels deep" in problems[0].message
    assert problems[0].place.line is not None and problems[0].place.line >= 2


def test_nesting_inside_quotes_or_comments_is_not_counted() -> None:
    text = "name: x\ndescription: '" + "[" * 500 + "' # " + "{" * 500 + "\ntags: [[a], {b: [c]}]\n"
    doc, problems = parse_yaml(text, "x.yml")
    assert problems == [] and doc is not None
    assert doc.data["tags"] == [["a"], {"b": ["c"]}]


def test_not_utf8_is_pz0108_with_the_line(tmp_path: Path) -> None:
    path = tmp_path / "x.yml"
    path.write_bytes(b"name: shop\nother: caf\xe9\n")
    doc, problems = load_yaml_file(path, "x.yml")
    assert doc is None
    assert places(problems) == [("PZ0108", "x.yml:2:11")]
    assert "UTF-8" in problems[0].message


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "x.yml"
    path.write_bytes("\ufeffname: café\n".encode())
    doc, problems = load_yaml_file(path, "x.yml")
    assert problems == [] and doc is not None and doc.data == {"name": "café"}


def test_file_larger_than_10_mib_is_pz0108(tmp_path: Path) -> None:
    path = tmp_path / "big.yml"
    with path.open("wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)
    text, problems = read_text(path, "big.yml")
    assert text is None and places(problems) == [("PZ0108", "big.yml")]
    assert "10 MiB" in problems[0].message


def test_missing_or_unreadable_file_is_pz0108(tmp_path: Path) -> None:
    text, problems = read_text(tmp_path / "absent.yml", "absent.yml")
    assert text is None and places(problems) == [("PZ0108", "absent.yml")]
    folder = tmp_path / "dir.yml"
    folder.mkdir()
    assert [d.code for d in read_text(folder, "dir.yml")[1]] == ["PZ0108"]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads anything")
def test_permission_denied_is_pz0108(tmp_path: Path) -> None:
    path = tmp_path / "secret.yml"
    path.write_text("a: 1\n")
    path.chmod(0)
    try:
        doc, problems = load_yaml_file(path, "secret.yml")
    finally:
        path.chmod(0o600)
    assert doc is None and [d.code for d in problems] == ["PZ0108"]


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_parses_or_yields_pz0101_never_raises(text: str) -> None:
    doc, problems = parse_yaml(text, "x.yml")
    assert (doc is None) == bool(problems)
    assert all(d.code == "PZ0101" and d.place.file == "x.yml" for d in problems)
    if doc is not None:
        assert isinstance(doc.data, dict)


_yamlish = st.lists(
    st.sampled_from(
        [
            "a",
            "b",
            ":",
            " ",
            "  ",
            "\n",
            "- ",
            "{",
            "}",
            "[",
            "]",
            ",",
            "&x ",
            "*x",
            "<<: ",
            "'",
            '"',
            "#",
            "\t",
            "? ",
            "!t ",
            "---\n",
            "1",
            "2024-01-01",
            "~",
            "|",
            ">",
            "%YAML 1.2\n",
        ]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=500, deadline=None)
@given(_yamlish)
def test_yaml_like_text_parses_or_yields_pz0101_never_raises(text: str) -> None:
    doc, problems = parse_yaml(text, "x.yml")
    assert (doc is None) == bool(problems)
    assert all(d.code == "PZ0101" for d in problems)
