"""Source and sink instances with their templates rendered (real values and secret-masked display values)."""

from __future__ import annotations

from dataclasses import dataclass

from pipelinez.compile.templating import PlaceOf, TemplateFailure, Templater
from pipelinez.config.model import InstanceSpec, Project, SinkSpec, SourceSpec
from pipelinez.config.positions import JsonPath
from pipelinez.core.diagnostics import Diagnostic
from pipelinez.core.json_types import JsonObject


@dataclass(frozen=True)
class ResolvedInstance:
    """A source or sink with its connection rendered: real values and the displayed ones."""

    spec: InstanceSpec
    connection: JsonObject  # real values (may hold secrets)
    display_connection: JsonObject  # secrets masked
    blocks: dict[str, JsonObject]  # dataset/output name -> rendered connector options

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def connector(self) -> str:
        return self.spec.connector


def resolve_instances(
    project: Project, templater: Templater
) -> tuple[dict[str, ResolvedInstance], dict[str, ResolvedInstance], list[Diagnostic]]:
    diags: list[Diagnostic] = []

    def resolve(spec: SourceSpec | SinkSpec) -> ResolvedInstance:
        connection: JsonObject = {}
        display: JsonObject = {}
        blocks: dict[str, JsonObject] = {}

        def values_under(block: JsonPath) -> PlaceOf:  # each value's own place in the file
            return lambda path: project.locate(spec.file, (*block, *path), at="value")

        try:
            connection, display = templater.render_tree(
                spec.connection, spec.file, spec.place, values_under(("connection",))
            )
        except TemplateFailure as exc:
            diags.extend(exc.diagnostics)
        entries = spec.datasets if isinstance(spec, SourceSpec) else spec.outputs
        kind = "datasets" if isinstance(spec, SourceSpec) else "outputs"
        for name, entry in entries.items():
            try:
                blocks[name] = templater.render_tree(
                    entry.options, spec.file, entry.place, values_under((kind, name))
                )[0]
            except TemplateFailure as exc:
                diags.extend(exc.diagnostics)
                blocks[name] = dict(entry.options)
        return ResolvedInstance(spec, connection, display, blocks)

    sources = {name: resolve(spec) for name, spec in project.sources.items()}
    sinks = {name: resolve(spec) for name, spec in project.sinks.items()}
    return sources, sinks, diags
