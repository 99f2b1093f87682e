"""The fast way to parse a plain project YAML file: libyaml's parser composes it, positions included.

ruamel.yaml's round-trip loader (`yaml_loader`) is pure Python: scanning, parsing and building its commented
containers cost about 2 ms for a four-check sidecar. ruamel's own C extension (`ruamel.yaml.clib`, libyaml)
scans, parses and composes the node tree about twenty times faster, with ruamel's YAML 1.2 resolver tagging
each scalar. Every node keeps the mark where it starts, which is where the round-trip loader puts a key, a
value or a sequence item (`node.start_mark`), so the tree is walked here into the same plain data and the
same positions, and no file is read twice.

Only what this walk reproduces exactly is taken this way: a single document whose top level is a mapping,
scalars of the core schema (str, null, bool, int, float, timestamp kept as its text) none of them empty
(`key:` with nothing after it: libyaml marks the empty value where the key ends, the round-trip loader
where the next token starts), plain keys, no merge key, no tag of another schema, no duplicate key, within
the depth and node limits, and text with no character the round-trip reader treats differently (a tab, a
carriage return, a Unicode line separator, a byte order mark, a directive, anything non-printable).
Everything else, and any error, gives None: the round-trip loader parses the file and says what is wrong,
in its words, at its line and column. tests/unit/test_yaml_fast.py holds the two paths to the same answers.
(One difference, for the better: the round-trip loader fails on a comment line right before a block
scalar's text, "overlap in comment", a valid file libyaml reads. A block scalar whose first line holds only
spaces, which the round-trip loader refuses and libyaml reads, is left to the round-trip loader: a file
never gets one answer or the other by what else it holds.)
"""

from __future__ import annotations

import math
import re
from typing import Any

from ruamel.yaml.constructor import SafeConstructor
from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode
from ruamel.yaml.resolver import VersionedResolver

from pipelinez.config.positions import JsonPath, LineCol, Positions
from pipelinez.core.json_types import JsonObject

try:  # ruamel.yaml.clib: optional, the round-trip loader does everything without it
    from _ruamel_yaml import CParser
except ImportError:  # pragma: no cover - depends on the installation
    CParser = None

_CORE = "tag:yaml.org,2002:"
_BOOLS = SafeConstructor.bool_values
# what the C reader and the pure one may count or accept differently: left to the round-trip loader
# (and a node with both a tag and an anchor: libyaml marks it at the first, the round-trip loader at the
# anchor)
_LEFT_TO_ROUND_TRIP = re.compile(
    "[\t\r\x85\u2028\u2029\ufeff]|^%|(?:^|[ \\[{,])[!&][^ \n]*[ ]+[!&]"
    "|[^\x0a\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
    # a block scalar whose first line holds only spaces: libyaml reads it, the round-trip loader refuses it
    # ("more indented follow up line"), so one file never gets both answers by what else it holds
    "|[|>][-+0-9]*[ ]*(?:#[^\n]*)?\n[ ]+\n",
    re.M,
)


class _Unusual(Exception):
    """Something the walk does not reproduce: the round-trip loader parses the file."""


def available() -> bool:
    return CParser is not None


def fast_parse(text: str, file: str, max_depth: int, max_nodes: int) -> tuple[JsonObject, Positions] | None:
    """`text` as plain data and positions, as the round-trip loader gives them; None: parse it that way."""
    if CParser is None or _LEFT_TO_ROUND_TRIP.search(text):
        return None
    try:
        root = _compose(text)
        if not isinstance(root, MappingNode) or root.tag != _CORE + "map":
            return None
        walk = _Walk(file, max_depth, max_nodes)
        data = walk.mapping(root, (), 0)
    except (_Unusual, RecursionError):
        return None
    except Exception:  # the parser's error (or anything unforeseen): the round-trip loader's words
        return None
    return data, Positions(file, walk.keys, walk.values)


if CParser is not None:

    class _Composer(CParser, VersionedResolver):  # type: ignore[misc]
        """libyaml's parser composing nodes, ruamel's YAML 1.2 resolver tagging the plain scalars (as
        ruamel's own C loader is built)."""

        def __init__(self, text: str):
            CParser.__init__(self, text)
            # no loader to ask for a %YAML directive (a file with one is not taken here): YAML 1.2, and no
            # reference to itself (pz compiles with the cyclic collector paused: a cycle would outlive it)
            VersionedResolver.__init__(self, version=None, loadumper=None)


def _compose(text: str) -> Any:
    composer = _Composer(text)
    try:
        return composer.get_single_node()
    finally:
        composer.dispose()


class _Walk:
    """The node tree into plain data, recording where each key, value and item starts (1-based)."""

    def __init__(self, file: str, max_depth: int, max_nodes: int):
        self.keys: dict[JsonPath, LineCol] = {(): (1, 1)}
        self.values: dict[JsonPath, LineCol] = {(): (1, 1)}
        self.max_depth = max_depth
        self.budget = max_nodes
        self.active: set[int] = set()

    def value(self, node: Any, path: JsonPath, depth: int) -> Any:
        self.budget -= 1
        if self.budget < 0:
            raise _Unusual
        if isinstance(node, ScalarNode):
            return _scalar(node)
        if isinstance(node, MappingNode) and node.tag == _CORE + "map":
            return self.mapping(node, path, depth)
        if isinstance(node, SequenceNode) and node.tag == _CORE + "seq":
            return self.sequence(node, path, depth)
        raise _Unusual

    def mapping(self, node: MappingNode, path: JsonPath, depth: int) -> JsonObject:
        self._enter(node, depth)
        result: JsonObject = {}
        raw: set[Any] = set()  # the keys as built: 1, 1.0 and true are one key to a Python dict
        keys, values = self.keys, self.values
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                raise _Unusual
            built = _scalar(key_node)
            key = _key_text(built)
            if key in result or built in raw:
                raise _Unusual  # the round-trip loader names the duplicate
            raw.add(built)
            child = (*path, key)
            mark = key_node.start_mark
            keys[child] = (mark.line + 1, mark.column + 1)
            mark = value_node.start_mark
            values[child] = (mark.line + 1, mark.column + 1)
            result[key] = self.value(value_node, child, depth + 1)
        self.active.discard(id(node))
        return result

    def sequence(self, node: SequenceNode, path: JsonPath, depth: int) -> list[Any]:
        self._enter(node, depth)
        result: list[Any] = []
        for index, item in enumerate(node.value):
            child = (*path, index)
            mark = item.start_mark
            self.keys[child] = self.values[child] = (mark.line + 1, mark.column + 1)
            result.append(self.value(item, child, depth + 1))
        self.active.discard(id(node))
        return result

    def _enter(self, node: Any, depth: int) -> None:
        if depth > self.max_depth or id(node) in self.active:  # too deep, or an alias inside itself
            raise _Unusual
        self.active.add(id(node))


def _scalar(node: ScalarNode) -> Any:
    """The scalar as the round-trip constructor builds it, then made plain (`yaml_loader._scalar`)."""
    tag, text = node.tag or "", node.value
    if not tag.startswith(_CORE) or (not text and not node.style):
        raise _Unusual  # another schema's tag; an empty value, which the two parsers place apart
    kind = tag[len(_CORE) :]
    if kind == "str" or kind == "timestamp":  # timestamps stay the text the user wrote
        return text
    if kind == "null":
        return None
    if kind == "bool":
        found = _BOOLS.get(text.lower())
        if found is None:
            raise _Unusual
        return found
    if kind == "int":
        return _int(text)
    if kind == "float":
        return _float(text)
    raise _Unusual  # binary, set, omap, merge, value: the round-trip constructor's


def _int(text: str) -> int:
    digits = text.replace("_", "")
    sign = -1 if digits[:1] == "-" else 1
    digits = digits[1:] if digits[:1] in "+-" else digits
    if digits[:2] in ("0b", "0x", "0o"):
        return sign * int(digits[2:], {"0b": 2, "0x": 16, "0o": 8}[digits[:2]])
    if ":" in digits:
        raise _Unusual
    return sign * int(digits)


def _float(text: str) -> float:
    digits = text.replace("_", "").lower()
    sign = -1 if digits[:1] == "-" else 1
    digits = digits[1:] if digits[:1] in "+-" else digits
    if digits == ".inf":
        return sign * math.inf
    if digits == ".nan":
        return math.nan
    if ":" in digits:
        raise _Unusual
    return sign * float(digits)


def _key_text(value: Any) -> str:
    """A mapping key built from its scalar, as text, as `yaml_loader._key_text` writes it."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
