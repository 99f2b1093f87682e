"""Tier 4's persistent bind cache, `.pz/target/binds.json`: what binding a query gave, by content.

A pipeline's bind depends on its SQL as rendered (vars, env values, macros and watermark literals already
in it) and on the column names and types of the tables it reads, nothing else (binding reads no data, and
no file: a project with `engine.external_access` is never cached). So an entry's key is the digest of the
pz and DuckDB versions, the SQL, and each input's name and columns with their types; its value is the
result's columns with their types, which in turn enter the keys of its readers. An edit that changes a
pipeline's result changes every reader's key; one that does not (a comment, a WHERE) stops there. A check
is cached the same way (its SQL and its inputs' columns), its value only that it bound; so is a source
dataset's CREATE TABLE (its contract), whose table is then made only when a bind reads it. Only what bound is
kept: an error is found again by binding again, never replayed. Nor is a pipeline that names a table bare
(neither a CTE nor one of its ref()/source() tables): that table's columns are not in its key.

The file is read once and written whole (a temporary file renamed over it) with the entries this compile
used, when more than 1/64 of them differ from the file's (`signed_cache.worth_writing`): until then it may
keep entries no longer used (keyed by content, never a wrong answer). A
file that is missing, corrupt, of another format or of another pz or DuckDB version is ignored (the cache
starts empty), never an error; one that cannot be written is left as it was.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipelinez import __version__
from pipelinez.core.signed_cache import worth_writing
from pipelinez.core.signed_cache import write_atomic as write_atomic  # where validate_cache finds it

FILE = "binds.json"
FORMAT = 2  # 2: keys hashed from the text of their parts, not their JSON
Columns = list[tuple[str, str]]  # (name, DuckDB type) of a table's columns, in order


def _versions() -> str:
    import duckdb

    return f"pz {__version__} {pz_fingerprint()}; duckdb {duckdb.__version__}"


@functools.cache
def pz_fingerprint() -> str:
    """A digest of the size and modification time of every module of pz: a pz edited in place (a
    development checkout) is another pz, whatever its version says."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    for folder, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(f for f in files if f.endswith((".py", ".json", ".yml", ".yaml"))):
            with contextlib.suppress(OSError):
                stat = os.stat(os.path.join(folder, name))
                digest.update(f"{folder}/{name} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


_ENCODER = json.JSONEncoder(separators=(",", ":"))  # one for every key (json.dumps would build one per call)


class BindCache:
    """The entries of `.pz/target/binds.json` (`folder`: the target folder; None: a cache that keeps
    nothing, for a compile that may read files)."""

    def __init__(self, folder: Path | None):
        self.folder = folder
        self.versions = _versions()
        # the file's entries as JSON gave them (lists), each turned into columns when a compile asks for it
        self._old: dict[str, Any] = _read(folder / FILE, self.versions) if folder else {}
        self._used: dict[str, Any] = {}
        # the digest of each column list seen, by the list's identity (the list kept, so its id stays its)
        self._digests: dict[int, tuple[Columns, str]] = {}
        versions = self.versions.encode("utf-8", "surrogatepass")
        self._base = hashlib.sha256(b"%d\n%s\n" % (len(versions), versions))

    def key(self, kind: str, sql: str, inputs: Sequence[tuple[str, Columns | None]]) -> str:
        """The content key of binding `sql` (a `pipeline` or a `check`) over `inputs` (name, columns). An
        input's columns enter it as their digest, worked out once per list: a pipeline's 120 columns are
        encoded once, not once for each of its readers."""
        named = sorted((name, self._columns_digest(columns)) for name, columns in inputs)
        digest = self._base.copy()  # the versions, hashed once
        # the kind is a fixed word, the SQL's length marks where it ends, the rest is the repr of a sorted
        # list of (str, str | None) pairs: no two contents give one text
        data = f"{kind}\n{len(sql)}\n{sql}\n{named!r}"
        digest.update(data.encode("utf-8", "surrogatepass"))
        return digest.hexdigest()

    def _columns_digest(self, columns: Columns | None) -> str | None:
        if columns is None:
            return None
        known = self._digests.get(id(columns))
        if known is not None and known[0] is columns:
            return known[1]
        digest = hashlib.sha256(_ENCODER.encode(columns).encode("utf-8")).hexdigest()
        self._digests[id(columns)] = (columns, digest)
        return digest

    def get(self, key: str) -> Columns | None:
        """The columns a bind with this key gave (a check: []); None when not cached."""
        if self.folder is None:
            return None
        found = self._old.get(key)
        columns = None if found is None else _columns(found)
        if columns is not None:
            self._used[key] = found  # as read: an entry used unchanged is no change (`worth_writing`)
        return columns

    def put(self, key: str, columns: Columns) -> None:
        if self.folder is not None:
            self._used[key] = columns

    def save(self) -> None:
        """Write the entries this compile used, atomically; too few changed or unwritable: nothing written."""
        if self.folder is None or not worth_writing(self._old, self._used):  # enough changed
            return
        data = {"format": FORMAT, "versions": self.versions, "binds": self._used}
        with contextlib.suppress(OSError):
            self.folder.mkdir(parents=True, exist_ok=True)
            write_atomic(self.folder / FILE, json.dumps(data, separators=(",", ":")))


def _read(path: Path, versions: str) -> dict[str, Any]:
    """The file's entries as JSON gives them; {} for a file that is missing, not ours, corrupt or of other
    versions. An entry is checked when a compile asks for it (`_columns`): most are asked for once."""
    try:
        data = json.loads(path.read_bytes())
        if data.get("format") != FORMAT or data.get("versions") != versions:
            return {}
        binds = data["binds"]
        return binds if isinstance(binds, dict) else {}
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        return {}


def _columns(entry: Any) -> Columns | None:
    """An entry read back: [[name, type], ...] as columns (as the file gave them, each part as text); None
    (a miss) for anything else."""
    try:
        return [(str(name), str(kind)) for name, kind in entry]
    except (TypeError, ValueError):
        return None
