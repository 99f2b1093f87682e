"""One physical target, one writer: two outputs that resolve to the same table, file or folder are refused.
A target the sink cannot hold as named (a table name past the server's identifier limit) is refused too
(PZ0304), for every output a pipeline writes, declared in its sink file or not.

Each connector tells where an output physically writes (`Connector.output_target`): connection identity
(host/port/database, a database file) and the normalized target (the server's case rules, defaults filled
in, paths absolute). Only outputs that some pipeline writes count.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelinez.compile.instances import ResolvedInstance
from pipelinez.compile.name_checks import unsafe_output_name
from pipelinez.compile.semantic import PipelineInfo
from pipelinez.config.model import Project
from pipelinez.connectors import registry
from pipelinez.connectors.sdk import OutputTarget
from pipelinez.core.diagnostics import Diagnostic, Place, error


@dataclass(frozen=True)
class _Writer:
    """A pipeline writing to a sink output, and where that output leads."""

    sink: str
    output: str
    pipeline: str
    place: Place
    target: OutputTarget

    @property
    def label(self) -> str:
        return f"'{self.sink}.{self.output}' (pipeline '{self.pipeline}', {self.place.render()})"


def target_of(project: Project, inst: ResolvedInstance, output: str) -> OutputTarget | None:
    try:
        cls = registry.load_class(inst.connector)
        return cls.output_target(project.root, inst.connection, output, dict(inst.blocks.get(output, {})))
    except Exception:  # a connector that can't load is reported by tier 3; third-party code never crashes us
        return None


def shared_targets(
    project: Project, infos: dict[str, PipelineInfo], sinks: dict[str, ResolvedInstance]
) -> list[Diagnostic]:
    """PZ0228 for every output whose physical target overlaps an earlier one's."""
    writers: list[_Writer] = []
    diags: list[Diagnostic] = []
    for name, info in sorted(infos.items()):
        for (sink, output), place in zip(info.sinks, info.sink_places, strict=True):
            inst = sinks.get(sink)
            if unsafe_output_name(output):  # PZ0118 already: not a name to place or measure
                continue
            target = target_of(project, inst, output) if inst else None
            if inst is None or target is None:
                continue
            declared = output in getattr(inst.spec, "outputs", {})  # then tier 3 checked its name
            if (
                target.issue
                and not declared
                and not any((w.sink, w.output) == (sink, output) for w in writers)
            ):
                diags.append(_unnamable(inst, output, place, target.issue))
            writer = _Writer(sink, output, name, place, target)
            clash = next(
                (w for w in writers if (w.sink, w.output) != (sink, output) and w.target.overlaps(target)),
                None,
            )
            if clash is not None:
                both = (
                    target.display
                    if clash.target.display == target.display
                    else f"{clash.target.display} and {target.display}"
                )
                diags.append(
                    error(
                        "PZ0228",
                        f"outputs {clash.label} and {writer.label} both write {both}",
                        place=place,
                    )
                )
            writers.append(writer)
    return diags


def _unnamable(inst: ResolvedInstance, output: str, place: Place, issue: str) -> Diagnostic:
    """PZ0304 at the pipeline's sink() call: the sink cannot hold the table named after an output that its
    sink file does not declare (an identifier past the server's limit)."""
    return error("PZ0304", f"{inst.spec.kind} '{inst.name}' output '{output}': {issue}", place=place)
