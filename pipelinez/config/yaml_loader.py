"""Parsing project YAML with ruamel.yaml's round-trip loader, keeping where every key and value is (a plain
file is composed by libyaml instead when ruamel.yaml.clib is installed: `yaml_fast`, the same answers).

`parse_yaml` turns text into a `YamlDoc`: plain Python data (dict, list, str, int, float, bool, None) for
the schema to check, and the 1-based line/column of every mapping key, mapping value and sequence item.
Nothing here raises on bad input: broken YAML is a PZ0101 diagnostic, an unreadable file a PZ0108.
Timestamps stay the text the user wrote (`2024-01-01` is the string "2024-01-01"); types are the
compile layer's business.
"""

from __future__ import annotations

import datetime as dt
import re
import warnings
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq, TaggedScalar
from ruamel.yaml.constructor import RoundTripConstructor
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.reader import ReaderError
from ruamel.yaml.scalarbool import ScalarBoolean

from pipelinez.config.positions import JsonPath, LineCol, Positions
from pipelinez.config.textfile import read_text
from pipelinez.config.yaml_doc import YamlDoc
from pipelinez.config.yaml_doc import position_of as position_of  # where tests and callers found it
from pipelinez.config.yaml_fast import fast_parse
from pipelinez.core.diagnostics import Diagnostic, error
from pipelinez.core.json_types import JsonObject
from pipelinez.core.printable import excerpt

MAX_DEPTH = 64
MAX_NODES = 200_000
SCAN_DEPTH = 2 * MAX_DEPTH  # nesting refused before parsing: ruamel slows down superlinearly past it


def load_yaml_file(path: Path, file: str) -> tuple[YamlDoc | None, list[Diagnostic]]:
    """Read and parse `path`, shown to users as `file` (project-relative). Never raises."""
    text, problems = read_text(path, file)
    if text is None:
        return None, problems
    return parse_yaml(text, file)


def parse_yaml(text: str, file: str) -> tuple[YamlDoc | None, list[Diagnostic]]:
    """Parse `text` whose top level must be a mapping. Never raises: problems come back as PZ0101."""
    deep = _too_deep(text)
    if deep is not None:
        return None, [
            error(
                "PZ0101",
                f"{file}: nested more than {MAX_DEPTH} levels deep",
                file=file,
                line=deep[0],
                col=deep[1],
            )
        ]
    fast = fast_parse(text, file, MAX_DEPTH, MAX_NODES)
    if fast is not None:  # libyaml composed it, positions and all (plain files: most of a project's)
        return YamlDoc(file, fast[0], fast[1]), []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded = _yaml().load(text)
    except MarkedYAMLError as exc:
        return None, [_syntax_error(file, exc)]
    except ReaderError as exc:
        line, col = _line_col(text, exc.position)
        return None, [
            error(
                "PZ0101",
                f"{file} holds a character YAML does not allow ({exc.reason})",
                file=file,
                line=line,
                col=col,
            )
        ]
    except RecursionError:
        return None, [error("PZ0101", f"{file} is nested too deeply to be a project file", file=file)]
    except Exception as exc:  # any parser failure is the user's YAML, never a crash
        return None, [error("PZ0101", f"{file} cannot be parsed as YAML: {exc}", file=file)]

    if loaded is None:
        return None, [
            error(
                "PZ0101",
                f"{file} is empty; it must be a mapping of keys (key: value)",
                file=file,
                line=1,
                col=1,
                next_step="write the file's keys, or delete the file",
            )
        ]
    if not isinstance(loaded, CommentedMap):
        return None, [
            error(
                "PZ0101",
                f"the top level of {file} must be a mapping of keys (key: value), not {_kind_of(loaded)}",
                file=file,
                line=1,
                col=1,
            )
        ]
    converter = _Converter(file)
    try:
        data = converter.mapping(loaded, (), 0)
    except _ShapeError as exc:
        line, col = converter.positions().locate(exc.path)
        return None, [error("PZ0101", f"{file}: {exc.message}", file=file, line=line, col=col)]
    except RecursionError:
        return None, [error("PZ0101", f"{file} is nested too deeply to be a project file", file=file)]
    return YamlDoc(file, data, converter.positions()), []


# --- parsing -------------------------------------------------------------------------------------


class _Constructor(RoundTripConstructor):
    """The round-trip constructor, except that timestamps stay the text the user wrote."""


def _timestamp_as_text(constructor: Any, node: Any) -> str:
    return str(node.value)


_Constructor.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)


def _yaml() -> Any:
    yaml = YAML(typ="rt", pure=True)
    yaml.Constructor = _Constructor
    yaml.allow_duplicate_keys = False
    return yaml


def _syntax_error(file: str, exc: MarkedYAMLError) -> Diagnostic:
    mark = exc.problem_mark or exc.context_mark
    line = mark.line + 1 if mark is not None else None
    col = mark.column + 1 if mark is not None else None
    problem = str(exc.problem or exc.context or "invalid YAML").strip()
    if "\\t" in problem or "\t" in problem:
        message = "a tab character here: YAML is indented with spaces only"
    elif "expected a single document" in str(exc.context):
        message = "a second YAML document ('---'): a project file holds exactly one"
    elif "duplicate key" in problem:
        key = problem.split(" with value ")[0].removeprefix("found duplicate key").strip().strip('"')
        message = f'duplicate key "{excerpt(key)}": each key may appear once per mapping'
    else:  # the parser's words, which may quote a token of the file (an alias name): kept short
        message = excerpt(problem, 120)
        if exc.context and exc.problem:
            message += f" ({excerpt(str(exc.context).strip(), 120)})"
    return error("PZ0101", f"invalid YAML: {message}", file=file, line=line, col=col)


_NESTING_CHARS = re.compile(r"['\"#\[\]{}]")


def _too_deep(text: str) -> LineCol | None:
    """Where flow (`[`, `{`) or block (indentation, `- `) nesting first exceeds SCAN_DEPTH, in one pass.

    Approximate on purpose (quoted scalars are skipped, block scalars are not): it only has to refuse
    what no project file needs, before the parser spends seconds on it."""
    indents: list[int] = []
    depth = 0  # flow nesting carries across lines
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(stripped)
        while indents and indents[-1] >= indent:
            indents.pop()
        indents.append(indent)
        dashes = len(stripped) - len(stripped.lstrip("- "))
        if len(indents) + dashes // 2 > SCAN_DEPTH:
            return lineno, indent + 1
        quote = ""
        for match in _NESTING_CHARS.finditer(stripped):
            ch = match.group()
            if quote:
                quote = "" if ch == quote else quote
            elif ch in "'\"":
                quote = ch
            elif ch == "#":
                break
            elif ch in "[{":
                depth += 1
                if depth + len(indents) > SCAN_DEPTH:
                    return lineno, indent + match.start() + 1
            else:
                depth = max(0, depth - 1)
    return None


def _line_col(text: str, index: int) -> LineCol:
    index = max(0, min(index, len(text)))
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def _kind_of(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str | TaggedScalar):
        return "a single string"
    return f"a single value ({value!r})"


# --- conversion to plain data --------------------------------------------------------------------


class _ShapeError(Exception):
    def __init__(self, message: str, path: JsonPath):
        super().__init__(message)
        self.message = message
        self.path = path


class _Converter:
    """Copies ruamel's round-trip tree into plain Python data, recording positions by JSON path."""

    def __init__(self, file: str):
        self.file = file
        self.keys: dict[JsonPath, LineCol] = {(): (1, 1)}
        self.values: dict[JsonPath, LineCol] = {(): (1, 1)}
        self.nodes = 0
        self.active: set[int] = set()

    def positions(self) -> Positions:
        return Positions(self.file, self.keys, self.values)

    def value(self, node: Any, path: JsonPath, depth: int) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _ShapeError(f"more than {MAX_NODES} values (aliases expanding too far?)", path)
        if isinstance(node, CommentedMap):
            return self.mapping(node, path, depth)
        if isinstance(node, CommentedSeq):
            return self.sequence(node, path, depth)
        return _scalar(node)

    def mapping(self, node: CommentedMap, path: JsonPath, depth: int) -> JsonObject:
        self._enter(node, path, depth)
        own = _node_pos(node)
        result: JsonObject = {}
        for raw_key in node:
            key = _key_text(raw_key)
            child = (*path, key)
            key_pos = _lc(node, "key", raw_key) or own
            self.keys[child] = key_pos
            if key in result:
                raise _ShapeError(f"key '{key}' appears twice in this mapping", child)
            self.values[child] = _lc(node, "value", raw_key) or key_pos
            result[key] = self.value(node[raw_key], child, depth + 1)
        self.active.discard(id(node))
        return result

    def sequence(self, node: CommentedSeq, path: JsonPath, depth: int) -> list[Any]:
        self._enter(node, path, depth)
        own = _node_pos(node)
        result: list[Any] = []
        for index, item in enumerate(node):
            child = (*path, index)
            pos = _lc(node, "item", index) or own
            self.keys[child] = pos
            self.values[child] = pos
            result.append(self.value(item, child, depth + 1))
        self.active.discard(id(node))
        return result

    def _enter(self, node: Any, path: JsonPath, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise _ShapeError(f"nested more than {MAX_DEPTH} levels deep", path)
        if id(node) in self.active:
            raise _ShapeError("an alias refers to a mapping or list that contains it (recursive alias)", path)
        self.active.add(id(node))


def _lc(node: Any, what: str, key: Any) -> LineCol | None:
    try:
        line, col = getattr(node.lc, what)(key)
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
    return int(line) + 1, int(col) + 1


def _node_pos(node: Any) -> LineCol:
    lc = getattr(node, "lc", None)
    line = getattr(lc, "line", None)
    col = getattr(lc, "col", None)
    if isinstance(line, int) and isinstance(col, int):
        return line + 1, col + 1
    return 1, 1


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return str(key)
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    scalar = _scalar(key)
    if isinstance(scalar, bool):
        return "true" if scalar else "false"
    return str(scalar)


def _scalar(node: Any) -> Any:
    if node is None:
        return None
    if isinstance(node, TaggedScalar):
        return str(node.value)
    if isinstance(node, str):
        return str(node)
    if isinstance(node, bool | ScalarBoolean):
        return bool(node)
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, dt.date | dt.datetime):
        return node.isoformat()
    if isinstance(node, bytes):
        return node.decode("utf-8", "replace")
    return str(node)
