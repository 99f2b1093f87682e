"""Which files of an output folder (or objects of an output prefix) pz wrote, so a replace removes only those.

Every write of a file output leaves a manifest next to its data, `.pz-manifest.json` at the top of the
folder/prefix: the relative paths of the data files pz wrote there. A replace writes it with the new files
(inside the temp folder a localfiles swap moves in whole; around the promote of an object store: first the
union of the old and new files, then the new files only, so a crash at any point leaves a manifest that
names every pz file present); an append registers its new file before the file appears. The leading dot keeps
it out of every reader that skips hidden files (pz's own globs and folder reads, Spark, Hive).

Before a replace empties the folder, the folder's files are classified:
- with a manifest: the files it names are pz's, and so are pz's own hidden temp files (`.pz-tmp-`);
- without one (empty, or written by a pz older than the manifest): the folder is pz's when every file in it
  has a name pz gives its files (`part-<n>.<ext>`, `part-<run>-<n>.<ext>`, inside `<col>=<value>/` folders
  for a partitioned output); otherwise none of its files is taken for pz's.
Anything else is a foreign file: the replace is refused (PZ0530) unless the output sets
`foreign_files: replace`, which lets the replace remove them with the rest. A manifest pz cannot read is
PZ0532. An append deletes nothing and so is never refused.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from pipelinez.core.diagnostics import PzConnectorError

MANIFEST = ".pz-manifest.json"
MANIFEST_VERSION = 1
FOREIGN_OK = "replace"  # the `foreign_files:` value that lets a replace remove files pz did not write
_PZ_DATA = re.compile(r"part-[A-Za-z0-9_.-]*\.(parquet|csv|json)")
_PARTITION_DIR = re.compile(r"[^/=]+=[^/]*")
_SHOWN = 5  # foreign files a message names


def pz_named(rel: str) -> bool:
    """Whether `rel` (a '/'-separated path under the folder) has a name pz gives a data file."""
    *folders, name = rel.split("/")
    return bool(_PZ_DATA.fullmatch(name)) and all(_PARTITION_DIR.fullmatch(f) for f in folders)


_OS_CLUTTER = frozenset({".DS_Store", "Thumbs.db", "desktop.ini"})


def os_clutter(rel: str) -> bool:
    """A file an operating system's file browser leaves in any folder it shows (macOS Finder's .DS_Store and
    ._* files, Windows' Thumbs.db and desktop.ini): nobody's data, so a replace removes it with the folder."""
    name = rel.rsplit("/", 1)[-1]
    return name in _OS_CLUTTER or name.startswith("._")


def pz_scratch(rel: str) -> bool:
    """pz's own leftovers inside the folder (an interrupted append's hidden temp file or folder) and the
    manifest itself."""
    return rel == MANIFEST or any(seg.startswith(".") and "pz-tmp-" in seg for seg in rel.split("/"))


def manifest_bytes(files: list[str] | set[str]) -> bytes:
    body = {"version": MANIFEST_VERSION, "written_by": "pz", "files": sorted(files)}
    return json.dumps(body, indent=1).encode()


def read_manifest(data: bytes, where: str) -> frozenset[str]:
    """The files a manifest names; PZ0532 when it is not one pz can read."""
    try:
        body = json.loads(data)
        if not isinstance(body, dict) or body.get("version") != MANIFEST_VERSION:
            raise ValueError(f"version {body.get('version') if isinstance(body, dict) else None!r}")
        files = body["files"]
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise ValueError("'files' is not a list of paths")
        return frozenset(files)
    except (ValueError, KeyError, TypeError) as exc:
        raise PzConnectorError(
            f"the manifest {where} that records which files pz wrote there cannot be read ({exc}); nothing "
            "was written (a folder without a manifest that holds only pz-named part-* files counts as pz's)",
            code="PZ0532",
        ) from None


@dataclass(frozen=True)
class Ownership:
    """An output folder's files: those pz wrote and the others."""

    owned: frozenset[str]  # files pz wrote (an append keeps them in the manifest)
    foreign: tuple[str, ...]  # files pz did not write, sorted


def classify(files: list[str], manifest: bytes | None, where: str) -> Ownership:
    """Split a folder's files (every file under it, '/'-separated relative paths) into pz's and foreign."""
    present = [f for f in files if not pz_scratch(f) and not os_clutter(f)]
    if manifest is not None:
        named = read_manifest(manifest, where)
        owned = frozenset(f for f in present if f in named)
    elif all(pz_named(f) for f in present):
        owned = frozenset(present)
    else:
        owned = frozenset()
    return Ownership(owned, tuple(sorted(f for f in present if f not in owned)))


def refuse_foreign(where: str, foreign: tuple[str, ...]) -> None:
    """PZ0530 when a replace of the folder `where` would remove the files `foreign`, which pz did not
    write."""
    if not foreign:
        return
    shown = ", ".join(foreign[:_SHOWN]) + (
        f" and {len(foreign) - _SHOWN} more" if len(foreign) > _SHOWN else ""
    )
    raise PzConnectorError(
        f"{where} holds {len(foreign)} file(s) pz did not write ({shown}); a replace empties the folder, so "
        "nothing was written",
        code="PZ0530",
    )


def check_replace(files: list[str], manifest: bytes | None, where: str, foreign_ok: bool) -> None:
    """PZ0530 (PZ0532) when a replace of the folder `where` would remove files pz did not write, unless the
    output opts in (then the manifest is not read)."""
    if not foreign_ok:
        refuse_foreign(where, classify(files, manifest, where).foreign)
