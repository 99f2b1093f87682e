"""An output never writes over data it does not own: a source's files or the project itself.

A file or object-store output is a folder (prefix) that a replace empties and refills. One that is, holds
or lies inside a declared source dataset's path would delete that source's data (PZ0236). One that is or
holds the project folder, or is or lies inside `pipelines/`, `sources/`, `sinks/`, `.pz/`, `project.yml`
or `pz.lock`, would delete the project's SQL, configuration or state (PZ0237). A single-file target (a
DuckDB sink's database file) clashes only with a source's very file, or a project path as above.

Paths are compared absolute with symlinks resolved (`Connector.output_target`,
`Connector.dataset_location`); object-store prefixes compare within one store (endpoint/account and
bucket/container). Every declared dataset counts, read by a pipeline or not; only outputs a pipeline
writes count (as for PZ0228).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterator
from pathlib import Path

from pipelinez.compile.instances import ResolvedInstance
from pipelinez.compile.semantic import PipelineInfo
from pipelinez.compile.targets import target_of
from pipelinez.config.model import Project, SourceSpec
from pipelinez.connectors import registry
from pipelinez.connectors.sdk import DataLocation, OutputTarget
from pipelinez.core.diagnostics import Diagnostic, Place, error

PROJECT_PATHS = ("pipelines", "sources", "sinks", ".pz", "project.yml", "project.yaml", "pz.lock")


def _within(inner: tuple[str, ...], outer: tuple[str, ...]) -> bool:
    return inner[: len(outer)] == outer


def _relation(target: tuple[str, ...], other: tuple[str, ...], owns: bool) -> str | None:
    """How a target path stands to another path: "is", "is inside", "holds" (only when the target owns
    everything under it), or None."""
    if target == other:
        return "is the same as"
    if _within(target, other):
        return "is inside" if owns else None
    if _within(other, target):
        return "holds" if owns else None
    return None


def glob_reaches(glob: tuple[str, ...], rest: tuple[str, ...], below: bool) -> bool:
    """Whether the glob segments can match the path `rest` itself (a file target) or, with `below` (a folder
    target), a path under it: a glob reads files, so one that ends at the folder's own name reads nothing in
    it."""
    if not rest:
        return bool(glob) if below else all(seg == "**" for seg in glob)
    if not glob:
        return False
    if glob[0] == "**":
        return glob_reaches(glob[1:], rest, below) or glob_reaches(glob, rest[1:], below)
    return fnmatch.fnmatchcase(rest[0], glob[0]) and glob_reaches(glob[1:], rest[1:], below)


def _data_relation(
    target: tuple[str, ...], data: DataLocation, fixed: tuple[str, ...], owns: bool
) -> str | None:
    """How a target path stands to a dataset's path (`fixed`: its fixed part, as the target's path is
    spelled); a folder target (`owns`) that some data could lie in counts, a single file only as the very
    file the dataset reads."""
    if _within(fixed, target) and (owns or fixed == target):
        return "holds" if fixed != target or data.glob else "is the same as"
    glob = data.glob or ("**",)  # a plain path: itself and everything under it
    if _within(target, fixed) and glob_reaches(glob, target[len(fixed) :], below=owns):
        return "lies in"
    return None


def _source_relation(target: OutputTarget, loc: DataLocation) -> str | None:
    if target.system == loc.system:  # one store: prefixes compare; one database file: tables are apart
        return _data_relation(target.parts, loc, loc.parts, owns=True) if target.nested else None
    if target.local_path is not None and loc.local_path is not None:
        return _data_relation(target.local_path, loc, loc.local_path, target.owns_local_path)
    return None


def _project_relation(target: OutputTarget, root: tuple[str, ...]) -> str | None:
    """How a target on the local file system stands to the project (None: clear of it)."""
    mine = target.local_path
    if mine is None:
        return None
    if _within(root, mine):
        return "is the project folder" if mine == root else "holds the project folder"
    for name in PROJECT_PATHS:
        protected = (*root, *Path(name).parts)
        if _within(mine, protected):
            return f"is the project's {name}" if mine == protected else f"is inside the project's {name}"
    return None


def _locations(
    project: Project, sources: dict[str, ResolvedInstance]
) -> Iterator[tuple[str, Place, DataLocation]]:
    """(source.dataset, place, location) of every declared dataset whose data is a path."""
    for name, inst in sorted(sources.items()):
        try:
            cls = registry.load_class(inst.connector)
        except Exception:  # a connector that can't load is reported by tier 3
            continue
        for dataset, options in sorted(inst.blocks.items()):
            try:
                loc = cls.dataset_location(project.root, inst.connection, dataset, dict(options))
            except Exception:  # third-party code never crashes validate
                loc = None
            if loc is not None:
                spec = inst.spec.datasets.get(dataset) if isinstance(inst.spec, SourceSpec) else None
                yield f"{name}.{dataset}", (spec.place if spec else Place(inst.spec.file)), loc


def owned_overlaps(
    project: Project,
    infos: dict[str, PipelineInfo],
    sources: dict[str, ResolvedInstance],
    sinks: dict[str, ResolvedInstance],
) -> list[Diagnostic]:
    """PZ0236 for every output that overlaps a source dataset's path, PZ0237 for one over the project."""
    locations = list(_locations(project, sources))
    root = Path(os.path.normcase(os.path.realpath(project.root))).parts
    diags: list[Diagnostic] = []
    seen: set[tuple[str, str]] = set()
    for pipeline, info in sorted(infos.items()):
        for (sink, output), place in zip(info.sinks, info.sink_places, strict=True):
            inst = sinks.get(sink)
            target = target_of(project, inst, output) if inst else None
            if target is None or (sink, output) in seen:
                continue
            seen.add((sink, output))
            label = f"output '{sink}.{output}' (pipeline '{pipeline}')"
            where = _project_relation(target, root)
            if where:
                diags.append(
                    error(
                        "PZ0237",
                        f"{label} writes {target.display}, which {where}: writing there would overwrite or "
                        "delete the project's own files",
                        place=place,
                    )
                )
            for dataset, at, loc in locations:
                how = _source_relation(target, loc)
                if how:
                    diags.append(
                        error(
                            "PZ0236",
                            f"{label} writes {target.display}, which {how} {loc.display} of source dataset "
                            f"'{dataset}' ({at.render()}): writing there would overwrite or delete the "
                            "source's data",
                            place=place,
                        )
                    )
    return diags
