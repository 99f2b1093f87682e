"""Refusals of configuration a source load's or sink write's tier cannot honour, in tier 3 of `pz validate`
(so `pz plan`, `pz run` and `pz retry`, which validate first, refuse the same).

- PZ0312 (NativePathRequired): a native-only connector (no universal tier for that direction: the object
  stores) with configuration that needs the universal tier: `engine.force_universal` on either side, or
  `files_per_partition` on such a source (partitioned loads are universal-tier work). A native-only
  *format* of a dual-tier connector (localfiles' parquet and json) is refused when its load starts instead.
  `engine.force_universal` is set on an instance (or the project), so it is reported once per source or
  sink instance (node `source:<name>`/`sink:<name>`), however many datasets or outputs it has;
  `files_per_partition` is a dataset key, reported per dataset.
- PZ0313 (WindowNotSupported): a windowed dataset (`sync: { window: … }`) whose load takes the native tier
  through a connector that does not declare `windowed_reads`: nothing would bound that extraction to one
  window (the universal tier has the engine's trim-to-window backstop; the native tier relies on the
  connector). Gated on the dataset's `sync.window` as configured, whatever else reads `sync:`.
"""

from __future__ import annotations

from collections.abc import Mapping

from pipelinez.compile.nodes import Node, SinkWriteNode, SourceLoadNode
from pipelinez.compile.work import Endpoint
from pipelinez.config.model import Project
from pipelinez.core.diagnostics import Diagnostic, Place, error
from pipelinez.core.vocabulary import Tier


def _place(project: Project | None, point: Endpoint, path: tuple[str, ...], node: str) -> Place:
    if project is None:
        return Place(point.file, node=node)
    found = project.locate(point.file, path)
    return Place(found.file, found.line, found.col, node)


def _forced(point: Endpoint, project: Project | None, node: str) -> Place:
    """Where force_universal is set for this instance: project.yml's engine block, else the instance's."""
    if project is not None and project.engine.force_universal:
        found = project.locate("project.yml", ("engine", "force_universal"))
        return Place(found.file, found.line, found.col, node)
    return _place(project, point, ("engine", "force_universal"), node)


def source_gates(node: SourceLoadNode, project: Project | None) -> list[Diagnostic]:
    work = node.work
    point = work.endpoint
    caps = point.caps
    found: list[Diagnostic] = []
    if caps.native_only_source:
        if point.force_universal:
            found.append(
                error(
                    "PZ0312",
                    f"source '{point.instance}': engine.force_universal needs the universal tier, but "
                    f"connector '{point.connector}' is native-only",
                    place=_forced(point, project, f"source:{point.instance}"),
                )
            )
        if work.request.options.get("files_per_partition"):
            found.append(
                error(
                    "PZ0312",
                    f"source '{point.instance}' dataset '{work.request.name}': files_per_partition splits "
                    f"the read into universal-tier partitions, but connector '{point.connector}' is "
                    "native-only",
                    place=_place(
                        project, point, ("datasets", work.request.name, "files_per_partition"), node.name
                    ),
                    next_step="remove files_per_partition: the connector reads all matching files in one "
                    "native load",
                )
            )
    window = _window(project, point.instance, work.request.name)
    if window is not None and work.tier == Tier.NATIVE and not caps.windowed_reads:
        found.append(
            error(
                "PZ0313",
                f"source '{point.instance}' dataset '{work.request.name}': sync.window {window} bounds each "
                f"run to one window, but connector '{point.connector}' cannot bound its native extraction "
                "to a window",
                place=_place(project, point, ("datasets", work.request.name, "sync", "window"), node.name),
            )
        )
    return found


def sink_gates(node: SinkWriteNode, project: Project | None) -> list[Diagnostic]:
    point = node.work.endpoint
    if point.force_universal and point.caps.native_only_sink:
        return [
            error(
                "PZ0312",
                f"sink '{point.instance}': engine.force_universal needs the universal tier, but connector "
                f"'{point.connector}' is native-only",
                place=_forced(point, project, f"sink:{point.instance}"),
            )
        ]
    return []


def _window(project: Project | None, source: str, dataset: str) -> str | None:
    """The dataset's configured `sync.window`, as written, or None."""
    if project is None or source not in project.sources:
        return None
    spec = project.sources[source].datasets.get(dataset)
    sync = spec.sync if spec is not None else None
    if not isinstance(sync, dict) or sync.get("window") in (None, ""):
        return None
    return str(sync["window"])


def tier_gates(nodes: Mapping[str, Node], project: Project) -> list[Diagnostic]:
    """PZ0312 and PZ0313 of every source load and sink write; an instance-level refusal (force_universal)
    once, not once per dataset or output."""
    found: list[Diagnostic] = []
    for node in nodes.values():
        if isinstance(node, SourceLoadNode):
            found += [d for d in source_gates(node, project) if d not in found]
        elif isinstance(node, SinkWriteNode):
            found += [d for d in sink_gates(node, project) if d not in found]
    return found
