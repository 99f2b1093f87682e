"""Building the node graph: source loads, pipelines, checks, sink writes; refs resolved; content-hash ids."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from pipelinez.compile.checks import check_sql
from pipelinez.compile.graph import topological_order
from pipelinez.compile.ids import content_id
from pipelinez.compile.instances import ResolvedInstance
from pipelinez.compile.semantic import PipelineInfo
from pipelinez.compile.templating import REF_TOKEN_RE, TemplateFailure, Templater, staging_table
from pipelinez.compile.values import ResolvedValues
from pipelinez.config.model import CheckSpec, Project
from pipelinez.core.diagnostics import Diagnostic, Place, error
from pipelinez.core.redact import Redactor
from pipelinez.core.sqlnames import quote_ident

from .nodes import (
    CHECK,
    PIPELINE,
    SINK_WRITE,
    SOURCE_LOAD,
    CheckNode,
    Node,
    PipelineNode,
    SinkWriteNode,
    SourceLoadNode,
)

_SOURCE_CALL = re.compile(r"""^\s*source\(\s*['"]([A-Za-z_]\w*)['"]\s*,\s*['"]([A-Za-z_]\w*)['"]\s*\)\s*$""")


@dataclass
class CompiledDag:
    """A validated project: nodes in dependency order, plus the warnings compile noticed."""

    project: Project
    values: ResolvedValues
    sources: dict[str, ResolvedInstance]
    sinks: dict[str, ResolvedInstance]
    nodes: dict[str, Node]  # name -> node, in topological order
    warnings: list[Diagnostic] = field(default_factory=list)
    redactor: Redactor = field(default_factory=Redactor)

    @property
    def edges(self) -> dict[str, tuple[str, ...]]:
        return {name: node.deps for name, node in self.nodes.items()}


def strip_trailing_semicolons(query: str) -> str:
    return re.sub(r";\s*$", "", query.rstrip())


class _RefResolver:
    """Resolves ref tokens: materialized pipelines → their staging table; ephemerals → inlined query."""

    def __init__(self, infos: dict[str, PipelineInfo]):
        self.infos = infos

    def resolve(self, query: str, display: bool = False) -> str:
        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            info = self.infos[name]
            if info.ephemeral:
                inner = info.display_query if display else info.query
                return "(\n" + strip_trailing_semicolons(self.resolve(inner, display)) + "\n)"
            return quote_ident(name)

        return REF_TOKEN_RE.sub(replace, query)

    def reads(self, name: str) -> tuple[list[tuple[str, str]], list[str]]:
        """(source datasets, materialized pipelines) a pipeline reads, looking through ephemerals."""
        reads = list(self.infos[name].reads)
        tables: list[str] = []
        for ref in self.infos[name].refs:
            if self.infos[ref].ephemeral:
                inner_reads, inner_tables = self.reads(ref)
                reads += inner_reads
                tables += inner_tables
            else:
                tables.append(ref)
        return list(dict.fromkeys(reads)), list(dict.fromkeys(tables))


def check_target(to: str, project: Project, infos: dict[str, PipelineInfo]) -> str | None:
    """The node name a relationships `to:` names: a pipeline or source('src', 'dataset')."""
    match = _SOURCE_CALL.match(to)
    if match:
        src, dataset = match.groups()
        if src in project.sources and dataset in project.sources[src].datasets:
            return staging_table(src, dataset)
        return None
    if to in infos and not infos[to].ephemeral:
        return to
    return None


def build_nodes(
    project: Project,
    infos: dict[str, PipelineInfo],
    sources: dict[str, ResolvedInstance],
    sinks: dict[str, ResolvedInstance],
    templater: Templater | None = None,
) -> tuple[dict[str, Node], list[Diagnostic]]:
    resolver = _RefResolver(infos)
    diags: list[Diagnostic] = []
    specs: dict[str, dict[str, Any]] = {}  # name -> kwargs except id
    payloads: dict[str, dict[str, Any]] = {}
    blocking_checks: dict[str, list[str]] = {}  # checked node -> its error-severity check nodes
    loads: dict[tuple[str, str], str] = {}

    def add_load(src: str, dataset: str) -> None:
        if (src, dataset) in loads:
            return
        table = staging_table(src, dataset)
        loads[(src, dataset)] = table
        spec = project.sources[src]
        ds = spec.datasets[dataset]
        specs[table] = {
            "cls": SourceLoadNode,
            "name": table,
            "kind": SOURCE_LOAD,
            "deps": (),
            "place": ds.place,
            "source": src,
            "dataset": dataset,
            "table": table,
            "retry": (spec.retry, ds.retry),
        }
        inst = sources[src]
        payloads[table] = {
            "source": src,
            "dataset": dataset,
            "connector": spec.connector,
            "connection": inst.connection,
            "options": inst.blocks.get(dataset, {}),
            "columns": ds.columns,
        }
        add_checks(table, ds.checks, ())

    def add_checks(target: str, checks: tuple[CheckSpec, ...], tags: tuple[str, ...]) -> None:
        for raw_check in checks:
            check = raw_check
            if templater is not None and check.place.file:
                try:  # {{ var() }} / {{ env() }} may appear in any YAML string, check options included
                    options = templater.render_tree(check.options, check.place.file, check.place)[0]
                    check = dataclasses.replace(check, options=options)
                except TemplateFailure as exc:
                    diags.append(exc.diagnostic)
                    continue
            name = f"chk_{target}__{check.name}"
            ref_table = None
            deps = [target]
            if check.type == "relationships":
                to = check_target(str(check.options.get("to", "")), project, infos)
                if to is None:
                    diags.append(
                        error(
                            "PZ0219",
                            f"check '{check.name}' on '{target}': `to: "
                            f"{check.options.get('to')}` names no pipeline or declared "
                            "source dataset",
                            place=check.place,
                        )
                    )
                    continue
                ref_table = quote_ident(to)
                deps.append(to)
                source_call = _SOURCE_CALL.match(str(check.options.get("to", "")))
                if source_call:  # a dataset no pipeline reads is still staged for the check
                    add_load(*source_call.groups())
            sql = check_sql(check, quote_ident(target), ref_table)
            specs[name] = {
                "cls": CheckNode,
                "name": name,
                "kind": CHECK,
                "deps": tuple(deps),
                "place": check.place,
                "tags": tags,
                "target": target,
                "check": check,
                "sql": sql,
            }
            payloads[name] = {"sql": sql, "severity": check.severity}
            if check.severity == "error":
                blocking_checks.setdefault(target, []).append(name)

    for name in sorted(infos):
        if infos[name].ephemeral:
            continue
        for src, dataset in resolver.reads(name)[0]:
            add_load(src, dataset)

    for name, info in sorted(infos.items()):
        if info.ephemeral:
            continue
        reads, tables = resolver.reads(name)
        deps = [loads[r] for r in reads] + tables
        sql = resolver.resolve(info.query)
        specs[name] = {
            "cls": PipelineNode,
            "name": name,
            "kind": PIPELINE,
            "deps": tuple(dict.fromkeys(deps)),
            "place": Place(info.source.file),
            "tags": info.source.tags,
            "pipeline": name,
            "sql": sql,
            "display_sql": resolver.resolve(info.display_query, display=True),
            "sinks": tuple(info.sinks),
        }
        payloads[name] = {"pipeline": name, "sql": sql}
        add_checks(name, info.source.sidecar.checks if info.source.sidecar else (), info.source.tags)

    for name, info in sorted(infos.items()):
        if info.ephemeral:
            continue  # never a node: its sink clauses are PZ0218 (tier 2)
        for (sink, output), place in zip(info.sinks, info.sink_places, strict=True):
            if sink not in project.sinks:
                continue
            node_name = f"{sink}.{output}"
            sink_spec = project.sinks[sink]
            out = sink_spec.outputs.get(output)
            write_deps = (name, *blocking_checks.get(name, []))
            specs[node_name] = {
                "cls": SinkWriteNode,
                "name": node_name,
                "kind": SINK_WRITE,
                "deps": write_deps,
                "place": place,
                "tags": info.source.tags,
                "sink": sink,
                "output": output,
                "pipeline": name,
                "retry": (sink_spec.retry, out.retry if out else None),
            }
            inst = sinks[sink]
            payloads[node_name] = {
                "sink": sink,
                "output": output,
                "connector": sink_spec.connector,
                "connection": inst.connection,
                "options": inst.blocks.get(output, {}),
                "strategy": out.strategy if out else "replace",
                "keys": list(out.keys) if out else [],
                "on_delete": out.on_delete if out else None,
                "duplicates": out.duplicates if out else None,
                "allow_empty": out.allow_empty if out else False,
            }

    # write-audit-publish: whatever reads a checked table also waits for its error-severity checks
    for entry in specs.values():
        if entry["kind"] == PIPELINE:
            deps = list(entry["deps"])
            entry["deps"] = tuple(dict.fromkeys(deps + [c for d in deps for c in blocking_checks.get(d, [])]))

    order = topological_order({n: tuple(s["deps"]) for n, s in specs.items()})
    nodes: dict[str, Node] = {}
    for name in order:
        kwargs = dict(specs[name])
        cls = kwargs.pop("cls")
        if "retry" in kwargs:
            kwargs["retry"] = tuple(r for r in kwargs["retry"] if r is not None)
        input_ids = [nodes[d].id for d in kwargs["deps"]]
        node_id = content_id(str(kwargs["kind"]), payloads[name], input_ids)
        nodes[name] = cls(id=node_id, **kwargs)
    return nodes, diags
