"""`pz validate` of an unchanged project from `.pz/target/validate.json`, without loading or compiling it.

The file holds the last valid validation (its node count and warnings) under a content key: the bytes of
every project file, the size and modification time of every other entry of the folder and of pz's own
modules, the schemas `--connect` cached, the `--var` values, the pz version and every installed distribution
(`core.installed`: DuckDB's and each connector's version and origin among them, read from the metadata folders
without `importlib.metadata`; the key of `compile_cache.content_key`, computed without loading the project).
Besides it the entry keeps what only the loaded project names, which must still match: a digest of the values
of the environment variables the project declares, salted by `.pz/validate.key` (0600, outside `.pz/target`),
and where each string of the connections leads as a path (resolved, links followed) with its stat.
Never stored: a validation with errors, one with `--connect`, a project with
`engine.external_access` (binding may read any file), one whose datasets' columns a connector told (a file
outside the folder may change them), one that reads incrementally (its committed watermarks, wherever the
state lives, enter its validation), and one whose folder changed while it compiled. A file that is missing,
corrupt or foreign is a miss, never an error; it is written atomically.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipelinez import __version__
from pipelinez.compile.bind_cache import pz_fingerprint, write_atomic
from pipelinez.config.discovery import PROJECT_FILE
from pipelinez.core.diagnostics import Diagnostic, DiagnosticSeverity, Place
from pipelinez.core.signed_cache import SALT_FILE as SALT_FILE  # the salt: beside .pz/target, not in it
from pipelinez.core.signed_cache import project_salt
from pipelinez.engine.run.folder_key import (
    Digest,
    connection_values,
    feed_tree,
    feed_versions,
    paths_digest,
    read_bytes,
)
from pipelinez.engine.run.folder_key import walk_once as walk_once  # for the CLI, which may import only this

if TYPE_CHECKING:
    from pipelinez.config.model import Project
    from pipelinez.config.parse_cache import ParseCache

FILE = "validate.json"
FORMAT = 2


@dataclass(frozen=True)
class Replayed:
    """A stored valid validation: its node count and warnings."""

    nodes: int
    warnings: tuple[Diagnostic, ...]


def _path(root: Path) -> Path:
    return root / ".pz" / "target" / FILE


def files_key(root: Path, overrides: Mapping[str, str] | None, *, fresh: bool = False) -> str | None:
    """The content key of the project folder and the `--var` values; None: too large a folder to walk.
    `fresh`: walk the folder again even inside `folder_key.walk_once()` (the check after a compile)."""
    digest = Digest()
    digest.feed("pz", __version__, pz_fingerprint(), str(root))
    feed_versions(digest)
    if not feed_tree(digest, root, fresh=fresh):
        return None
    digest.feed("schemas", read_bytes(root / ".pz" / "target" / "schemas.json"))
    digest.feed("vars", sorted((overrides or {}).items()))
    return digest.hexdigest()


def replay_project(start: Path | None, overrides: Mapping[str, str] | None) -> Replayed | None:
    """`replay` for the project `start` is in (the working directory by default), cheaply: for `pz validate`
    before it imports what a compile needs. None (validate as usual) when anything is not plain."""
    here = (start or Path.cwd()).expanduser().resolve()
    for folder in (here, *here.parents):
        if (folder / PROJECT_FILE).is_file():
            return replay(folder, files_key(folder, overrides), None)
        if (folder / PROJECT_FILE).is_symlink():  # a broken link: the full path says so
            return None
    return None


def _salt(root: Path, *, create: bool) -> str | None:
    return project_salt(root, create=create)


def parse_cache(root: Path) -> ParseCache | None:
    """The project's persistent parse cache (`.pz/target/parsed.json`), signed with its salt; None when
    the salt cannot be read or made."""
    from pipelinez.config.parse_cache import ParseCache  # YAML's parser: not for a replayed validate

    salt = _salt(root, create=True)
    if salt is None:
        return None
    versions = f"pz {__version__} {pz_fingerprint()}; ruamel.yaml {_ruamel_version()}"
    return ParseCache(root / ".pz" / "target", salt, versions)


@functools.cache
def _ruamel_version() -> str | None:
    """The YAML parser's version, from its metadata (a parse of another parser is another parse)."""
    from importlib import metadata  # not for a replayed validate: its key reads `core.installed`

    try:
        return metadata.version("ruamel.yaml")
    except metadata.PackageNotFoundError:
        return None


def _salted(salt: str, data: object) -> str:
    return hashlib.sha256((salt + json.dumps(data, sort_keys=True)).encode("utf-8")).hexdigest()


def _env_pairs(names: list[str], environ: Mapping[str, str] | None) -> list[tuple[str, str | None]]:
    env = os.environ if environ is None else environ
    return [(name, env.get(name)) for name in sorted(names)]


def replay(root: Path, key: str | None, environ: Mapping[str, str] | None) -> Replayed | None:
    """The stored validation when its key and its project's env values still match."""
    if key is None:
        return None
    try:
        entry = json.loads(_path(root).read_bytes())
        if entry.get("format") != FORMAT or entry.get("key") != key:
            return None
        salt = _salt(root, create=False)
        if salt is None or entry["env"] != _salted(salt, _env_pairs(list(entry["env_names"]), environ)):
            return None
        if entry["paths"] != paths_digest(root, [str(v) for v in entry["connection_values"]]):
            return None
        warnings = tuple(_diagnostic(d) for d in entry["warnings"])
        return Replayed(int(entry["nodes"]), warnings)
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        return None


@dataclass(frozen=True)
class Before:
    """What the folder was before a compile began."""

    key: str
    overrides: dict[str, str]


def before(key: str | None, overrides: Mapping[str, str] | None) -> Before | None:
    return None if key is None else Before(key, dict(overrides or {}))


def store(
    project: Project,
    seen: Before | None,
    environ: Mapping[str, str] | None,
    incremental: bool,
    result: Replayed,
) -> None:
    """Keep a valid validation for `replay`; nothing when the folder could not be keyed, when the project
    reads incrementally, or when the folder changed while the compile ran (the result may be of either)."""
    if seen is None or incremental or project.engine.external_access:
        return
    if files_key(project.root, seen.overrides, fresh=True) != seen.key:
        return
    salt = _salt(project.root, create=True)
    if salt is None:
        return
    values = connection_values(project)
    entry = {
        "format": FORMAT,
        "key": seen.key,
        "env_names": sorted(project.env),
        "env": _salted(salt, _env_pairs(list(project.env), environ)),
        "connection_values": values,
        "paths": paths_digest(project.root, values),
        "nodes": result.nodes,
        "warnings": [d.to_dict() for d in result.warnings],
    }
    path = _path(project.root)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(entry, separators=(",", ":")))


def _diagnostic(data: dict[str, object]) -> Diagnostic:
    place = data["place"]
    if not isinstance(place, dict):
        raise TypeError("place")
    return Diagnostic(
        str(data["code"]),
        str(data["message"]),
        Place(**place),
        str(data["next_step"]),
        DiagnosticSeverity(str(data["severity"])),
    )
