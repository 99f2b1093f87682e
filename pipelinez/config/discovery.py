"""Finding a project's files: project.yml, sources/*.yml, sinks/*.yml, pipelines/**/*.sql and their sidecars.

Hidden files and folders (a name starting with '.', e.g. `.pz/`) are skipped. `.yaml` is accepted next to
`.yml`. Paths come back sorted, so loading is deterministic. Symbolic links are followed; a link whose target
does not exist is PZ0110 and links that loop are PZ0111, never a silently skipped file. `sources`, `sinks` or
`pipelines` being a file, and a project file that is a named pipe, socket or device (reading one would
block), are PZ0114.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from pipelinez.core.diagnostics import Diagnostic, error

PROJECT_FILE = "project.yml"
YAML_SUFFIXES = (".yml", ".yaml")


@dataclass(frozen=True)
class ProjectFiles:
    root: Path
    project: Path
    sources: list[Path] = field(default_factory=list)
    sinks: list[Path] = field(default_factory=list)
    pipelines: list[Path] = field(default_factory=list)  # the .sql files
    sidecars: list[Path] = field(default_factory=list)  # .yml/.yaml files under pipelines/
    problems: list[Diagnostic] = field(default_factory=list)  # broken links among the project's files

    def rel(self, path: Path) -> str:
        """The project-relative POSIX path users see in messages."""
        return path.relative_to(self.root).as_posix()


def discover(root: Path) -> ProjectFiles:
    problems: list[Diagnostic] = []
    pipelines, sidecars = _tree(root, root / "pipelines", problems)
    return ProjectFiles(
        root=root,
        project=root / PROJECT_FILE,
        sources=_flat(root, root / "sources", problems),
        sinks=_flat(root, root / "sinks", problems),
        pipelines=pipelines,
        sidecars=sidecars,
        problems=problems,
    )


def broken_link(root: Path, path: Path) -> Diagnostic | None:
    """PZ0110 (dangling) or PZ0111 (loop) when `path` is a symbolic link that leads nowhere, else None."""
    try:
        os.stat(path)
    except OSError as exc:
        if not os.path.islink(path) and exc.errno != errno.ELOOP:
            return None
        rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
        if exc.errno == errno.ELOOP:
            return error("PZ0111", "this symbolic link loops back on itself", file=rel)
        return error("PZ0110", f"symbolic link to '{os.readlink(path)}', which does not exist", file=rel)
    return None


def _visible(name: str) -> bool:
    return not name.startswith(".")


def _not_a_folder(root: Path, folder: Path) -> Diagnostic | None:
    """PZ0114 when `folder` exists but is not a folder (a file named `pipelines`)."""
    if not os.path.lexists(folder) or folder.is_dir():
        return None
    return error(
        "PZ0114",
        f"'{folder.name}' is a file, but it must be a folder holding the project's {folder.name} "
        "(nothing in it would be read)",
        file=folder.relative_to(root).as_posix(),
    )


def _special(root: Path, path: Path) -> Diagnostic | None:
    """PZ0114 when a project file is a named pipe, socket, device (or, in sources/ and sinks/, a folder)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    kind = (
        "a named pipe"
        if stat.S_ISFIFO(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "a folder"
        if stat.S_ISDIR(mode)
        else "a device"
    )
    return error(
        "PZ0114",
        f"'{path.name}' is {kind}, not a regular file: pz reads project files only from regular files",
        file=path.relative_to(root).as_posix(),
    )


def _flat(root: Path, folder: Path, problems: list[Diagnostic]) -> list[Path]:
    link = broken_link(root, folder)
    if link:
        problems.append(link)
        return []
    odd = _not_a_folder(root, folder)
    if odd:
        problems.append(odd)
        return []
    if not folder.is_dir():
        return []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    found = []
    for p in entries:
        if not _visible(p.name) or p.suffix not in YAML_SUFFIXES:
            continue
        problem = broken_link(root, p) or _special(root, p)
        if problem:
            problems.append(problem)
        else:
            found.append(p)
    return sorted(found)


def _tree(root: Path, folder: Path, problems: list[Diagnostic]) -> tuple[list[Path], list[Path]]:
    """(.sql files, .yml/.yaml files) under `folder`, following links to folders; a folder reached again
    through a link (a loop) is PZ0111."""
    sql: list[Path] = []
    yml: list[Path] = []
    link = broken_link(root, folder)
    if link:
        problems.append(link)
        return sql, yml
    odd = _not_a_folder(root, folder)
    if odd:
        problems.append(odd)
        return sql, yml
    if not folder.is_dir():
        return sql, yml
    pending = [(folder, frozenset({os.path.realpath(folder)}))]
    while pending:
        here, seen = pending.pop()
        try:
            entries = sorted(os.scandir(here), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            path = Path(entry.path)
            if not _visible(entry.name):
                continue
            link = broken_link(root, path)
            if link:
                if path.suffix in (".sql", *YAML_SUFFIXES) or not path.suffix:
                    problems.append(link)
                continue
            if path.suffix in (".sql", *YAML_SUFFIXES) and path.is_dir():
                special = _special(root, path)  # `x.sql` that is a folder (or a link to one): not walked
                if special:
                    problems.append(special)
                continue
            if path.is_dir():
                real = os.path.realpath(path)
                if real in seen:
                    rel = path.relative_to(root).as_posix()
                    problems.append(error("PZ0111", "links back to a folder that contains it", file=rel))
                    continue
                pending.append((path, seen | {real}))
            elif path.suffix in (".sql", *YAML_SUFFIXES):
                special = _special(root, path)
                if special:
                    problems.append(special)
                else:
                    (sql if path.suffix == ".sql" else yml).append(path)
    return sorted(sql), sorted(yml)
