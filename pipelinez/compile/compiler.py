"""The compile facade: tiers 2-4 over a loaded project, every diagnostic of every tier gathered.

A later tier runs only where the earlier ones passed: pipelines with tier-2 errors (and what depends on
them) are not dry-compiled; tier 3 runs on every instance file whatever the pipelines say.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pipelinez.compile import not_built
from pipelinez.compile.append_duplicates import check_incremental_outputs, yaml_incremental
from pipelinez.compile.bind_cache import BindCache
from pipelinez.compile.bounds import read_bounds
from pipelinez.compile.connector_static import validate_instances
from pipelinez.compile.dag import CompiledDag, build_nodes
from pipelinez.compile.described import Described, LastStaging, unknown_doc_columns
from pipelinez.compile.described import describe as describe_tables
from pipelinez.compile.doc_refs import doc_problems
from pipelinez.compile.dry_compile import DryCompiler
from pipelinez.compile.graph import descendants
from pipelinez.compile.incremental import IncrementalSpec
from pipelinez.compile.incremental_yaml import yaml_specs
from pipelinez.compile.inlining import inline
from pipelinez.compile.instances import resolve_instances
from pipelinez.compile.name_checks import case_clashes, result_column_clashes, unsafe_output_names
from pipelinez.compile.nodes import Node, SinkWriteNode, SourceLoadNode
from pipelinez.compile.output_overlaps import owned_overlaps
from pipelinez.compile.pins import check_pins
from pipelinez.compile.render_cache import RenderCache
from pipelinez.compile.semantic import PipelineInfo, analyse_pipelines
from pipelinez.compile.singular import analyse_singular
from pipelinez.compile.staging import resolve_staging
from pipelinez.compile.state_block import resolve_state
from pipelinez.compile.stored_watermarks import StoredMark, check_stored, shared_table
from pipelinez.compile.targets import shared_targets
from pipelinez.compile.templating import Templater
from pipelinez.compile.tier_gates import tier_gates
from pipelinez.compile.values import resolve_values
from pipelinez.compile.watermark_bounds import SqlLowerBounds, sql_lower_bounds
from pipelinez.compile.watermark_rules import check_sql_incremental, render_literals, substitute
from pipelinez.config.model import Project
from pipelinez.core.diagnostics import Diagnostic, error, sort_diagnostics
from pipelinez.core.redact import Redactor
from pipelinez.core.run_state import RunState, Watermark


@dataclass
class CompileResult:
    """A compile's graph and every diagnostic of tiers 2-4."""

    dag: CompiledDag | None
    errors: list[Diagnostic] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    # every incremental dataset by (source, dataset), whichever route declared it
    incremental: dict[tuple[str, str], IncrementalSpec] = field(default_factory=dict)
    described: Described | None = None  # with compile_project(describe=True)
    # what connectors told of datasets' columns without connecting ("<source>.<dataset>" -> columns or
    # None): facts of the data, not of the project files, that a cached compile must still find true
    told: dict[str, list[tuple[str, str]] | None] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.dag is not None and not self.errors


# tier-2 errors about where a pipeline writes, not what its query reads: its query is still dry-compiled
_QUERY_STILL_BINDS = frozenset(
    {"PZ0118", "PZ0201", "PZ0206", "PZ0208", "PZ0218", "PZ0228", "PZ0231", "PZ0236", "PZ0237"}
)


def static_schema_lookup(
    project: Project,
    fetched: Mapping[str, list[tuple[str, str]]] | None = None,
    last_staging: LastStaging | None = None,
    told: dict[str, list[tuple[str, str]] | None] | None = None,
) -> Callable[[SourceLoadNode], list[tuple[str, str]] | None]:
    """A dataset's columns: its contract, else the schema `--connect` fetched (this run's, then the cache's),
    else what its connector tells without connecting (recorded in `told`); with `last_staging` (lineage and
    `pz docs` only), else what the newest run staged."""
    cache = {**cached_schemas(project.state_dir), **(fetched or {})}
    told_by_connectors = told

    def lookup(node: SourceLoadNode) -> list[tuple[str, str]] | None:
        request = node.work.request
        if request.columns:
            return list(request.columns.items())
        if f"{node.source}.{node.dataset}" in cache:
            return cache[f"{node.source}.{node.dataset}"]
        told = None
        try:
            connector = node.work.endpoint.connect()
            try:
                told = connector.static_schema(request)
            finally:
                connector.close()
        except Exception:  # a schema we can't tell cheaply: compile loosely (PZ0406 says so)
            told = None
        if told_by_connectors is not None:
            told_by_connectors[f"{node.source}.{node.dataset}"] = told
        if told is None and last_staging is not None:
            return last_staging.columns(node.table)
        return told

    return lookup


def compile_project(
    project: Project,
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    watermarks: Mapping[tuple[str, str], str | Watermark] | None = None,
    schemas: Mapping[str, list[tuple[str, str]]] | None = None,
    describe: bool = False,
    ids: bool = True,
) -> CompileResult:
    """Tiers 2-4. `watermarks` holds the committed watermark of each (source, dataset) from
    `.pz/state.duckdb` (none for a full refresh), or only the text of its value (`2024-05-01 10:00:00.5`,
    `42`): watermark() renders it cast to the cursor's type (none given: the start value, or a literal
    admitting every row), and it sets each incremental load's read bounds. One that no longer fits its
    dataset (another cursor column, not a finite value of its type) is PZ0235. `schemas` are the datasets'
    schemas `validate --connect` has just fetched ("<source>.<dataset>" -> columns), bound before the cached
    ones. `describe`: also gather what lineage and `pz docs` read (`CompileResult.described`). `ids=False`:
    the nodes without their content-hash ids (what runs: not needed to validate; `dag.with_ids`)."""
    errors: list[Diagnostic] = []
    warnings: list[Diagnostic] = []
    values, found = resolve_values(project, overrides or {}, environ)
    errors += [d for d in found if d.is_error]
    warnings += [d for d in found if not d.is_error]
    renders = RenderCache.of(project.root, values, project.macro_files)
    templater = Templater(values, project.macro_files, renders)
    errors += templater.macro_problems
    redactor = Redactor(values.secrets)
    sources, sinks, found = resolve_instances(project, templater)
    errors += found
    staging, found = resolve_staging(project, templater)
    errors += found
    state, found = resolve_state(project, templater)
    errors += found
    infos, found, warned = analyse_pipelines(project, templater)
    errors += found
    warnings += warned
    singular, found = analyse_singular(project, templater)
    errors += found
    if renders is not None:
        renders.save()
    found, clashed = case_clashes(project)
    errors += found + unsafe_output_names(infos) + doc_problems(project)
    yaml_route, found = yaml_specs(project, templater)
    errors += found
    found = not_built.check(project) + check_pins(project)
    errors += [d for d in found if d.is_error]
    warnings += [d for d in found if not d.is_error]

    reads = _incremental_reads(project, infos, yaml_route, watermarks)
    errors += reads.errors
    specs, committed, lowers = reads.specs, reads.committed, reads.lowers

    # tier 3
    by_file = {inst.spec.file: inst for inst in [*sources.values(), *sinks.values()]}
    errors += validate_instances(project, by_file, project.locate)
    errors += shared_targets(project, infos, sinks)
    errors += owned_overlaps(project, infos, sources, sinks)

    good = _bindable(project, infos, errors, clashed)
    # each incremental load's read bounds: from the committed watermark, the SQL route's from what its
    # comparisons evaluate to
    bounds = {
        key: read_bounds(spec, committed.get(key), lowers.bounds.get(key)) for key, spec in specs.items()
    }
    tests = {k: i for k, i in singular.items() if _test_bindable(project, i, good)}
    nodes, found = build_nodes(project, good, sources, sinks, templater, bounds, tests, ids)
    errors += found
    errors += tier_gates(nodes, project)  # tier 3: what a node's tier cannot honour (PZ0312, PZ0313)

    # tier 4
    found, warned, described, told = _tier4(project, nodes, good, schemas, describe)
    errors += found
    warnings += warned
    # a watermark() expression that does not type-check: tier 4 said so in the pipeline, else PZ0224 does
    errors += [d for d in lowers.unless_bound if not any(e.place.file == d.place.file for e in errors)]

    dag = CompiledDag(project, values, sources, sinks, nodes, warnings, redactor, staging, state)
    return CompileResult(
        dag, _redacted(errors, redactor), _redacted(warnings, redactor), specs, described, told
    )


def _tier4(
    project: Project,
    nodes: dict[str, Node],
    good: dict[str, PipelineInfo],
    schemas: Mapping[str, list[tuple[str, str]]] | None,
    describe: bool,
) -> tuple[list[Diagnostic], list[Diagnostic], Described | None, dict[str, list[tuple[str, str]] | None]]:
    """The dry compile of every node in DuckDB: (errors, warnings, what `describe` gathers, the datasets'
    columns the schema lookup was told)."""
    last_staging = LastStaging(project.state_dir) if describe else None
    told: dict[str, list[tuple[str, str]] | None] = {}
    compiler = DryCompiler(
        static_schema_lookup(project, schemas, last_staging, told),
        lambda name: inline(good[name].display_query, good, name, display=True)[1] if name in good else [],
        external_access=project.engine.external_access,
        binds=BindCache(None if project.engine.external_access else project.state_dir / "target"),
    )
    try:
        found, warned = compiler.run(nodes)
        compiler.binds.save()
        found += _write_columns(project, nodes, compiler)
        found += result_column_clashes(nodes, good, compiler.columns_of, compiler.query_columns)
        warned += unknown_doc_columns(project, good, compiler.columns_of)
        if describe:
            compiler.materialize_all()
        described = describe_tables(compiler.con, good) if describe else None
    finally:
        compiler.close()
        if last_staging is not None:
            last_staging.close()
    return found, warned, described, told


@dataclass
class _IncrementalReads:
    """Both routes of incremental reads resolved: one IncrementalSpec per dataset, the committed watermarks
    that still fit them, the SQL route's lower bounds, and every error found on the way."""

    specs: dict[tuple[str, str], IncrementalSpec]
    committed: dict[tuple[str, str], str]  # the watermark values that still fit their specs
    lowers: SqlLowerBounds
    errors: list[Diagnostic]


def _incremental_reads(
    project: Project,
    infos: dict[str, PipelineInfo],
    yaml_route: dict[tuple[str, str], IncrementalSpec],
    watermarks: Mapping[tuple[str, str], str | Watermark] | None,
) -> _IncrementalReads:
    """The SQL route of incremental reads (PZ0224-PZ0227, its watermark() literals substituted into the
    pipelines), then PZ0214 and PZ0231 over both routes. Both routes resolve to one IncrementalSpec per
    dataset (PZ0225 keeps them apart); a stored watermark that no longer fits its spec is PZ0235."""
    sql_route = check_sql_incremental(project, infos)
    errors = list(sql_route.errors)
    specs = {**yaml_route, **sql_route.specs}
    committed, found = check_stored(
        specs, _stored(watermarks), RunState(project.state_dir).shown, shared_table(project)
    )
    errors += found
    if any(key in committed for key in sql_route.declared):
        sql_route.literals = render_literals(project, infos, sql_route, committed)
    substitute(infos, sql_route.literals)
    lowers = sql_lower_bounds(sql_route, sql_route.literals, committed)
    errors += lowers.errors
    incremental = yaml_incremental(project) | set(sql_route.declared)
    errors += check_incremental_outputs(project, infos, incremental)
    return _IncrementalReads(specs, committed, lowers, errors)


def _bindable(
    project: Project,
    infos: dict[str, PipelineInfo],
    errors: list[Diagnostic],
    clashed: set[tuple[str, str]],
) -> dict[str, PipelineInfo]:
    """The pipelines tier 4 binds: not those with a tier-2 error about what they read (or a read of a
    dataset that lost a case clash), nor their dependents; none at all behind a cycle (PZ0205)."""
    if any(d.code == "PZ0205" for d in errors):
        return {}
    bad_files = {d.place.file for d in errors if d.code not in _QUERY_STILL_BINDS}
    bad = {
        n
        for n, i in infos.items()
        if i.source.file in bad_files
        or any(r not in infos for r in i.refs)
        or any(s not in project.sources or d not in project.sources[s].datasets for s, d in i.reads)
        or any(read in clashed for read in i.reads)
    }
    edges = {n: [r for r in i.refs if r in infos] for n, i in infos.items()}
    bad |= descendants(edges, sorted(bad))
    return {n: i for n, i in infos.items() if n not in bad}


def _test_bindable(project: Project, test: PipelineInfo, good: Mapping[str, PipelineInfo]) -> bool:
    """A singular test becomes a node when all it reads is there: bindable pipelines, declared datasets
    (a source whose file failed tier 1 is reported there, not here)."""
    return all(r in good for r in test.refs) and all(
        s in project.sources and d in project.sources[s].datasets for s, d in test.reads
    )


def _stored(
    watermarks: Mapping[tuple[str, str], str | Watermark] | None,
) -> dict[tuple[str, str], StoredMark]:
    return {
        key: StoredMark(mark) if isinstance(mark, str) else StoredMark(mark.value, mark.column)
        for key, mark in (watermarks or {}).items()
    }


def _write_columns(project: Project, nodes: dict[str, Node], compiler: DryCompiler) -> list[Diagnostic]:
    """Merge keys and the on_delete column must be result columns: refused before data moves."""
    diags = []
    for node in nodes.values():
        if not isinstance(node, SinkWriteNode):
            continue
        out = project.sinks[node.sink].outputs.get(node.output)
        columns = compiler.columns_of(node.pipeline) if out else None
        if out is None or columns is None:
            continue
        request = node.work.request
        wanted = [("key", k) for k in request.keys] + (
            [("on_delete column", request.on_delete)] if request.on_delete else []
        )
        for what, column in wanted:
            if column not in columns:
                diags.append(
                    error(
                        "PZ0412",
                        f"sink '{node.sink}' output '{node.output}': {what} '{column}' is not a column of "
                        f"pipeline '{node.pipeline}' (columns: {', '.join(columns)})",
                        place=out.place,
                        next_step="name a column the pipeline selects, or add it to the pipeline's query",
                    )
                )
    return diags


# messages about a secret's length: pz's own words and the variable's name, never its value; masking a short
# secret in them would rewrite the very warning that explains it
_ABOUT_A_SECRET = frozenset({"PZ0115", "PZ0122"})


def _redacted(diags: list[Diagnostic], redactor: Redactor) -> list[Diagnostic]:
    """Sorted, deduplicated, and with no secret value left in any message."""
    return [
        d
        if d.code in _ABOUT_A_SECRET
        else dataclasses.replace(d, message=redactor(d.message), next_step=redactor(d.next_step))
        for d in sort_diagnostics(diags)
    ]


def cached_schemas(state_dir: Path) -> dict[str, list[tuple[str, str]]]:
    """`.pz/target/schemas.json`: {"<source>.<dataset>": [[column, type], ...]} written by --connect."""
    path = state_dir / "target" / "schemas.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {k: [(str(c), str(t)) for c, t in v] for k, v in data.get("datasets", data).items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}
