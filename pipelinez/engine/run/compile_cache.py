"""The facade's compile cache: a compiled project kept by its content, so that a plan then a run, or a project
re-opened in the same process, compile once.

The key is everything a compile reads: the project folder (the bytes of project.yml, pz.lock and every file
under sources/, sinks/, pipelines/ and docs/; the size and modification time of every other file and the
name of every folder, data and outputs included; `.pz/` apart from the schemas `--connect` cached), the
`--var` values, the values of the environment variables the project declares, the committed watermarks
the compile binds (none for a full refresh), and the pz and connector versions. A hit is taken only while
what connectors told of the datasets' columns without connecting (files outside the folder included) still
holds. A project with `engine.external_access` is never cached: its dry compile may read any file.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path

from pipelinez import __version__
from pipelinez.compile.compiler import CompileResult, compile_project, static_schema_lookup
from pipelinez.compile.nodes import SourceLoadNode
from pipelinez.config.model import Project
from pipelinez.connectors import registry
from pipelinez.core.run_state import Watermark

# read whole: what the project says; any other file enters by its size and modification time
_READ_DIRS = frozenset({"sources", "sinks", "pipelines", "docs"})
_READ_FILES = frozenset({"project.yml", "project.yaml", "pz.lock"})
_SKIPPED_DIRS = frozenset({".pz", ".git", "__pycache__"})


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
    _feed_folder(digest, project.root)
    digest.feed("schemas", _read(project.state_dir / "target" / "schemas.json"))
    digest.feed("vars", sorted((overrides or {}).items()))
    env = os.environ if environ is None else environ
    digest.feed("env", [(name, env.get(name)) for name in sorted(project.env)])
    digest.feed("watermarks", sorted((key, repr(mark)) for key, mark in watermarks.items()))
    return digest.hexdigest()


def _feed_folder(digest: _Digest, root: Path) -> None:
    for folder, dirs, files in os.walk(root):
        here = Path(folder).relative_to(root)
        if here == Path("."):
            dirs[:] = [d for d in dirs if d not in _SKIPPED_DIRS]
        else:
            dirs[:] = [d for d in dirs if d not in ("__pycache__",)]
        dirs.sort()
        digest.feed("dir", here.as_posix())
        read = bool(here.parts) and here.parts[0] in _READ_DIRS
        for name in sorted(files):
            path = Path(folder) / name
            if read or (here == Path(".") and name in _READ_FILES):
                digest.feed("file", name, _read(path))
                continue
            try:
                stat = path.stat()
                digest.feed("stat", name, stat.st_size, stat.st_mtime_ns)
            except OSError:
                digest.feed("gone", name)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
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
    Holds the `size` most recent compiles."""

    def __init__(self, size: int = 8):
        self.size = size
        self._entries: OrderedDict[str, CompileResult] = OrderedDict()

    def compile(
        self,
        project: Project,
        overrides: Mapping[str, str] | None,
        environ: Mapping[str, str] | None,
        watermarks: Mapping[tuple[str, str], Watermark],
    ) -> CompileResult:
        key = content_key(project, overrides, environ, watermarks)
        cached = self._entries.get(key) if key is not None else None
        if cached is not None and _still_told(cached):
            self._entries.move_to_end(key)  # type: ignore[arg-type]
            return cached
        result = compile_project(project, overrides, environ, watermarks)
        if key is not None:
            self._entries[key] = result
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return result

    def clear(self) -> None:
        self._entries.clear()


# one per process: every `Project` of the process shares it
COMPILES = CompileCache()
