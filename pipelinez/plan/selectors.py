"""One selector term, as dbt spells it: `[@][N+]body[+N]`, where body is a node name (with `*`/`?`
wildcards), a folder or file of the project, or `method:value` with method source, sink, tag, path or
resource_type. A term is parsed into a `Term`, then matched against the compiled graph.

A pipeline matched by name, wildcard or tag brings its checks and sink writes (everything its file defines).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pipelinez.compile.nodes import CheckNode, Node, PipelineNode, SinkWriteNode, SourceLoadNode
from pipelinez.core.diagnostics import Diagnostic, error
from pipelinez.core.vocabulary import NodeKind

METHODS = ("source", "sink", "tag", "path", "resource_type")
RESOURCE_TYPES = {
    "source": NodeKind.SOURCE_LOAD,
    "pipeline": NodeKind.PIPELINE,
    "check": NodeKind.CHECK,
    "sink": NodeKind.SINK_WRITE,
}
_SHAPE = re.compile(r"^(?P<at>@)?(?:(?P<up>\d*)\+)?(?P<body>.*?)(?:\+(?P<down>\d*))?$")
_GLOB = re.compile(r"[*?\[]")
ALL = -1  # a `+` without a number: every generation


@dataclass(frozen=True)
class Term:
    text: str  # as written
    method: str  # "name" or one of METHODS
    value: str
    up: int | None = None  # generations of ancestors (ALL: every one), None: none
    down: int | None = None
    at: bool = False  # @x: x, its descendants and their ancestors


def _bad(text: str, why: str, next_step: str = "") -> Diagnostic:
    return error("PZ0252", f"selector '{text}' {why}", next_step=next_step, file="command line")


def _depth(raw: str | None) -> int | None:
    if raw is None:
        return None
    return int(raw) if raw else ALL


def parse_term(text: str) -> Term | Diagnostic:
    """The term, or the PZ0252 error saying why it can't be read."""
    shape = _SHAPE.match(text)
    assert shape is not None  # the pattern matches every string
    body = shape["body"]
    if not body:
        return _bad(text, "names nothing", "write a name, a folder or method:value, e.g. tag:daily")
    if shape["at"] and shape["up"] is not None:
        return _bad(text, "has both @ and a leading +", "write @x (x, its descendants and their ancestors)")
    method, value = ("name", body)
    if ":" in body:
        method, _, value = body.partition(":")
        if method not in METHODS:
            return _bad(text, f"has the unknown method '{method}:'", f"use one of {', '.join(METHODS)}")
        if not value:
            return _bad(text, f"has no value after '{method}:'")
        if method == "resource_type" and value not in RESOURCE_TYPES:
            return _bad(text, "names no resource type", f"use one of {', '.join(RESOURCE_TYPES)}")
    return Term(text, method, value, _depth(shape["up"]), _depth(shape["down"]), bool(shape["at"]))


def _glob(pattern: str, value: str) -> bool:
    return fnmatch.fnmatchcase(value, pattern)


def _dotted(value: str) -> tuple[str, str]:
    """`ecom.raw_orders` -> (ecom, raw_orders); `ecom` -> (ecom, *)."""
    first, _, second = value.partition(".")
    return first, second or "*"


def _under(file: str | None, folder: str) -> bool:
    if file is None:
        return False
    return file == folder or file.startswith(folder + "/")


def _folder(root: Path, value: str) -> str | None:
    """A bare term that names a file or folder of the project (or a folder under pipelines/), relative."""
    clean = PurePosixPath(value.strip("/")).as_posix().removeprefix("./")
    if clean in ("", ".") or ".." in PurePosixPath(clean).parts:
        return None
    for candidate in (clean, f"pipelines/{clean}"):
        if (root / candidate).exists():
            return candidate
    return None


def _with_files(found: set[str], nodes: dict[str, Node]) -> set[str]:
    """Matched pipelines bring their checks and sink writes."""
    pipelines = {n for n in found if isinstance(nodes[n], PipelineNode)}
    return found | {
        n
        for n, node in nodes.items()
        if (isinstance(node, SinkWriteNode) and node.pipeline in pipelines)
        or (isinstance(node, CheckNode) and node.target in pipelines)
    }


def base_matches(term: Term, nodes: dict[str, Node], root: Path) -> set[str]:
    """The nodes the term's body selects, before its graph operators."""
    value = term.value
    if term.method == "source":
        src, dataset = _dotted(value)
        return {
            n
            for n, node in nodes.items()
            if isinstance(node, SourceLoadNode) and _glob(src, node.source) and _glob(dataset, node.dataset)
        }
    if term.method == "sink":
        sink, output = _dotted(value)
        return {
            n
            for n, node in nodes.items()
            if isinstance(node, SinkWriteNode) and _glob(sink, node.sink) and _glob(output, node.output)
        }
    if term.method == "tag":
        return _with_files({n for n, node in nodes.items() if any(_glob(value, t) for t in node.tags)}, nodes)
    if term.method == "resource_type":
        return {n for n, node in nodes.items() if node.kind == RESOURCE_TYPES[value]}
    if term.method == "path":
        folder = PurePosixPath(value.strip("/")).as_posix().removeprefix("./")
        return {n for n, node in nodes.items() if _under(node.place.file, folder)}
    if _GLOB.search(value):
        return _with_files({n for n in nodes if _glob(value, n)}, nodes)
    if value in nodes:
        return _with_files({value}, nodes)
    named = _folder(root, value)
    if named is not None:
        return {n for n, node in nodes.items() if _under(node.place.file, named)}
    return set()
