"""The facade's compile cache: a compiled project kept by its content, so that a plan then a run, or a project
re-opened in the same process, compile once.

The key is everything a compile reads: the project folder (the bytes of project.yml, pz.lock and every project
file the loader finds under sources/, sinks/, pipelines/, docs/, macros/ and tests/, found as it finds them;
the size and modification time of every other file, data and outputs included, and every folder and link,
up to MAX_ENTRIES; `.pz/` apart from the schemas `--connect` cached), the `--var` values, the values of the
environment variables the project declares, the committed watermarks the compile binds (none for a full
refresh), the pz version and every installed distribution (`core.installed`: DuckDB and the connectors, their
versions and origins), and where the connections' paths lead. The
folder's part is keyed before the project is loaded and walked again after the compile: a compile whose
folder changed meanwhile is not kept. A hit is taken only while
what connectors told of the datasets' columns without connecting (files outside the folder included) still
holds. A project with `engine.external_access` is never cached: its dry compile may read any file.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path

from pipelinez import __version__
from pipelinez.compile.compiler import CompileResult, compile_project, static_schema_lookup
from pipelinez.compile.dag import has_ids, with_ids
from pipelinez.compile.nodes import SourceLoadNode
from pipelinez.config.model import Project
from pipelinez.core.run_state import Watermark
from pipelinez.engine.run.folder_key import (
    Digest,
    connection_values,
    feed_tree,
    feed_versions,
    paths_digest,
    read_bytes,
)


def tree_key(root: Path, *, fresh: bool = False) -> str | None:
    """What of the key is read without loading the project: the folder (`folder_key.feed_tree`), the schemas
    `--connect` cached, the pz version and what is installed (`core.installed`). Taken BEFORE the project is
    loaded, and again (`fresh`) after its compile: an edit in between must not store the old compile under the
    new content's key. None: the folder is too large to walk."""
    digest = Digest()
    digest.feed("pz", __version__, str(root))
    feed_versions(digest)
    if not feed_tree(digest, root, fresh=fresh):
        return None
    digest.feed("schemas", read_bytes(root / ".pz" / "target" / "schemas.json"))
    return digest.hexdigest()


def content_key(
    project: Project,
    tree: str | None,
    overrides: Mapping[str, str] | None,
    environ: Mapping[str, str] | None,
    watermarks: Mapping[tuple[str, str], Watermark],
) -> str | None:
    """The content key of compiling `project` (its folder keyed `tree` before it was loaded) with these
    values and watermarks; None: not cacheable."""
    if tree is None or project.engine.external_access:
        return None
    digest = Digest()
    digest.feed("tree", tree)
    digest.feed("vars", sorted((overrides or {}).items()))
    env = os.environ if environ is None else environ
    digest.feed("env", [(name, env.get(name)) for name in sorted(project.env)])
    digest.feed("watermarks", sorted((key, repr(mark)) for key, mark in watermarks.items()))
    digest.feed("paths", paths_digest(project.root, connection_values(project)))
    return digest.hexdigest()


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


def _given_ids(result: CompileResult) -> CompileResult:
    """`result` with every node's content-hash id (the same result when it has them)."""
    dag = result.dag
    if dag is None or has_ids(dag.nodes):
        return result
    return dataclasses.replace(result, dag=dataclasses.replace(dag, nodes=with_ids(dag.nodes)))


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
        tree: str | None,
        ids: bool = True,
    ) -> CompileResult:
        """`tree`: `tree_key` of the folder taken before `project` was loaded. A compile is kept only when
        the folder is unchanged after it (a fresh walk). `ids=False`: the nodes may come without their ids
        (a validate's compile makes none); a compile kept without them is given them when asked with."""
        key = content_key(project, tree, overrides, environ, watermarks)
        if key is None:
            return compile_project(project, overrides, environ, watermarks, ids=ids)
        with self._guard:
            cached = self._entries.get(key)
        if cached is not None and _still_told(cached):
            if ids:
                cached = _given_ids(cached)
            with self._guard:
                if key in self._entries:
                    self._entries[key] = cached
                    self._entries.move_to_end(key)
            return cached
        result = compile_project(project, overrides, environ, watermarks, ids=ids)
        if tree_key(project.root, fresh=True) != tree:  # edited meanwhile: the result may be of either
            return result
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
