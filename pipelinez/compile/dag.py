"""Building the node graph: source loads, pipelines, checks, sink writes; refs resolved; content-hash ids."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from pipelinez.compile.checks import check_sql
from pipelinez.compile.gates import gate_checks
from pipelinez.compile.graph import Unordered, topological_order
from pipelinez.compile.ids import Memo, content_id
from pipelinez.compile.inlining import inline_text
from pipelinez.compile.instances import ResolvedInstance
from pipelinez.compile.nodes import (
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
from pipelinez.compile.semantic import PipelineInfo
from pipelinez.compile.singular import singular_check, singular_sql
from pipelinez.compile.sink_views import is_view, sink_view
from pipelinez.compile.templating import TemplateFailure, Templater, staging_table
from pipelinez.compile.values import ResolvedValues
from pipelinez.compile.work import (
    CheckWork,
    Endpoint,
    PipelineWork,
    endpoint,
    engine_retry,
    sink_write_work,
    source_load_work,
)
from pipelinez.config.model import CheckSpec, Project
from pipelinez.connectors.sdk import ReadBounds
from pipelinez.core.diagnostics import Diagnostic, Place, error
from pipelinez.core.json_types import JsonObject
from pipelinez.core.redact import Redactor
from pipelinez.core.sqlnames import quote_ident
from pipelinez.core.vocabulary import CheckSeverity

_REF_CALL = re.compile(r"""^\s*ref\(\s*['"]([A-Za-z_]\w*)['"]\s*\)\s*$""")
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
    # the ray executor's object-store staging settings (engine.staging), real values: may hold secrets
    staging: JsonObject = field(default_factory=dict, repr=False)
    # the `state:` block rendered ({}: the local .pz/ folder), real values: may hold secrets
    state: JsonObject = field(default_factory=dict, repr=False)

    @property
    def edges(self) -> dict[str, tuple[str, ...]]:
        return {name: node.deps for name, node in self.nodes.items()}


class _RefResolver:
    """Resolves ref tokens: materialized pipelines → their staging table; ephemerals → inlined query."""

    def __init__(self, infos: dict[str, PipelineInfo]):
        self.infos = infos
        self._reads: dict[str, tuple[tuple[tuple[str, str], ...], tuple[str, ...]]] = {}  # `reads(name)`

    def resolve(self, name: str, display: bool = False) -> str:
        info = self.infos[name]
        return inline_text(info.display_query if display else info.query, self.infos, name, display)

    def resolve_both(self, name: str) -> tuple[str, str]:
        """(`resolve(name)`, `resolve(name, display=True)`): one resolution when no display text differs
        (no secret in the pipeline nor in an ephemeral it inlines)."""
        sql = self.resolve(name)
        if all(self.infos[n].display_query == self.infos[n].query for n in (name, *self._inlined(name))):
            return sql, sql
        return sql, self.resolve(name, display=True)

    def _inlined(self, name: str) -> list[str]:
        """The ephemeral pipelines `name` inlines, through ephemerals."""
        found: list[str] = []
        for ref in self.infos[name].refs:
            if self.infos[ref].ephemeral:
                found += [ref, *self._inlined(ref)]
        return found

    def reads(self, name: str) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
        """(source datasets, materialized pipelines) a pipeline reads, looking through ephemerals (tuples:
        worked out once per name, handed out as they are)."""
        known = self._reads.get(name)
        if known is not None:
            return known
        reads = list(self.infos[name].reads)
        tables: list[str] = []
        for ref in self.infos[name].refs:
            if self.infos[ref].ephemeral:
                inner_reads, inner_tables = self.reads(ref)
                reads += inner_reads
                tables += inner_tables
            else:
                tables.append(ref)
        found = self._reads[name] = tuple(dict.fromkeys(reads)), tuple(dict.fromkeys(tables))
        return found


def check_target(to: str, project: Project, infos: dict[str, PipelineInfo]) -> str | None:
    """The node name a relationships `to:` names: a pipeline (`name` or dbt's `ref('name')`) or
    source('src', 'dataset')."""
    ref_call = _REF_CALL.match(to)
    if ref_call:
        to = ref_call.group(1)
    match = _SOURCE_CALL.match(to)
    if match:
        src, dataset = match.groups()
        if src in project.sources and dataset in project.sources[src].datasets:
            return staging_table(src, dataset)
        return None
    if to in infos and not infos[to].ephemeral:
        return to
    return None


class _NodeBuilder:
    """Builds every node once, typed: source loads for what pipelines read, pipelines, their checks, sink
    writes; then the write-audit-publish dependencies, the dependency order and the content-hash ids."""

    def __init__(
        self,
        project: Project,
        infos: dict[str, PipelineInfo],
        sources: dict[str, ResolvedInstance],
        sinks: dict[str, ResolvedInstance],
        templater: Templater | None,
        bounds: Mapping[tuple[str, str], ReadBounds] | None = None,
        singular: Mapping[str, PipelineInfo] | None = None,
        ids: bool = True,
    ):
        self.project, self.infos, self.sources, self.sinks = project, infos, sources, sinks
        self.ids = ids
        self.singular = dict(singular or {})
        self.bounds = bounds or {}
        self.templater = templater
        self.resolver = _RefResolver(infos)
        self.retry = engine_retry(project)  # the policy of every pipeline and check: one cascade
        self.endpoints: dict[tuple[str, str], Endpoint] = {}  # ("source" | "sink", instance) -> endpoint
        self.diags: list[Diagnostic] = []
        self.nodes: dict[str, Node] = {}  # name -> node without its id yet
        self.blocking_checks: dict[str, list[str]] = {}  # checked node -> its error-severity check nodes
        self.loads: dict[tuple[str, str], str] = {}  # (source, dataset) -> source load node name

    def build(self) -> tuple[dict[str, Node], list[Diagnostic]]:
        for name in sorted(self.infos):
            if not self.infos[name].ephemeral:
                for src, dataset in self.resolver.reads(name)[0]:
                    self.add_source_load(src, dataset)
        for name, info in sorted(self.infos.items()):
            if not info.ephemeral:
                self.add_pipeline(name, info)
        for name, info in sorted(self.infos.items()):
            if info.ephemeral:
                continue  # never a node: its sink clauses are PZ0218 (tier 2)
            for (sink, output), place in zip(info.sinks, info.sink_places, strict=True):
                if sink in self.project.sinks:
                    self.add_sink_write(name, info, sink, output, place)
        for key, info in sorted(self.singular.items()):
            self.add_singular(key, info)
        return self.finish(), self.diags

    def add_source_load(self, src: str, dataset: str) -> None:
        if (src, dataset) in self.loads:
            return
        table = staging_table(src, dataset)
        self.loads[(src, dataset)] = table
        ds = self.project.sources[src].datasets[dataset]
        inst = self.sources[src]
        work = source_load_work(
            self.project,
            inst,
            dataset,
            table,
            self.bounds.get((src, dataset)),
            self._endpoint("source", inst),
        )
        self.nodes[table] = SourceLoadNode(table, SOURCE_LOAD, "", (), ds.place, work=work)
        self.add_checks(table, ds.checks, ())

    def add_pipeline(self, name: str, info: PipelineInfo) -> None:
        reads, tables = self.resolver.reads(name)
        deps = tuple(dict.fromkeys([*(self.loads[r] for r in reads), *tables]))
        sql, display = self.resolver.resolve_both(name)
        outside = self.project.engine.external_access
        view = info.source.materialized == "view"
        work = PipelineWork(sql, deps, self.retry, display, outside, view)
        place, tags = Place(info.source.file), info.source.tags
        self.nodes[name] = PipelineNode(
            name, PIPELINE, "", deps, place, tags, work=work, sinks=tuple(info.sinks)
        )
        self.add_checks(name, info.source.sidecar.checks if info.source.sidecar else (), tags)

    def add_sink_write(self, pipeline: str, info: PipelineInfo, sink: str, output: str, place: Place) -> None:
        name = f"{sink}.{output}"
        deps: tuple[str, ...] = (pipeline,)  # and the pipeline's error-severity checks: `finish`
        view = ("", "")
        out_spec = self.project.sinks[sink].outputs.get(output)
        if out_spec is not None and is_view(out_spec):
            found = sink_view(pipeline, self.infos, self.sinks[sink], out_spec, place)
            if isinstance(found, list):
                self.diags += found
                return
            view, deps = (found.sql, found.display_sql), (pipeline, *found.reads)  # after what it reads
        inst = self.sinks[sink]
        work = sink_write_work(self.project, inst, output, pipeline, view, self._endpoint("sink", inst))
        self.nodes[name] = SinkWriteNode(name, SINK_WRITE, "", deps, place, info.source.tags, work=work)
        spec = self.project.sinks[sink]
        caps = work.endpoint.caps
        if output not in spec.outputs and caps.strategies and work.strategy not in caps.strategies:
            # a declared output's strategy is checked in tier 3; an undeclared one is a replace
            self.diags.append(
                error(
                    "PZ0305",
                    f"sink '{sink}' output '{output}' has no entry in {spec.file}, so it is a "
                    f"{work.strategy}, which connector '{spec.connector}' cannot do (it supports: "
                    f"{', '.join(caps.strategies)})",
                    place=place,
                    next_step=f"declare it under outputs: in {spec.file} with strategy: {caps.strategies[0]}",
                )
            )

    def _endpoint(self, kind: str, inst: ResolvedInstance) -> Endpoint:
        """The instance's endpoint, built once: every load or write of one instance shares it (frozen)."""
        point = self.endpoints.get((kind, inst.name))
        if point is None:
            point = self.endpoints[(kind, inst.name)] = endpoint(self.project, inst)
        return point

    def add_checks(self, target: str, checks: tuple[CheckSpec, ...], tags: tuple[str, ...]) -> None:
        for raw_check in checks:
            check = self._rendered(raw_check)
            if check is None:
                continue
            name = f"chk_{target}__{check.name}"
            ref_table = None
            deps = [target]
            if check.type == "relationships":
                to = check_target(str(check.options.get("to", "")), self.project, self.infos)
                if to is None:
                    self.diags.append(
                        error(
                            "PZ0219",
                            f"check '{check.name}' on '{target}': `to: {check.options.get('to')}` names no "
                            "pipeline (name or ref('name')) or declared source dataset",
                            place=check.place,
                        )
                    )
                    continue
                ref_table = quote_ident(to)
                deps.append(to)
                source_call = _SOURCE_CALL.match(str(check.options.get("to", "")))
                if source_call:  # a dataset no pipeline reads is still staged for the check
                    self.add_source_load(*source_call.groups())
            sql = check_sql(check, quote_ident(target), ref_table)
            work = CheckWork(
                target,
                sql,
                check.severity,
                tuple(deps),
                check,
                self.retry,
                self.project.engine.external_access,
                thresholds=(check.warn_if, check.error_if),
            )
            self.nodes[name] = CheckNode(name, CHECK, "", tuple(deps), check.place, tags, work=work)
            if check.severity == CheckSeverity.ERROR:
                self.blocking_checks.setdefault(target, []).append(name)

    def add_singular(self, key: str, info: PipelineInfo) -> None:
        """A singular test (tests/*.sql): a check after all it reads, which gates nothing."""
        name = f"chk_{key}"
        if name in self.nodes:
            self.diags.append(
                error(
                    "PZ0247",
                    f"singular test {info.source.file} would be node '{name}', which is already the name of "
                    f"a check of '{self.nodes[name].deps[0]}'",
                    file=info.source.file,
                    next_step="rename the test file, or give that check its own `name:`",
                )
            )
            return
        infos = {**self.infos, key: info}
        resolver = _RefResolver(infos)
        reads, tables = resolver.reads(key)
        for src, dataset in reads:
            self.add_source_load(src, dataset)
        deps = tuple(dict.fromkeys([*(self.loads[r] for r in reads), *tables]))
        sql = singular_sql(resolver.resolve(key))
        check = singular_check(info)
        target = deps[0] if deps else name
        outside = self.project.engine.external_access
        work = CheckWork(target, sql, CheckSeverity.ERROR, deps, check, self.retry, outside)
        self.nodes[name] = CheckNode(name, CHECK, "", deps, check.place, (), work=work)

    def _rendered(self, check: CheckSpec) -> CheckSpec | None:
        """{{ var() }} / {{ env() }} may appear in any YAML string, check options included."""
        if self.templater is None or not check.place.file:
            return check
        try:
            file, block = check.place.file, check.options_path
            options = self.templater.render_tree(
                check.options,
                file,
                check.place,
                (lambda path: self.project.locate(file, (*block, *path), at="value")) if block else None,
            )[0]
            where = check.where
            if where is not None:  # config.where: a string value like any other
                where = str(self.templater.render_value(where, file, check.place)[0])
        except TemplateFailure as exc:
            self.diags.extend(exc.diagnostics)
            return None
        if where == check.where and options == check.options:  # no template in it (most checks): as is
            return check
        return dataclasses.replace(check, options=options, where=where)

    def finish(self) -> dict[str, Node]:
        # write-audit-publish: whatever reads a checked table also waits for its error-severity checks
        gated = {n for n, node in self.nodes.items() if isinstance(node, PipelineNode | SinkWriteNode)}
        waits = gate_checks({n: node.deps for n, node in self.nodes.items()}, gated, self.blocking_checks)
        for name, deps in waits.items():
            self.nodes[name] = dataclasses.replace(self.nodes[name], deps=deps)
        try:
            order = topological_order({n: node.deps for n, node in self.nodes.items()})
        except Unordered as exc:  # tier 2 refuses ref() cycles and gates close none: never dropped silently
            first = self.nodes[exc.left[0]]
            self.diags.append(
                error(
                    "PZ0205",
                    f"the node graph has a cycle ({' -> '.join(exc.cycle or [])}); these nodes cannot be "
                    f"ordered: {', '.join(exc.left)}",
                    place=first.place,
                    next_step="break the cycle shown: remove a ref() call or a relationships check's to:",
                )
            )
            return {}
        nodes = {name: self.nodes[name] for name in order}
        return with_ids(nodes) if self.ids else nodes


def with_ids(nodes: Mapping[str, Node]) -> dict[str, Node]:
    """`nodes`, in dependency order, each with its content-hash id (its inputs' ids in it)."""
    found: dict[str, Node] = {}
    memo: Memo = {}
    for name, node in nodes.items():
        node_id = content_id(node, [found[d].id for d in node.deps], memo)
        found[name] = dataclasses.replace(node, id=node_id)
    return found


def has_ids(nodes: Mapping[str, Node]) -> bool:
    """Whether `nodes` were given their ids (`build_nodes(ids=False)` leaves them out)."""
    return all(node.id for node in nodes.values())


def build_nodes(
    project: Project,
    infos: dict[str, PipelineInfo],
    sources: dict[str, ResolvedInstance],
    sinks: dict[str, ResolvedInstance],
    templater: Templater | None = None,
    bounds: Mapping[tuple[str, str], ReadBounds] | None = None,
    singular: Mapping[str, PipelineInfo] | None = None,
    ids: bool = True,
) -> tuple[dict[str, Node], list[Diagnostic]]:
    """Every node of the pipelines in `infos` (those that passed tier 2), typed, ordered, with their ids
    (none with `ids=False`: a validate runs nothing, and `with_ids` gives them later); an incremental
    dataset's load carries its read `bounds` (part of its id); the `singular` tests (`test__<stem>` ->
    info) as check nodes."""
    return _NodeBuilder(project, infos, sources, sinks, templater, bounds, singular, ids).build()
