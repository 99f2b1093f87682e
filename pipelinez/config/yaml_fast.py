"""A fast reading of the plainest project YAML, the same data and positions as ruamel's round-trip reading.

ruamel.yaml's round-trip loader is pure Python and keeps comments: about 5 ms for a four-check sidecar, and
most of a cold `pz validate` of a project with thousands of them. Most project files use a small part of
YAML: block mappings and sequences, one-line flow collections, one-line quoted or plain scalars, comments.
`read_plain` reads exactly that part and declines (None) anything else, which `yaml_loader.parse_yaml` then
gives to ruamel as before, so errors and unusual YAML are read and worded as they always were:

- the text is printable ASCII (no tabs, carriage returns or other control characters), without document
  markers (`---`, `...`) or directives;
- keys are plain words (`[A-Za-z_][A-Za-z0-9_.$/-]*`) that YAML 1.2 reads as strings, each once a mapping;
- a value on the key's line is a quoted scalar (single-quoted, or double-quoted without escapes), a flow
  collection closed on that line, or a plain scalar not continued on the next line; block scalars (`|`,
  `>`), anchors, aliases, tags and complex keys are declined;
- a plain scalar is a string unless YAML 1.2 could read it otherwise: `true`/`false`, the nulls and plain
  integers and decimals are read as ruamel reads them; any other scalar starting as a number, `.`, `<`, `=`
  or `~` might be an int, float, timestamp or merge key in ruamel's reading, and is declined.

Positions are ruamel's: a key where its text starts, a value where its node starts (a nested block at its
first key or `-`), a sequence item where its node starts; `tests/unit/test_yaml_fast.py` compares both
readings on every YAML file of the repository's tests and examples.
"""

from __future__ import annotations

import re
from typing import Any

from pipelinez.config.positions import JsonPath, LineCol

MAX_DEPTH = 64  # yaml_loader's limits: past them ruamel's reading says why
MAX_NODES = 200_000
_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_.$/-]*):(?:[ ]+|$)")
_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?(?:0|[1-9][0-9]*)\.[0-9]+")
_NOT_KEYS = frozenset({"true", "True", "TRUE", "false", "False", "FALSE", "null", "Null", "NULL"})
_TRUE, _FALSE = frozenset({"true", "True", "TRUE"}), frozenset({"false", "False", "FALSE"})
_NULLS = frozenset({"null", "Null", "NULL", "~"})
_MAYBE_TYPED = frozenset("-+0123456789.<=~")  # first characters of ruamel's non-string implicit types
_INDICATORS = frozenset("&*!|>%@`?:,]}#")  # a plain scalar may not start with one (or declined)
_UNPRINTABLE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")  # tabs, carriage returns, control characters
_FLOW_END = re.compile(r"[,\[\]{}]| #|: |:(?=[,\]}])")


class Declined(Exception):
    """The text is outside what this reader reads: ruamel reads it."""


Line = tuple[int, int, str]  # 1-based line number, indent, content (comment-only and blank lines left out)


def read_plain(
    text: str,
) -> tuple[dict[str, Any], dict[JsonPath, LineCol], dict[JsonPath, LineCol]] | None:
    """(data, key positions, value positions) of a YAML text in the plain subset, else None."""
    if not text.isascii() or _UNPRINTABLE.search(text):
        return None
    try:
        lines = _lines(text)
        if not lines or lines[0][1] != 0 or lines[0][2].startswith("- "):
            raise Declined
        reader = _Reader(lines)
        data, end = reader.mapping(0, 0, (), 0)
        if end != len(lines) or len(reader.keys) > MAX_NODES:
            raise Declined
    except (Declined, RecursionError):
        return None
    return data, reader.keys, reader.values


def _lines(text: str) -> list[Line]:
    found: list[Line] = []
    for number, raw in enumerate(text.split("\n"), 1):
        content = raw.lstrip(" ")
        if not content or content.startswith("#"):
            continue
        if raw.startswith(("---", "...", "%")):
            raise Declined
        found.append((number, len(raw) - len(content), content.rstrip(" ")))
    return found


class _Reader:
    def __init__(self, lines: list[Line]):
        self.lines = lines
        self.keys: dict[JsonPath, LineCol] = {(): (1, 1)}
        self.values: dict[JsonPath, LineCol] = {(): (1, 1)}

    def mapping(self, at: int, indent: int, path: JsonPath, depth: int, first: str | None = None) -> Any:
        """The block mapping whose keys stand at `indent` from line `at` (`first`: the content of its first
        line after a sequence's `- `); (data, index of the line after it)."""
        if depth > MAX_DEPTH:
            raise Declined
        result: dict[str, Any] = {}
        i = at
        while i < len(self.lines):
            number, ind, content = self.lines[i]
            if i == at and first is not None:
                content = first
            elif ind != indent:
                if ind > indent:
                    raise Declined  # a continuation or a bad indent: ruamel says which
                break
            match = _KEY.match(content)
            if match is None:
                raise Declined
            key = match.group(1)
            if key in result or key in _NOT_KEYS:
                raise Declined
            child = (*path, key)
            self.keys[child] = (number, indent + 1)
            rest = content[match.end() :]
            if rest and not rest.startswith("#"):
                col = indent + 1 + match.end()
                result[key] = self.inline(rest, number, col, child, depth + 1)
                self.values[child] = (number, col)
                i += 1
                continue
            result[key], i = self.nested(i + 1, indent, child, depth + 1)
        return result, i

    def nested(self, at: int, indent: int, path: JsonPath, depth: int) -> Any:
        """The value of a key whose line ends at its colon: a block below it, or null."""
        if at < len(self.lines):
            number, ind, content = self.lines[at]
            is_item = content == "-" or content.startswith("- ")
            if ind > indent or (ind == indent and is_item):
                self.values[path] = (number, ind + 1)
                if is_item:
                    return self.sequence(at, ind, path, depth)
                return self.mapping(at, ind, path, depth)
        raise Declined  # a null value: ruamel places it (kept to ruamel)

    def sequence(self, at: int, indent: int, path: JsonPath, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise Declined
        result: list[Any] = []
        i = at
        while i < len(self.lines):
            number, ind, content = self.lines[i]
            if ind != indent or not content.startswith("- "):
                if ind > indent or (ind == indent and content == "-"):
                    raise Declined
                break
            rest = content[2:].lstrip(" ")
            col = indent + 1 + len(content) - len(rest)
            child = (*path, len(result))
            self.keys[child] = self.values[child] = (number, col)
            if _KEY.match(rest):
                item, i = self.mapping(i, col - 1, child, depth + 1, first=rest)
            elif rest.startswith("- ") or rest.startswith("#"):
                raise Declined
            else:
                item = self.inline(rest, number, col, child, depth + 1)
                i += 1
            result.append(item)
        return result, i

    def inline(self, text: str, number: int, col: int, path: JsonPath, depth: int) -> Any:
        """A value on one line: a flow collection, a quoted scalar or a plain scalar (and a comment)."""
        if text[0] in "[{'\"":
            value, end = self.flow(text, 0, number, col, path, depth)
            rest = text[end:]
            if rest.strip(" ") and not rest.startswith(" #"):
                raise Declined
            return value
        cut = text.find(" #")
        scalar = (text if cut < 0 else text[:cut]).rstrip(" ")
        if ": " in scalar or scalar.endswith(":"):
            raise Declined
        return _plain(scalar)

    def flow(self, text: str, at: int, number: int, col: int, path: JsonPath, depth: int) -> tuple[Any, int]:
        """The flow node starting at text[at] (col: where text[0] is); (value, index after it)."""
        if depth > MAX_DEPTH:
            raise Declined
        opener = text[at]
        if opener in "'\"":
            return _quoted(text, at)
        if opener not in "[{":
            end = _FLOW_END.search(text, at)
            stop = len(text) if end is None else end.start()
            return _plain(text[at:stop].rstrip(" ")), stop
        closer = "]" if opener == "[" else "}"
        result: Any = [] if opener == "[" else {}
        i = _skip(text, at + 1)
        while i < len(text) and text[i] != closer:
            if opener == "{":
                match = _KEY.match(text, i)
                key = match.group(1) if match else None
                if match is None or key is None or key in result or key in _NOT_KEYS:
                    raise Declined
                child: JsonPath = (*path, key)
                self.keys[child] = (number, col + i)
                i = _skip(text, match.end())
            else:
                child = (*path, len(result))
                self.keys[child] = (number, col + i)
            if i >= len(text) or text[i] in ",]}":
                raise Declined  # an empty entry or value
            self.values[child] = (number, col + i)
            value, i = self.flow(text, i, number, col, child, depth + 1)
            if opener == "{":
                result[child[-1]] = value
            else:
                result.append(value)
            i = _skip(text, i)
            if i < len(text) and text[i] == ",":
                i = _skip(text, i + 1)
                if i < len(text) and text[i] == closer:
                    raise Declined  # a trailing comma
            elif i >= len(text) or text[i] != closer:
                raise Declined
        if i >= len(text):
            raise Declined  # not closed on this line
        return result, i + 1


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] == " ":
        i += 1
    return i


def _quoted(text: str, at: int) -> tuple[str, int]:
    quote = text[at]
    i = at + 1
    parts: list[str] = []
    while True:
        end = text.find(quote, i)
        if end < 0:
            raise Declined  # not closed on this line
        parts.append(text[i:end])
        if quote == "'" and text.startswith("''", end):
            parts.append("'")
            i = end + 2
            continue
        break
    value = "".join(parts)
    if quote == '"' and "\\" in value:
        raise Declined
    return value, end + 1


def _plain(scalar: str) -> Any:
    if not scalar or scalar[0] in _INDICATORS or scalar[0] in "[{'\"":
        raise Declined
    if scalar in _TRUE:
        return True
    if scalar in _FALSE:
        return False
    if scalar in _NULLS:
        return None
    if _INT.fullmatch(scalar):
        return int(scalar)
    if _FLOAT.fullmatch(scalar):
        return float(scalar)
    if scalar[0] in _MAYBE_TYPED:
        raise Declined
    return scalar
