"""Folder config: project.yml `pipelines:` blocks, the defaults of the pipelines under a folder.

A block applies to every pipeline under its folder (`.`: all of them). For `materialized` and `sink` the
deepest folder that sets one wins; `tags` are the union of every block's. A sidecar's own `materialized`
wins over the folder's, its tags are added (`PipelineSource.materialized` / `.tags`). A block naming no
folder is PZ0130 (a warning); a `sink:` naming no sink instance, or set where the pipelines are ephemeral,
is PZ0131.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from pipelinez.config.model import FolderConfig, PipelineDefaults, PipelineSource, SinkSpec
from pipelinez.config.suggest import did_you_mean
from pipelinez.core.diagnostics import Diagnostic, error, warning

PIPELINES = "pipelines"


def folder_of(file: str) -> tuple[str, ...]:
    """The folders of a pipeline's file under pipelines/ (`pipelines/marts/x.sql` -> ("marts",))."""
    return PurePosixPath(file).parent.parts[1:]


def _parts(folder: str) -> tuple[str, ...]:
    return () if folder == "." else PurePosixPath(folder).parts


def blocks_for(file: str, folders: Mapping[str, FolderConfig]) -> list[FolderConfig]:
    """The blocks that apply to a pipeline's file, shallowest first."""
    here = folder_of(file)
    found = [f for f in folders.values() if here[: len(_parts(f.folder))] == _parts(f.folder)]
    return sorted(found, key=lambda f: len(_parts(f.folder)))


def with_defaults(
    pipelines: Mapping[str, PipelineSource], folders: Mapping[str, FolderConfig]
) -> dict[str, PipelineSource]:
    """Each pipeline with the defaults its folders give it, each folder's blocks found once."""
    by_folder: dict[str, PipelineDefaults | None] = {}
    out: dict[str, PipelineSource] = {}
    for name, pipe in pipelines.items():
        folder = pipe.file.rpartition("/")[0]
        if folder not in by_folder:
            by_folder[folder] = _folder_defaults(blocks_for(pipe.file, folders)) if folders else None
        defaults = by_folder[folder]
        out[name] = pipe if defaults is None else dataclasses.replace(pipe, defaults=defaults)
    return out


def _folder_defaults(blocks: list[FolderConfig]) -> PipelineDefaults | None:
    """What `blocks` (shallowest first) give a pipeline; None: no block applies."""
    if not blocks:
        return None
    materialized = next((b.materialized for b in reversed(blocks) if b.materialized), None)
    sink = next((b for b in reversed(blocks) if b.sink), None)
    tags = tuple(dict.fromkeys(t for b in blocks for t in b.tags))
    return PipelineDefaults(
        materialized, tags, sink.sink if sink else None, sink.sink_place if sink else None
    )


def folder_problems(
    root: Path, folders: Mapping[str, FolderConfig], sinks: Mapping[str, SinkSpec], broken: set[str]
) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    for block in folders.values():
        if not (root / PIPELINES / block.folder).is_dir():
            found.append(
                warning(
                    "PZ0130",
                    f"project.yml pipelines: '{block.folder}' names no folder under pipelines/ "
                    f"(pipelines/{block.folder} does not exist): its settings apply to nothing",
                    place=block.place,
                )
            )
        if block.sink is None:
            continue
        if block.materialized == "ephemeral":
            found.append(
                error(
                    "PZ0131",
                    f"project.yml pipelines: '{block.folder}' is ephemeral and sets sink: '{block.sink}' "
                    "(an ephemeral pipeline writes nowhere)",
                    place=block.sink_place or block.place,
                )
            )
        elif block.sink not in sinks and f"sink:{block.sink}" not in broken:
            found.append(
                error(
                    "PZ0131",
                    f"project.yml pipelines: '{block.folder}' sets sink: '{block.sink}', which has no "
                    f"sinks/{block.sink}.yml{did_you_mean(block.sink, sinks)}",
                    place=block.sink_place or block.place,
                )
            )
    return found
