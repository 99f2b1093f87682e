"""The libyaml path of parsing project YAML (config/yaml_fast.py) gives what the round-trip loader gives:
the same plain data and the same line/column of every key, value and item, or it leaves the file to that
loader."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from pipelinez.config import yaml_fast, yaml_loader

pytestmark = pytest.mark.skipif(not yaml_fast.available(), reason="ruamel.yaml.clib is not installed")


def _plain(value: Any) -> Any:
    """Data compared with types (1 is not 1.0 nor True) and NaN equal to itself."""
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return (type(value).__name__, value)


def _round_trip(text: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as patched:
        patched.setattr(yaml_loader, "fast_parse", lambda *args: None)
        return yaml_loader.parse_yaml(text, "f.yml")


def _fast(text: str) -> Any:
    return yaml_fast.fast_parse(text, "f.yml", yaml_loader.MAX_DEPTH, yaml_loader.MAX_NODES)


def _same(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _fast(text)
    assert fast is not None, text
    doc, problems = _round_trip(text, monkeypatch)
    assert doc is not None and not problems, (text, problems)
    data, positions = fast
    assert _plain(data) == _plain(doc.data), text
    assert dict(positions.keys) == dict(doc.positions.keys), text
    assert dict(positions.values) == dict(doc.positions.values), text


PLAIN = [
    "connector: postgres\nconnection: { host: localhost, port: 5432 }\ndatasets:\n  orders:\n"
    "    table: public.orders\n    columns: { id: bigint, amount: 'decimal(12,2)' }\n",
    "checks:\n  - not_null: { columns: [id, amount] }\n"
    "  - accepted_values: { column: grp, values: [0, 1, 2] }\n"
    '  - expression: { sql: "amount >= 0 and a != b", name: non_negative }\n',
    "ints: [0, -3, +4, 0x1F, 0o17, 0b101, 012, 1_000]\n"
    "floats: [2.5, -1e3, 1.5E-2, .inf, -.Inf, .NaN, 1_0.5]\n",
    "bools: [true, False, TRUE]\nnulls: [null, ~, NULL]\nwhen: 2024-01-01\nat: 2024-01-01 10:00:00\n",
    "1: int key\n2.5: float key\nfalse: bool key\nnull: null key\n'quoted': \"double\"\n",
    "sql: |\n  select 1\n  from t\nfolded: >-\n  one\n  two\n\nkept: |+\n  x\n\n",
    "# a comment\nname: shop  # trailing\nvars:\n  # inside\n  limit: { type: int, default: 10 }\n",
    "base: &b { a: 1, b: [x, y] }\ncopy: *b\nlist:\n- &s scalar\n- *s\n",
    "unicode: é ü €\nkey é: \"\\u00e9\\t\"\nmulti: 'a\n  b'\n",
    "top:\n  - a: 1\n    b:\n      - [1, [2, 3]]\n      - {x: {y: z}}\n  - - nested\n    - list\n",
    'explicit: [!!str 5, !!int "7", !!float 3, !!bool yes]\n',
]


@pytest.mark.parametrize("text", PLAIN)
def test_a_plain_file_parses_as_the_round_trip_loader_parses_it(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _same(text, monkeypatch)


LEFT_TO_ROUND_TRIP = [
    "a:\nb: 1\n",  # an empty value: libyaml marks it elsewhere
    "a: 1\na: 2\n",  # a duplicate key
    "1: a\ntrue: b\n",  # one key to a Python dict
    "base: &b {a: 1}\nmore:\n  <<: *b\n",  # a merge key
    "a: !custom 1\n",  # another schema's tag
    "a:\n\t- 1\n",  # a tab
    "%YAML 1.1\n---\na: yes\n",  # a directive
    "- a\n- b\n",  # not a mapping
    "a: [1, 2\n",  # broken
    "a: 1\n---\nb: 2\n",  # two documents
    "k: !!str &x v\n",  # a tag and an anchor on one node
    "a: &r [*r]\n",  # an alias inside itself
    "sql: |\n \n  select 1\n",  # a block scalar's first line only spaces: the round-trip loader refuses it
    "sql: >- # folded\n   \n  select 1\n",
]


@pytest.mark.parametrize("text", LEFT_TO_ROUND_TRIP)
def test_anything_else_is_left_to_the_round_trip_loader(text: str) -> None:
    assert _fast(text) is None


def test_a_file_gets_one_answer_whatever_else_it_holds() -> None:
    """The same block scalar with or without an unrelated empty value (which alone sends a file to the
    round-trip loader) is refused alike, never read one way and refused the other."""
    alone = yaml_loader.parse_yaml("sql: |\n \n  select 1\n", "p.yml")[1]
    beside = yaml_loader.parse_yaml("sql: |\n \n  select 1\nnote:\n", "p.yml")[1]
    assert [p.code for p in alone] == [p.code for p in beside] == ["PZ0101"]


def test_errors_are_the_round_trip_loaders_words_at_its_place() -> None:
    _, problems = yaml_loader.parse_yaml("name: a\nvars:\n  x: 1\n  x: 2\n", "p.yml")
    assert [(p.code, p.place.line, p.place.col) for p in problems] == [("PZ0101", 4, 3)]
    assert 'duplicate key "x"' in problems[0].message


def test_parse_yaml_takes_the_libyaml_path_for_a_plain_file(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_round_trip() -> Any:
        raise AssertionError("the round-trip loader was used")

    monkeypatch.setattr(yaml_loader, "_yaml", no_round_trip)
    doc, problems = yaml_loader.parse_yaml("a: 1\nb:\n  - x\n", "p.yml")
    assert doc is not None and not problems
    assert doc.data == {"a": 1, "b": ["x"]}
    assert doc.locate(("b", 0)) == (3, 5)


_SCALARS = [
    "x",
    "two words",
    "'q'",
    '"d\\tq"',
    "1",
    "-3",
    "0x1F",
    "012",
    "2.5",
    "-1e3",
    ".inf",
    ".NaN",
    "true",
    "False",
    "null",
    "~",
    "2024-01-01",
    "é",
    "[1, 'a']",
    "{k: v}",
    "[]",
    "{}",
    "a != b",
    "&a v",
    "*a",
]
_KEYS = ["a", "b", "key", "1", "2.0", "true", "null", "'q k'", '"k2"', "k-3", "é"]


def _document(rng: random.Random, indent: str = "", depth: int = 0) -> str:
    lines, used = [], set()
    for _ in range(rng.randint(1, 4)):
        key = rng.choice(_KEYS)
        if key in used:
            continue
        used.add(key)
        roll = rng.random()
        if roll < 0.5 or depth > 2:
            lines.append(f"{indent}{key}: {rng.choice(_SCALARS)}" + rng.choice(["", "  # c"]))
        elif roll < 0.75:
            lines.append(f"{indent}{key}:\n" + _document(rng, indent + rng.choice(["  ", "    "]), depth + 1))
        else:
            items = [f"{indent}  - {rng.choice(_SCALARS)}" for _ in range(rng.randint(1, 3))]
            lines.append(f"{indent}{key}:\n" + "\n".join(items))
        if rng.random() < 0.2:
            lines.append(rng.choice(["", "# comment"]))
    return "\n".join(lines)


def test_generated_documents_parse_alike_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(22)
    taken = 0
    for _ in range(400):
        text = _document(rng) + "\n"
        if "*a" in text and "&a" not in text.split("*a")[0]:
            continue  # an alias before its anchor: an error either way
        if _fast(text) is None:
            continue
        _same(text, monkeypatch)
        taken += 1
    assert taken > 200
