"""Finding a project's files: project.yml, sources/*.yml, sinks/*.yml, pipelines/**/*.sql and their sidecars,
docs/**/*.md (Markdown holding `{% docs name %}` blocks; nothing else of docs/ is read), macros/**/*.sql
(Jinja `{% macro %}` definitions every template can call) and the singular tests tests/**/*.sql (queries that
must return no rows).

Hidden files and folders (a name starting with '.', e.g. `.pz/`) are skipped. `.yaml` is accepted next to
`.yml`. Paths come back sorted, so loading is deterministic. Symbolic links are followed; a link whose target
does not exist is PZ0110 and links that loop are PZ0111, never a silently skipped file. `sources`, `sinks` or
`pipelines` being a file, and a project file that is a named pipe, socket or device (reading one would
block), are PZ0114. Each of the four folders is walked for at most MAX_ENTRIES entries: a link to a large
folder (`pipelines/shared -> /tmp`) stops the walk with PZ0117, naming the link, instead of reading for
minutes.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from pipelinez.core.diagnostics import Diagnostic, error
from pipelinez.core.once import once

PROJECT_FILE = "project.yml"
YAML_SUFFIXES = (".yml", ".yaml")
MAX_ENTRIES = 50_000  # file system entries looked at under one of sources/ sinks/ pipelines/ docs/ tests/
DOC_SUFFIX = ".md"


@dataclass(frozen=True)
class ProjectFiles:
    """The files of a project as discovered, by kind, sorted; and the problems finding them."""

    root: Path
    project: Path
    sources: list[Path] = field(default_factory=list)
    sinks: list[Path] = field(default_factory=list)
    pipelines: list[Path] = field(default_factory=list)  # the .sql files
    sidecars: list[Path] = field(default_factory=list)  # .yml/.yaml files under pipelines/
    docs: list[Path] = field(default_factory=list)  # .md files under docs/ (their {% docs %} blocks)
    tests: list[Path] = field(default_factory=list)  # .sql files under tests/: singular tests
    macros: list[Path] = field(default_factory=list)  # .sql files under macros/ (shared Jinja macros)
    problems: list[Diagnostic] = field(default_factory=list)  # broken links among the project's files

    def rel(self, path: Path) -> str:
        """The project-relative POSIX path users see in messages."""
        text, prefix = os.fspath(path), self._prefix
        if os.sep == "/" and len(text) > len(prefix) and text.startswith(prefix):  # as relative_to gives:
            return text[len(prefix) :]  # both normalized by Path; no paths built (once per file)
        return path.relative_to(self.root).as_posix()

    @once
    def _prefix(self) -> str:
        """The root's path with a trailing separator (worked out once: `rel` is asked once per file)."""
        return os.path.join(os.fspath(self.root), "")


@dataclass
class Snapshot:
    """A project's files as discovered and their bytes as read at that moment (None: not a regular file
    or unreadable), so that the loader loads exactly what a content key was computed from."""

    files: ProjectFiles
    contents: dict[Path, bytes | None]
    read_elsewhere: bool = False  # the loader read a file itself: what it loaded is not only `contents`


def snapshot_paths(files: ProjectFiles) -> list[Path]:
    """Every file the loader reads, in the order it finds them."""
    found = [*files.sources, *files.sinks, *files.pipelines, *files.sidecars, *files.docs, *files.macros]
    return [files.project, *found, *files.tests]


def discover(root: Path) -> ProjectFiles:
    problems: list[Diagnostic] = []
    found = _tree(root, root / "pipelines", (".sql", *YAML_SUFFIXES), problems)
    pipelines = [p for p in found if split_ext(p.name)[1] == ".sql"]
    return ProjectFiles(
        root=root,
        project=root / PROJECT_FILE,
        sources=_flat(root, root / "sources", problems),
        sinks=_flat(root, root / "sinks", problems),
        pipelines=pipelines,
        sidecars=[p for p in found if split_ext(p.name)[1] != ".sql"],
        docs=_tree(root, root / "docs", (DOC_SUFFIX,), problems),
        tests=_tree(root, root / "tests", (".sql",), problems),
        macros=_tree(root, root / "macros", (".sql",), problems),
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


def _outside(root: Path, path: Path) -> tuple[str, str] | None:
    """(the link's project path, where it leads) when `path` is a symbolic link to a folder outside the
    project, else None."""
    if not os.path.islink(path):
        return None
    real = os.path.realpath(path)
    if Path(real).is_relative_to(os.path.realpath(root)):
        return None
    return path.relative_to(root).as_posix(), real


def _too_large(root: Path, folder: Path, via: tuple[str, str] | None) -> Diagnostic:
    """PZ0117: the walk of `folder` passed MAX_ENTRIES entries (through the link `via`, if any)."""
    name = folder.relative_to(root).as_posix()
    where = f" through '{via[0]}', a symbolic link to '{via[1]}' outside the project" if via else ""
    return error(
        "PZ0117",
        f"'{name}' holds more than {MAX_ENTRIES:,} files and folders{where}; pz stopped walking it "
        "(project files there were not read)",
        file=via[0] if via else name,
    )


def split_ext(path: str) -> tuple[str, str]:
    """`os.path.splitext(path)`, without its loop for the usual name (one not starting with a dot): asked for
    every project file by discovery and the loader."""
    start = path.rfind(os.sep) + 1
    dot = path.rfind(".")
    if dot > start and path[start] != ".":
        return path[:dot], path[dot:]
    return os.path.splitext(path)


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


def _regular(entry: os.DirEntry[str], is_link: bool) -> bool:
    """Whether the listing tells `entry` is a regular file (not a link): no stat needed to know."""
    try:
        return not is_link and entry.is_file(follow_symlinks=False)
    except OSError:
        return False


def _is_link(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_symlink()
    except OSError:
        return True  # not known: judged by the stats below


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
    entries: list[os.DirEntry[str]] = []
    try:
        with os.scandir(folder) as scan:
            for entry in scan:
                if len(entries) >= MAX_ENTRIES:
                    problems.append(_too_large(root, folder, _outside(root, folder)))
                    return []
                entries.append(entry)
    except OSError:
        return []
    found = []
    for entry in entries:
        p = Path(entry.path)
        if not _visible(p.name) or p.suffix not in YAML_SUFFIXES:
            continue
        if _regular(entry, _is_link(entry)):  # the listing tells: no stat needed
            found.append(p)
            continue
        problem = broken_link(root, p) or _special(root, p)
        if problem:
            problems.append(problem)
        else:
            found.append(p)
    return sorted(found)


def _tree(root: Path, folder: Path, wanted: tuple[str, ...], problems: list[Diagnostic]) -> list[Path]:
    """The files under `folder` whose suffix is `wanted`, sorted, following links to folders; a folder
    reached again through a link (a loop) is PZ0111. Entries are judged from what the directory listing
    tells (no stat for a plain file or folder), so a large tree costs little before the MAX_ENTRIES bound
    stops it."""
    files: list[Path] = []
    link = broken_link(root, folder)
    if link:
        problems.append(link)
        return files
    odd = _not_a_folder(root, folder)
    if odd:
        problems.append(odd)
        return files
    if not folder.is_dir():
        return files
    start = os.path.realpath(folder)
    pending = [(folder, start, frozenset({start}), _outside(root, folder))]
    looked, before = 0, len(problems)
    while pending:
        here, here_real, seen, via = pending.pop()
        try:
            with os.scandir(here) as scan:
                entries = []
                for entry in scan:
                    looked += 1
                    if looked > MAX_ENTRIES:
                        del problems[before:]  # none of it: a part of a tree is no project
                        problems.append(_too_large(root, folder, via))
                        return []
                    if _visible(entry.name):
                        entries.append(entry)
        except OSError:
            continue
        entries.sort(key=lambda e: e.name)
        for entry in entries:
            suffix = split_ext(entry.name)[1]
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir()
            except OSError:
                continue
            if is_link:
                path = Path(entry.path)
                link = broken_link(root, path)
                if link:
                    if suffix in wanted or not suffix:
                        problems.append(link)
                    continue
            if is_dir:
                path = Path(entry.path)
                if suffix in wanted:
                    special = _special(root, path)  # `x.sql` that is a folder (or a link to one): not walked
                    if special:
                        problems.append(special)
                    continue
                real = os.path.realpath(path) if is_link else os.path.join(here_real, entry.name)
                if real in seen:
                    rel = path.relative_to(root).as_posix()
                    problems.append(error("PZ0111", "links back to a folder that contains it", file=rel))
                    continue
                pending.append(
                    (path, real, seen | {real}, via or (_outside(root, path) if is_link else None))
                )
            elif suffix in wanted:
                path = Path(entry.path)
                # a plain regular file, as the listing tells, needs no stat; a link or anything else does
                special = None if _regular(entry, is_link) else _special(root, path)
                if special:
                    problems.append(special)
                else:
                    files.append(path)
    return sorted(files)
