"""Finding a project's files: project.yml, sources/*.yml, sinks/*.yml, pipelines/**/*.sql and their sidecars.

Hidden files and folders (a name starting with '.', e.g. `.pz/`) are skipped. `.yaml` is accepted next to
`.yml`. Paths come back sorted, so loading is deterministic.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

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

    def rel(self, path: Path) -> str:
        """The project-relative POSIX path users see in messages."""
        return path.relative_to(self.root).as_posix()


def discover(root: Path) -> ProjectFiles:
    return ProjectFiles(
        root=root,
        project=root / PROJECT_FILE,
        sources=_flat(root / "sources"),
        sinks=_flat(root / "sinks"),
        pipelines=_tree(root / "pipelines", (".sql",)),
        sidecars=_tree(root / "pipelines", YAML_SUFFIXES),
    )


def _visible(name: str) -> bool:
    return not name.startswith(".")


def _flat(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    return sorted(p for p in entries if _visible(p.name) and p.suffix in YAML_SUFFIXES and p.is_file())


def _tree(folder: Path, suffixes: tuple[str, ...]) -> list[Path]:
    if not folder.is_dir():
        return []
    found: list[Path] = []
    for here, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if _visible(d))
        for name in files:
            path = Path(here) / name
            if _visible(name) and path.suffix in suffixes and path.is_file():
                found.append(path)
    return sorted(found)
