"""Where localfiles reads and writes: the root folder, paths under it, globs and formats.

Paths in a dataset or output are relative to the instance's `root` (itself relative to the project) and
must stay under it: an absolute path or a `..` that climbs out of root is refused by `validate` and again
at run time. A dataset `path` is one file, a folder (its files), or a glob (`*`, `?`, `[..]`, `**` for any
depth); hidden files (leading dot) never match, so pz's own temp files are never read.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from pipelinez.core.diagnostics import PzConnectorError

FORMATS = ("csv", "parquet", "json")
GLOB_CHARS = frozenset("*?[")
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


def is_templated(value: object) -> bool:
    return isinstance(value, str) and "{{" in value


def has_glob(path: str) -> bool:
    return any(ch in GLOB_CHARS for ch in path)


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


def escape_problem(path: str) -> str | None:
    """Why `path` (relative to root) would leave root, or None when it stays under it."""
    if not path:
        return "path is empty"
    if "\x00" in path:
        return "path holds a NUL byte, which no file name can hold"
    if os.path.isabs(path) or path.startswith(("/", "\\")):
        return f"path '{path}' is absolute; write it relative to the connection's root"
    normal = os.path.normpath(path)
    if normal == ".." or normal.startswith(".." + os.sep) or normal.startswith("../"):
        return f"path '{path}' climbs out of the connection's root with '..'"
    return None


def resolve_root(project_dir: Path, root: object) -> Path:
    """The root folder as an absolute path (lexical: symlinks are not resolved)."""
    text = str(root) if root not in (None, "") else "."
    return Path(os.path.abspath(project_dir / text))


def under_root(root: Path, path: str) -> Path:
    """`path` joined to root; PzConnectorError when it would leave root."""
    problem = escape_problem(path)
    if problem:
        raise PzConnectorError(problem, code="PZ0304")
    full = Path(os.path.normpath(root / path))
    if full != root and root not in full.parents:
        raise PzConnectorError(f"path '{path}' is not under root {root}", code="PZ0304")
    return full


def list_files(root: Path, pattern: str) -> list[str]:
    """Files the dataset `path` names, as sorted POSIX paths relative to root (empty when none)."""
    full = under_root(root, pattern.rstrip("/\\") or ".")
    if full.is_dir():
        found = [p for p in full.iterdir() if p.is_file() and not p.name.startswith(".")]
    elif full.is_file():
        found = [full]
    elif has_glob(pattern):
        rel_pattern = os.path.relpath(full, root)  # root itself may hold glob characters: match under it
        matches = glob.glob(rel_pattern, root_dir=root, recursive=True)
        found = [root / p for p in matches if os.path.isfile(root / p)]
    else:
        found = []
    rel = {p.relative_to(root).as_posix() for p in found if root in p.parents}
    return sorted(rel)


def duckdb_path(path: Path) -> str:
    """A file path DuckDB reads as that one file: glob characters in the name are escaped (`[*]`),
    because DuckDB expands any path holding them as a pattern."""
    text = str(path)
    if not has_glob(text):
        return text
    return "".join(f"[{ch}]" if ch in GLOB_CHARS else ch for ch in text)
