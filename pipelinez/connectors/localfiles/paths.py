"""Where localfiles reads and writes: the root folder, paths under it and globs (formats: `files.formats`).

Paths in a dataset or output are relative to the instance's `root` (itself relative to the project) and
must stay under it: an absolute path or a `..` that climbs out of root is refused by `validate` and again
at run time. A dataset `path` is one file, a folder (its files), or a glob (`*`, `?`, `[..]`, `**` for any
depth); hidden files (leading dot) never match, so pz's own temp files are never read.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from pipelinez.connectors.files.formats import has_glob
from pipelinez.core.diagnostics import PzConnectorError


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
