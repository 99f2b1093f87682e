"""What is installed, as one digest, read without `importlib.metadata` (importing it and scanning every
distribution's metadata costs a replayed `pz validate` more than the rest of its key).

One `os.scandir` of each `sys.path` entry: every distribution's metadata folder (`name-version.dist-info`,
`.egg-info`) by name, so a version is in its name, with the folder's inode and modification time and those of
its `entry_points.txt` and `direct_url.json` (an install replaces the folder: a connector reinstalled from
another URL or commit under the same version is another folder), and every `.pth` and `.egg-link` file by
name, size and modification time (where an editable install points), and Python's own version (its standard
library). Every connector, DuckDB, Jinja and the YAML parser are among them. It changes whenever a
distribution is installed, removed, upgraded or reinstalled; it may change when nothing that matters did (a
miss, never a stale answer).
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from collections.abc import Sequence

_METADATA = (".dist-info", ".egg-info")
_POINTERS = (".pth", ".egg-link")
_INSIDE = ("entry_points.txt", "direct_url.json")


def installed_digest() -> str:
    """The digest of the distributions on this process's `sys.path`, computed once per `sys.path` (a
    process runs the code it imported first, whatever is installed later)."""
    return _digest_of(tuple(sys.path))


@functools.cache
def _digest_of(paths: tuple[str, ...]) -> str:
    return digest_of(paths)


def digest_of(paths: Sequence[str]) -> str:
    """The digest of the distributions found on `paths` (uncached), in their order. An entry without any
    (the working directory `python -m` puts first, a zip file, a path hook) adds nothing: the same
    distributions found from another directory are the same digest."""
    digest = hashlib.sha256(f"python {sys.version}\n".encode())  # the standard library is installed too
    for entry in paths:
        folder = os.path.abspath(entry or os.curdir)
        lines = _entries(folder)
        if lines:
            digest.update(f"path {len(folder)}:{folder}\n".encode("utf-8", "surrogateescape"))
        for line in lines:
            digest.update(line.encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def _entries(folder: str) -> list[str]:
    """One line per metadata folder or path file in `folder`, sorted; none for a file or a missing entry."""
    lines: list[str] = []
    try:
        with os.scandir(folder) as scan:
            for entry in scan:
                name = entry.name
                if name.endswith(_METADATA):
                    inside = " ".join(_stat(os.path.join(entry.path, part)) for part in _INSIDE)
                    lines.append(f"meta {len(name)}:{name} {_stat(entry.path)} {inside}\n")
                elif name.endswith(_POINTERS):
                    lines.append(f"pointer {len(name)}:{name} {_stat(entry.path)}\n")
    except OSError:  # a zip file, a path hook, a folder that is gone
        return []
    return sorted(lines)


def _stat(path: str) -> str:
    try:
        stat = os.stat(path)
    except OSError:
        return "-"
    return f"{stat.st_ino}/{stat.st_size}/{stat.st_mtime_ns}"
