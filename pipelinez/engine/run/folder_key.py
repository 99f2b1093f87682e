"""The content of a project folder as a digest, computed without loading the project: the bytes of
project.yml, pz.lock and every project file the loader finds (found as it finds them), the size and
modification time of every other entry up to MAX_ENTRIES (`.pz/` and `.git/` apart). Shared by the
facade's in-memory compile cache and the persistent validation cache. Inside `walk_once()` the files read
for the key are also what the loader loads (`snapshot`): one discovery and one read of the project files
per command, and a result stored under the key is the compile of exactly the bytes the key was made of.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipelinez.config.discovery import Snapshot, discover, snapshot_paths
from pipelinez.core.installed import installed_digest
from pipelinez.core.lockfile import LOCK_FILE

if TYPE_CHECKING:
    from pipelinez.config.model import Project

# the other files of the folder enter by their size and modification time, up to this many entries (a
# larger folder is not cached: walking it could cost more than compiling)
MAX_ENTRIES = 50_000
_SKIPPED_DIRS = frozenset({".pz", ".git"})


class Digest:
    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    def feed(self, *parts: object) -> None:
        for part in parts:
            data = part if isinstance(part, bytes) else repr(part).encode()
            self._hash.update(len(data).to_bytes(8, "big") + data)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def feed_versions(digest: Digest) -> None:
    """Every installed distribution: DuckDB, every connector's, their versions and origins
    (`core.installed`, read from the metadata folders' names and stats, not through `importlib.metadata`)."""
    digest.feed("installed", installed_digest())


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def connection_values(project: Project) -> list[str]:
    """Every string of the sources' and sinks' connection blocks (paths among them)."""
    specs = [*project.sources.values(), *project.sinks.values()]
    return sorted({s for spec in specs for s in _strings(spec.connection)})


def paths_digest(root: Path, values: list[str]) -> str:
    """Where each value leads as a path resolved against the project root (links followed) and what is
    there (a folder outside the project, or a link out of it, retargeted is another project)."""
    digest = Digest()
    for value in values:
        try:
            path = os.path.realpath(root / value)
            stat = os.stat(path)
            digest.feed(value, path, stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
        except (OSError, ValueError):
            digest.feed(value, None)
    return digest.hexdigest()


@dataclass
class _Walked:
    """One walk of a project folder: the loader's files (discovered and read), their digest, and the
    digest of the rest (project.yaml, pz.lock, every other entry by name, size and modification time)."""

    snapshot: Snapshot
    loaded: str
    rest: str
    walkable: bool
    handed: bool = False  # a loader took `snapshot`: it loaded those bytes


_walks = threading.local()  # .memo: {(root, fresh): _Walked} inside walk_once()


@contextlib.contextmanager
def walk_once() -> Iterator[None]:
    """Inside, the project folder is walked and read once per root (`feed_tree`): a command that keys the
    same folder for several caches before it compiles (`pz validate`: the stored validation, then the
    compile cache) pays for one walk, and the loader loads the bytes that walk read (`snapshot`). A check
    that the folder did not change meanwhile asks `fresh`: done once, after the compile, for every check of
    the scope (the compile cache's, the stored validation's); it reads the loader's files again only when
    the loader did not load them from the snapshot. The scope must close before anything else reads the
    folder."""
    outer = getattr(_walks, "memo", None)
    if outer is None:
        _walks.memo = {}
    try:
        yield
    finally:
        if outer is None:
            _walks.memo = None


def snapshot(root: Path) -> Snapshot | None:
    """The files the walk of `root` inside `walk_once()` read, for the loader to load (None: no such walk).
    Taken, the fresh check trusts the snapshot's bytes to be what was compiled."""
    memo: dict[tuple[str, bool], _Walked] | None = getattr(_walks, "memo", None)
    walked = None if memo is None else memo.get((os.fspath(root), False))
    if walked is None:
        return None
    walked.handed = True
    return walked.snapshot


def feed_tree(digest: Digest, root: Path, *, fresh: bool = False) -> bool:
    """The project files' bytes and the folder's other entries as one part of `digest`; False when the
    folder is too large to walk. Walked once inside `walk_once()`, and once more for the `fresh` checks
    after the compile (the loader's files read again only when it did not load the walk's snapshot)."""
    memo: dict[tuple[str, bool], _Walked] | None = getattr(_walks, "memo", None)
    at = (os.fspath(root), fresh)
    found = None if memo is None else memo.get(at)
    if found is None:
        before = None if memo is None or not fresh else memo.get((at[0], False))
        if before is not None and before.handed and not before.snapshot.read_elsewhere:
            files = before.snapshot  # what was loaded and compiled: those bytes, whatever the disk holds now
            loaded = before.loaded
        else:
            files = read_project_files(root)
            loaded = _loaded_digest(files)
        rest = Digest()
        for path in (root / "project.yaml", root / LOCK_FILE):
            rest.feed("file", os.fspath(path), read_bytes(path))
        found = _Walked(files, loaded, "", feed_folder(rest, root, files.contents))
        found.rest = rest.hexdigest()
        if memo is not None:
            memo[at] = found
    digest.feed("tree", found.loaded, found.rest)
    return found.walkable


def read_project_files(root: Path) -> Snapshot:
    """The files the loader reads, found as it finds them (links followed, walks bounded), and their bytes."""
    files = discover(root)
    return Snapshot(files, {path: read_bytes(path) for path in snapshot_paths(files)})


def _loaded_digest(files: Snapshot) -> str:
    digest = Digest()
    for path, data in files.contents.items():
        digest.feed("file", os.fspath(path), data)
    digest.feed("problems", [(d.code, d.message) for d in files.files.problems])
    return digest.hexdigest()


def feed_folder(digest: Digest, root: Path, read: Mapping[Path, bytes | None] | None = None) -> bool:
    """Every other entry of the folder, by name, size and modification time (links by their target, not
    walked); False when it holds more than MAX_ENTRIES. The files in `read` enter by name only: their
    bytes are in the key already (`_loaded_digest`)."""
    known = frozenset(os.fspath(path) for path in read) if read else frozenset()
    seen = 0
    for folder, dirs, files in os.walk(root):
        if folder == os.fspath(root):
            dirs[:] = [d for d in dirs if d not in _SKIPPED_DIRS]
        dirs.sort()
        seen += len(dirs) + len(files)
        if seen > MAX_ENTRIES:
            return False
        digest.feed("dir", folder, sorted(files))
        for name in sorted(files):
            path = os.path.join(folder, name)
            if path not in known:
                digest.feed(name, _stat(path))
        for name in dirs:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                digest.feed("link", name, _link(path))
    return True


def _stat(path: str) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


def _link(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def read_bytes(path: Path) -> bytes | None:
    """A regular file's bytes (never a named pipe's: reading one would block); None for anything else.
    Read through the descriptor, without Python's buffered file object (once per project file per key)."""
    name = os.fspath(path)
    try:
        if not stat.S_ISREG(os.stat(name).st_mode):
            return None
        fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):  # replaced by something else since the stat
            return None
        data = os.read(fd, status.st_size + 1)
        if len(data) <= status.st_size:  # a regular file's short read is its end
            return data
        chunks = [data]  # it grew since the fstat: read on to the end
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
