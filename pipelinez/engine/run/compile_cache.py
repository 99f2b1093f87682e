"""The facade's compile cache: a compiled project kept by its content, so that a plan then a run, or a project
re-opened in the same process, compile once.

The key is everything a compile reads: the project folder (the bytes of project.yml, pz.lock and every project
file the loader finds under sources/, sinks/, pipelines/, docs/, macros/ and tests/, found as it finds them;
the size and modification time of every other file, data and outputs included, and every folder and link,
up to MAX_ENTRIES; `.pz/` apart from the schemas `--connect` cached), the `--var` values, the values of the
environment variables the project declares, the committed watermarks the compile binds (none for a full
refresh), and the pz and connector versions. A hit is taken only while
what connectors told of the datasets' columns without connecting (files outside the folder included) still
holds. A project with `engine.external_access` is never cached: its dry compile may read any file.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path

from pipelinez import __version__
from pipelinez.compile.compiler import CompileResult, compile_project, static_schema_lookup
from pipelinez.compile.nodes import SourceLoadNode
from pipelinez.config.discovery import PROJECT_FILE, discover
from pipelinez.config.model import Project
from pipelinez.connectors import registry
from pipelinez.core.lockfile import LOCK_FILE
from pipelinez.core.run_state import Watermark

# the other files of the folder enter by their size and modification time, up to this many entries (a
# larger folder is not cached: walking it could cost more than compiling)
MAX_ENTRIES = 50_000
_SKIPPED_DIRS = frozenset({".pz", ".git"})


class _Digest:
    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    def feed(self, *parts: object) -> None:
        for part in parts:
            data = part if isinstance(part, bytes) else repr(part).encode()
            self._hash.update(len(data).to_bytes(8, "big") + data)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def content_key(
    project: Project,
    overrides: Mapping[str, str] | None,
    environ: Mapping[str, str] | None,
    watermarks: Mapping[tuple[str, str], Watermark],
) -> str | None:
    """The content key of compiling `project` with these values and watermarks; None: not cacheable."""
    if project.engine.external_access:
        return None
    digest = _Digest()
    digest.feed("pz", __version__, str(project.root))
    for name, connector in sorted(registry.installed().items()):
        digest.feed(name, connector.distribution, connector.version)
    _feed_project_files(digest, project.root)
    if not _feed_folder(digest, project.root):
        return None
    digest.feed("schemas", _read(project.state_dir / "target" / "schemas.json"))
    digest.feed("vars", sorted((overrides or {}).items()))
    env = os.environ if environ is None else environ
    digest.feed("env", [(name, env.get(name)) for name in sorted(project.env)])
    digest.feed("watermarks", sorted((key, repr(mark)) for key, mark in watermarks.items()))
    return digest.hexdigest()


def _feed_project_files(digest: _Digest, root: Path) -> None:
    """The bytes of the files the loader reads, found as it finds them (links followed, walks bounded)."""
    files = discover(root)
    found = [*files.sources, *files.sinks, *files.pipelines, *files.sidecars, *files.docs, *files.macros]
    found += files.tests
    for path in [root / PROJECT_FILE, root / "project.yaml", root / LOCK_FILE, *found]:
        digest.feed("file", os.fspath(path), _read(path))
    digest.feed("problems", [(d.code, d.message) for d in files.problems])


def _feed_folder(digest: _Digest, root: Path) -> bool:
    """Every other entry of the folder, by name, size and modification time (links by their target, not
    walked); False when it holds more than MAX_ENTRIES."""
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
            digest.feed(name, _stat(os.path.join(folder, name)))
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


def _read(path: Path) -> bytes | None:
    """A regular file's bytes (never a named pipe's: reading one would block); None for anything else."""
    try:
        return path.read_bytes() if path.is_file() else None
    except OSError:
        return None


def _still_told(result: CompileResult) -> bool:
    """Whether every dataset's connector still tells the columns it told when `result` was compiled."""
    if not result.told or result.dag is None:
        return True
    lookup = static_schema_lookup(result.dag.project)
    for node in result.dag.nodes.values():
        if isinstance(node, SourceLoadNode):
            key = f"{node.source}.{node.dataset}"
            if key in result.told and lookup(node) != result.told[key]:
                return False
    return True


class CompileCache:
    """Compiles by content: the same key (and connectors telling the same) gives the same `CompileResult`.
    Holds the `size` most recent compiles; safe to share between threads (two that miss both compile)."""

    def __init__(self, size: int = 8):
        self.size = size
        self._entries: OrderedDict[str, CompileResult] = OrderedDict()
        self._guard = threading.Lock()

    def compile(
        self,
        project: Project,
        overrides: Mapping[str, str] | None,
        environ: Mapping[str, str] | None,
        watermarks: Mapping[tuple[str, str], Watermark],
    ) -> CompileResult:
        key = content_key(project, overrides, environ, watermarks)
        if key is None:
            return compile_project(project, overrides, environ, watermarks)
        with self._guard:
            cached = self._entries.get(key)
        if cached is not None and _still_told(cached):
            with self._guard:
                if key in self._entries:
                    self._entries.move_to_end(key)
            return cached
        result = compile_project(project, overrides, environ, watermarks)
        with self._guard:
            self._entries[key] = result
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return result

    def clear(self) -> None:
        with self._guard:
            self._entries.clear()


# one per process: every `Project` of the process shares it
COMPILES = CompileCache()
