"""Tier 2: what each pipeline reads and writes, and whether every name it uses resolves.

Produces one `PipelineInfo` per pipeline and every semantic diagnostic at once: undeclared sources,
sinks, refs (with "did you mean"), misplaced or repeated sink clauses, outputs claimed twice, cycles,
name collisions, ephemeral misuse, unused vars, dead leaves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipelinez.compile.graph import find_cycle
from pipelinez.compile.pipeline_sql import has_query, split_pipeline
from pipelinez.compile.templating import Call, Rendered, TemplateFailure, Templater, staging_table
from pipelinez.config.model import PipelineSource, Project
from pipelinez.config.suggest import did_you_mean
from pipelinez.core.diagnostics import Diagnostic, Place, error, warning
from pipelinez.core.once import once


@dataclass
class PipelineInfo:
    """A pipeline after tier 2: its rendering, query, and what it reads and writes."""

    source: PipelineSource
    rendered: Rendered
    query: str  # refs still as tokens
    display_query: str
    sinks: list[tuple[str, str]] = field(default_factory=list)
    sink_places: list[Place] = field(default_factory=list)
    reads: list[tuple[str, str]] = field(default_factory=list)  # (source, dataset), own calls only
    refs: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.source.name

    @once  # asked ~12 times per pipeline a compile; its source never changes
    def ephemeral(self) -> bool:
        return self.source.materialized == "ephemeral"


def analyse_pipelines(
    project: Project, templater: Templater
) -> tuple[dict[str, PipelineInfo], list[Diagnostic], list[Diagnostic]]:
    """(pipelines that rendered, errors, warnings)."""
    errors: list[Diagnostic] = []
    warnings: list[Diagnostic] = []
    infos: dict[str, PipelineInfo] = {}
    used_vars: set[str] = set()
    unrendered: list[str] = []  # texts of files that stopped rendering: a var named there is not unused

    for name, pipe in sorted(project.pipelines.items()):
        try:
            rendered = templater.render_sql(pipe.text, pipe.file)
        except TemplateFailure as exc:
            errors.extend(exc.diagnostics)
            used_vars.update(c.args[0] for c in exc.calls if c.function == "var")
            unrendered.append(pipe.text)
            continue
        errors.extend(rendered.failures)  # the file is still analysed: its other names are checked too
        split = split_pipeline(rendered.text)
        # without a secret the display text is the text itself: split once
        display = split if rendered.display_text is rendered.text else split_pipeline(rendered.display_text)
        info = PipelineInfo(pipe, rendered, split.query, display.query)
        calls = _by_function(rendered.calls)
        sink_calls = calls.get("sink", [])
        used_vars.update(c.args[0] for c in calls.get("var", ()))
        for index in split.misplaced:
            call = sink_calls[index]
            errors.append(
                error(
                    "PZ0208",
                    f"sink('{call.args[0]}', '{call.args[1]}') is not a leading INSERT INTO clause",
                    place=call.place,
                )
            )
        seen: set[tuple[str, str]] = set()
        for index in split.sink_indexes:
            call = sink_calls[index]
            target = (call.args[0], call.args[1])
            if target in seen:
                errors.append(
                    error(
                        "PZ0208",
                        f"pipeline '{name}' names output '{target[0]}.{target[1]}' twice",
                        place=call.place,
                    )
                )
                continue
            seen.add(target)
            info.sinks.append(target)
            info.sink_places.append(call.place)
        info.reads = list(dict.fromkeys((c.args[0], c.args[1]) for c in calls.get("source", ())))
        info.refs = list(dict.fromkeys(c.args[0] for c in calls.get("ref", ())))
        if not has_query(split.query):
            errors.append(
                error("PZ0217", f"pipeline '{name}' has no query after its sink clauses", file=pipe.file)
            )
        if info.ephemeral and (info.sinks or (pipe.sidecar and pipe.sidecar.checks)):
            errors.append(
                error(
                    "PZ0218",
                    f"ephemeral pipeline '{name}' has {'sink clauses' if info.sinks else 'checks'}",
                    file=pipe.sidecar.file if pipe.sidecar and not info.sinks else pipe.file,
                )
            )
        folder_sink = pipe.defaults.sink
        if folder_sink and not info.sinks and not info.ephemeral:  # the folder config's sink: output <name>
            info.sinks.append((folder_sink, name))
            info.sink_places.append(pipe.defaults.sink_place or Place("project.yml"))
        infos[name] = info

    errors += _check_names(project, infos)
    errors += _check_cycles(infos)
    warnings += _unused_vars(project, used_vars, unrendered)
    warnings += _dead_leaves(infos)
    return infos, errors, warnings


def _by_function(calls: list[Call]) -> dict[str, list[Call]]:
    """A rendering's calls by function, each in order (`Rendered.of` for every function, in one pass)."""
    found: dict[str, list[Call]] = {}
    for call in calls:
        found.setdefault(call.function, []).append(call)
    return found


def _check_names(project: Project, infos: dict[str, PipelineInfo]) -> list[Diagnostic]:
    diags, staging_names = _staging_collisions(project)
    claimed: dict[tuple[str, str], tuple[str, Place]] = {}
    for name, info in infos.items():
        diags += [d for call in info.rendered.calls if (d := call_problem(project, call))]
        for (sink, output), place in zip(info.sinks, info.sink_places, strict=True):
            if f"sink:{sink}" in project.broken:
                continue  # its file failed tier 1 and was reported there
            if sink not in project.sinks:
                declared = ", ".join(sorted(project.sinks)) or "none declared"
                diags.append(
                    error(
                        "PZ0201",
                        f"sink() names undeclared sink '{sink}'{did_you_mean(sink, project.sinks)}",
                        next_step=f"declare sinks/{sink}.yml, or use one of: {declared}",
                        place=place,
                    )
                )
                continue
            if (sink, output) in claimed:
                other, other_place = claimed[(sink, output)]
                diags.append(
                    error(
                        "PZ0206",
                        f"output '{sink}.{output}' is written by both '{other}' "
                        f"({other_place.render()}) and '{name}'",
                        place=place,
                    )
                )
            else:
                claimed[(sink, output)] = (name, place)
        if name in staging_names or name.startswith("chk_"):
            diags.append(
                error(
                    "PZ0216",
                    f"pipeline name '{name}' collides with a "
                    f"{'source load' if name in staging_names else 'check'} node name",
                    file=info.source.file,
                )
            )
    return diags


def _staging_collisions(project: Project) -> tuple[list[Diagnostic], dict[str, tuple[str, str]]]:
    """(PZ0216 for two datasets that would stage under one table name, every staging table's dataset)."""
    diags: list[Diagnostic] = []
    staging_names: dict[str, tuple[str, str]] = {}
    for s_name, s_spec in sorted(project.sources.items()):
        for d_name, d_spec in sorted(s_spec.datasets.items()):
            first = staging_names.setdefault(staging_table(s_name, d_name), (s_name, d_name))
            if first != (s_name, d_name):
                diags.append(
                    error(
                        "PZ0216",
                        f"source '{s_name}' dataset '{d_name}' and source '{first[0]}' "
                        f"dataset '{first[1]}' would both stage as "
                        f"'{staging_table(s_name, d_name)}'",
                        place=d_spec.place,
                        next_step="rename the dataset or the source file so the names differ "
                        "around their '__'",
                    )
                )
    return diags, staging_names


def call_problem(project: Project, call: Call) -> Diagnostic | None:
    """What is wrong with the names a source() or ref() call uses (PZ0202, PZ0203), if anything."""
    if call.function == "ref" and call.args[0] not in project.pipelines:
        return error(
            "PZ0203",
            f"ref() names unknown pipeline '{call.args[0]}'{did_you_mean(call.args[0], project.pipelines)}",
            place=call.place,
        )
    if call.function != "source":
        return None
    src, dataset = call.args
    if f"source:{src}" in project.broken:
        return None  # its file failed tier 1 and was reported there
    if src not in project.sources:
        declared = ", ".join(sorted(project.sources)) or "none"
        return error(
            "PZ0202",
            f"source() names undeclared source '{src}'{did_you_mean(src, project.sources)}",
            next_step=f"declare sources/{src}.yml, or use one of: {declared}",
            place=call.place,
        )
    datasets = project.sources[src].datasets
    if dataset not in datasets:
        return error(
            "PZ0202",
            f"source '{src}' declares no dataset '{dataset}'{did_you_mean(dataset, datasets)}",
            next_step=f"add '{dataset}' under datasets: in {project.sources[src].file}, or use one of: "
            f"{', '.join(sorted(datasets)) or 'none'}",
            place=call.place,
        )
    return None


def _check_cycles(infos: dict[str, PipelineInfo]) -> list[Diagnostic]:
    edges = {name: [r for r in info.refs if r in infos] for name, info in infos.items()}
    cycle = find_cycle(edges)
    if not cycle:
        return []
    first = infos[cycle[0]]
    ref_call = next((c for c in first.rendered.of("ref") if c.args[0] == cycle[1]), None)
    place = ref_call.place if ref_call else Place(first.source.file)
    return [error("PZ0205", "ref() calls form a cycle: " + " -> ".join(cycle), place=place)]


def _unused_vars(project: Project, used: set[str], unrendered: list[str]) -> list[Diagnostic]:
    yaml_text = " ".join(unrendered) + " ".join(
        str(s.connection) + str([d.options for d in s.datasets.values()]) for s in project.sources.values()
    )
    yaml_text += " ".join(
        str(s.connection) + str([o.options for o in s.outputs.values()]) for s in project.sinks.values()
    )
    yaml_text += " ".join(t.text for t in project.singular_tests.values()) + _check_texts(project)
    diags = []
    for name, spec in project.vars.items():
        if name not in used and name not in yaml_text:
            diags.append(
                warning(
                    "PZ0222",
                    f"variable '{name}' is declared but never used",
                    file=spec.place.file,
                    line=spec.place.line,
                    col=spec.place.col,
                )
            )
    return diags


def _check_texts(project: Project) -> str:
    """The options and `where` of every check: a var() there is used."""
    checks = [c for s in project.sources.values() for d in s.datasets.values() for c in d.checks]
    checks += [c for p in project.pipelines.values() if p.sidecar for c in p.sidecar.checks]
    return " ".join(f"{c.options} {c.where or ''}" for c in checks)


def _dead_leaves(infos: dict[str, PipelineInfo]) -> list[Diagnostic]:
    consumed = {r for info in infos.values() for r in info.refs}
    return [
        warning(
            "PZ0223", f"pipeline '{name}' has no INSERT INTO and no ref() consumer", file=info.source.file
        )
        for name, info in sorted(infos.items())
        if not info.ephemeral and not info.sinks and name not in consumed
    ]
