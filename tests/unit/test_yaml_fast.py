"""config.yaml_fast reads the plainest project YAML exactly as ruamel's round-trip reading does (data, scalar
types, every key's and value's line:col), and declines everything else, which ruamel then reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelinez.config import yaml_loader
from pipelinez.config.yaml_fast import read_plain

REPO = Path(__file__).resolve().parents[2]

READ = [
    "name: shop\n",
    'name: shop  # a comment\nvars:\n  min: { type: decimal, default: "0" }\n',
    "# head\n\nconnector: localfiles\nconnection: { root: data }\ndatasets:\n"
    "  orders:\n    format: csv\n    path: orders.csv\n"
    "    columns: { id: bigint, amount: 'decimal(12,2)' }\n",
    "checks:\n  - not_null: { columns: [id, amount] }\n  - unique: { columns: [id] }\n"
    "  - accepted_values: { column: grp, values: [0, 1, -2, 3.5, true, False, null, ~, 'x', \"y\"] }\n"
    '  - expression: { sql: "amount >= 0", name: non_negative }\n',
    "checks:\n- not_null:\n    columns:\n    - id\n    - amount\n  severity: warn\n"
    "- unique: {columns: [id]}\n",
    "a:\n  b:\n    c: [1, [2, 3], {d: e}]\n  f: it's here\n  g: 'it''s'\n  h: yes\n  i: on\n  j: a:b\n",
    "outputs:\n  p_00000: { format: parquet }\n  p_00010: {}\n  p_00020: { format: csv, header: true }\n",
    "list:\n  - a\n  -   b\n  - [c]\n  - { d: 1 }\n  - e: 1\n    f: [2]\n",
]

DECLINED = [
    "a: &x 1\nb: *x\n",  # anchors, aliases
    "a: !tag x\n",
    "a: |\n  text\n",
    "a: >\n  text\n",
    "a:\n",  # a null value
    "a: 2024-01-01\n",  # a timestamp
    "a: 0o17\n",
    "a: 1_000\n",
    "a: .inf\n",
    "a: plain\n  continued\n",
    "a: 1\na: 2\n",  # a duplicate key: ruamel words it
    "a: caf\u00e9\n",
    "a:\tb\n",
    "a: b\r\n",
    "a: \x00\n",
    "---\na: 1\n",
    "a: [1, 2\n",
    "a: [1, 2,]\n",
    "a: 'open\n",
    '"a": 1\n',
    "True: 1\n",
    "- a\n",
    "a: b: c\n",
    'a: "esc\\n"\n',
    "  a: 1\n",
    "a: 1\n  b: 2\n",
]


def _ruamel(text: str) -> tuple[object, dict, dict]:
    doc, problems = yaml_loader._parse_ruamel(text, "x.yml")
    assert doc is not None, problems
    return doc.data, dict(doc.positions.keys), dict(doc.positions.values)


def _same(text: str) -> None:
    fast = read_plain(text)
    assert fast is not None, text
    data, keys, values = _ruamel(text)
    assert json.dumps(fast[0]) == json.dumps(data)  # the same values and scalar types (1 vs 1.0 vs true)
    assert fast[0] == data
    assert fast[1] == keys
    assert fast[2] == values


@pytest.mark.parametrize("text", READ)
def test_read_as_ruamel_reads_it(text: str) -> None:
    _same(text)


@pytest.mark.parametrize("text", DECLINED)
def test_declined_and_left_to_ruamel(text: str) -> None:
    assert read_plain(text) is None
    fast_free = yaml_loader._parse_ruamel(text, "x.yml")
    assert yaml_loader.parse_yaml(text, "x.yml") == fast_free


def test_every_yaml_file_of_the_repository_it_reads_it_reads_as_ruamel() -> None:
    files = [
        p
        for folder in ("tests", "examples", "pipelinez")
        for p in sorted((REPO / folder).rglob("*.y*ml"))
        if p.suffix in (".yml", ".yaml")
    ]
    read = 0
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        if read_plain(text) is not None and yaml_loader._parse_ruamel(text, "x.yml")[0] is not None:
            _same(text)
            read += 1
    assert read >= len(files) // 2, (read, len(files))


def test_a_plain_sidecar_is_read_without_ruamel(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> None:
        raise AssertionError("ruamel was used")

    monkeypatch.setattr(yaml_loader, "_yaml", refuse)
    doc, problems = yaml_loader.parse_yaml(READ[3], "pipelines/p.yml")
    assert problems == [] and doc is not None
    assert doc.data["checks"][2]["accepted_values"]["values"][:4] == [0, 1, -2, 3.5]
    assert doc.locate(("checks", 3, "expression", "sql"), at="value") == (5, 24)
