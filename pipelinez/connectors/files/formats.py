"""File formats, globs and the option rules every file-like connector applies alike.

A dataset's `format` defaults to what its path's extension names (`.csv`/`.tsv`, `.parquet`/`.pq`,
`.json`/`.jsonl`/`.ndjson`, each optionally compressed: `.gz`, `.zst`, `.bz2`, `.lz4`). CSV options
(`delimiter`, `header`, `quote`, `null`, `dateformat`, `timestampformat`) apply to csv only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

FORMATS = ("csv", "parquet", "json")
OUTPUT_FORMATS = ("parquet", "csv", "json")
GLOB_CHARS = frozenset("*?[")
CSV_ONLY = ("delimiter", "header", "quote", "null", "dateformat", "timestampformat")
_SUFFIX_FORMATS = {
    ".csv": "csv",
    ".tsv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
}
_COMPRESSION_SUFFIXES = (".gz", ".zst", ".bz2", ".lz4")

# A problem with one key: (message, key path)
Issue = tuple[str, tuple[str, ...]]


def is_templated(value: object) -> bool:
    return isinstance(value, str) and "{{" in value


def has_glob(path: str) -> bool:
    return any(ch in GLOB_CHARS for ch in path)


def split_glob(path: str) -> tuple[str, tuple[str, ...]]:
    """`path` as its leading '/'-separated segments before the first one holding a glob character (the
    folder a glob stays inside; the whole path when it has none) and the glob's segments from there."""
    segments = path.replace("\\", "/").split("/")
    first = next((i for i, seg in enumerate(segments) if has_glob(seg)), len(segments))
    return "/".join(segments[:first]), tuple(seg for seg in segments[first:] if seg)


def format_of_path(path: str) -> str | None:
    """The format a path's extension names (`orders.csv.gz` -> csv), or None."""
    name = path.rstrip("/\\").rsplit("/", 1)[-1].lower()
    for suffix in _COMPRESSION_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    for suffix, fmt in _SUFFIX_FORMATS.items():
        if name.endswith(suffix):
            return fmt
    return None


def safe_token(text: str) -> str:
    """A run id reduced to characters safe in a file name."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:64] or "run"


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob over '/'-separated names as a regex: `*` and `?` stay within one segment, `**` spans any
    number of segments (`a/**/b` also matches `a/b`), `[..]` is a class (`[!..]` negated)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            out.append("[" + ("^" if negate else "") + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def glob_escaped(text: str) -> str:
    """A file name DuckDB reads as that one file: glob characters are escaped (`[*]`), because DuckDB
    expands any path holding them as a pattern (local paths and object URIs alike)."""
    if not has_glob(text):
        return text
    return "".join(f"[{ch}]" if ch in GLOB_CHARS else ch for ch in text)


def dataset_issues(block: dict[str, Any], path_problem: Callable[[str], str | None]) -> list[Issue]:
    """The format rules of one dataset block (values rendered); `path_problem` adds the connector's own
    rule for where a path may point."""
    issues: list[Issue] = []
    path = block.get("path")
    if isinstance(path, str) and not is_templated(path):
        problem = root_output_problem(path) or path_problem(path)
        if problem:
            issues.append((problem, ("path",)))
    fmt = block.get("format")
    if fmt is None and isinstance(path, str) and not is_templated(path):
        fmt = format_of_path(path)
        if fmt is None:
            issues.append(
                (
                    f"cannot tell the format of '{path}' from its extension; "
                    "set format: csv, parquet or json",
                    ("format",),
                )
            )
    if fmt in ("parquet", "json"):
        for key in CSV_ONLY:
            if key in block:
                issues.append((f"'{key}' is a csv option, but this dataset's format is {fmt}", (key,)))
    for key in ("delimiter", "quote"):
        value = block.get(key)
        if (
            isinstance(value, str)
            and not is_templated(value)
            and value
            and (len(value) != 1 or not value.isascii())
        ):
            issues.append((f"{key} must be a single ASCII character, got {value!r}", (key,)))
    delimiter, quote = block.get("delimiter", ","), block.get("quote", '"')
    if isinstance(delimiter, str) and delimiter and delimiter == quote:
        issues.append((f"delimiter and quote are both {delimiter!r}", ("quote",)))
    return issues


def root_output_problem(path: str) -> str | None:
    """Why an output `path` cannot be used because it names the top of the connection itself (`/`, `.`,
    `./`): an output is a folder of files that a replace empties and refills, so it would take over the whole
    bucket, container or root folder."""
    segments = [seg for seg in path.replace("\\", "/").split("/") if seg not in ("", ".")]
    if segments:
        return None
    return (
        f"path '{path}' is the top of the connection (the whole bucket, container or root folder): an output "
        "is a folder of files that a replace empties and refills, so pz never writes there; name a folder "
        "under it (path: exports/orders)"
    )


def output_issues(block: dict[str, Any], path_problem: Callable[[str], str | None]) -> list[Issue]:
    """The format rules of one output block (values rendered)."""
    issues: list[Issue] = []
    fmt = block.get("format")
    if fmt is None and isinstance(block.get("path"), str):
        fmt = format_of_path(block["path"])
    if block.get("partition_by") and fmt == "json":
        issues.append(
            (
                "partition_by is available for parquet and csv outputs (DuckDB cannot partition json "
                "output); write parquet or csv, or drop partition_by",
                ("partition_by",),
            )
        )
    path = block.get("path")
    if isinstance(path, str) and not is_templated(path):
        problem = root_output_problem(path) or path_problem(path)
        if problem:
            issues.append((problem, ("path",)))
        named = format_of_path(path)
        fmt = block.get("format")
        if isinstance(fmt, str) and not is_templated(fmt) and named and named != fmt:
            issues.append((f"path '{path}' names a {named} file, but format is {fmt}", ("format",)))
    return issues
