"""The SQL route of incremental reads, checked: PZ0224-PZ0227, gated in the order of "Validation and errors",
all reported at once; the `IncrementalSpec` of every SQL-declared dataset; and the literal each watermark()
call renders.

1. PZ0224, per watermark() call: the call names a dataset the pipeline source()s, and is a recognised
   lower-bound comparison on a cursor of that dataset (`watermark_sql`). A recognised call declares its
   dataset incremental with its cursor.
2. PZ0225 and PZ0227, per dataset a watermark() call names: not also declared in YAML (`sync: { mode:
   incremental }`), not windowed (windowed backfill is YAML-only), one cursor column across every pipeline;
   the cursor in the dataset's `columns:` contract with a type among int, bigint, decimal, date, timestamp.
3. PZ0226, per dataset that survived 2: every read of it, in every pipeline, is under a recognised
   watermark() filter. A pipeline already told about its call by PZ0224 is not told again here.

A project without watermark() calls pays nothing here and gets no diagnostic: these checks never change
what a YAML-declared or non-incremental project does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipelinez.compile.incremental import IncrementalRoute, IncrementalSpec
from pipelinez.compile.semantic import PipelineInfo
from pipelinez.compile.templating import WATERMARK_TOKEN_RE, Call, staging_table
from pipelinez.compile.watermark_literal import CURSOR_TYPES, cursor_type, watermark_literal
from pipelinez.config.model import DatasetSpec, Project
from pipelinez.core.diagnostics import Diagnostic, Place, error

if TYPE_CHECKING:  # the SQL analysis itself is imported only for a project whose pipelines call watermark()
    from pipelinez.compile.watermark_sql import Cause, Json, PipelineAnalysis

Key = tuple[str, str]


@dataclass(frozen=True)
class Declaration:
    """One recognised watermark() comparison."""

    pipeline: str
    call: Call
    cursor: str
    inclusive: bool
    value: Json | None = field(default=None, compare=False, repr=False)  # the value side's parse tree


@dataclass
class SqlIncremental:
    """The SQL route of incremental reads: declarations, specs, literals and errors."""

    errors: list[Diagnostic] = field(default_factory=list)
    specs: dict[Key, IncrementalSpec] = field(default_factory=dict)
    declared: dict[Key, list[Declaration]] = field(default_factory=dict)  # every recognised call, by dataset
    named: dict[Key, Place] = field(default_factory=dict)  # every dataset a watermark() call names: its first
    literals: dict[str, list[str]] = field(default_factory=dict)  # per pipeline, the text of each call


def check_sql_incremental(
    project: Project, infos: Mapping[str, PipelineInfo], watermarks: Mapping[Key, str] | None = None
) -> SqlIncremental:
    """Every diagnostic of the SQL route, the specs, and the literal of every watermark() call (rendered
    from `watermarks`; `render_literals` renders them again from other ones)."""
    result = SqlIncremental()
    calling = {n: made for n, i in infos.items() if (made := i.rendered.of("watermark"))}
    if not calling:
        return result
    from pipelinez.compile.watermark_sql import Recognized

    names = sorted(calling)
    analyses = _analyses(project, infos, calling, names)
    told: set[tuple[str, Key]] = set()  # (pipeline, dataset) already given a PZ0224

    # 1. PZ0224: each call
    for name in names:
        info = infos[name]
        for index, call in enumerate(calling[name]):
            key = (call.args[0], call.args[1])
            if key not in info.reads:
                told.add((name, key))
                result.errors.append(_not_sourced(name, call, project))
                continue
            if _dataset(project, key) is None:
                continue  # an undeclared dataset: PZ0202 on the source() call already
            result.named.setdefault(key, call.place)
            analysis = analyses.get(name)
            if analysis is None:
                continue  # DuckDB cannot parse the query: tier 4 says why
            outcome = analysis.outcome(index)
            if isinstance(outcome, Recognized):
                result.declared.setdefault(key, []).extend(
                    Declaration(name, call, found.cursor, found.inclusive, found.value)
                    for found in analysis.recognized(index)
                )
            else:
                told.add((name, key))
                result.errors.append(_unrecognized(name, call, outcome.cause, outcome.detail))

    # 2. PZ0225 and PZ0227: each dataset a call names
    failed: set[Key] = set()
    for key in sorted(result.named):
        dataset = _dataset(project, key)
        assert dataset is not None
        found = _routes(project, key, dataset, calling, infos) + _cursors(key, result.declared.get(key, []))
        found += _undeclared_cursor(project, key, dataset, result.declared.get(key, []))
        if found:
            failed.add(key)
            result.errors += found

    # 3. PZ0226: each read of each dataset that survived 2
    readers: dict[Key, list[str]] = {}
    for name in sorted(infos):
        for key in infos[name].reads:
            readers.setdefault(key, []).append(name)
    for key in sorted(result.declared):
        if key not in failed:
            result.errors += _unfiltered_reads(key, infos, readers[key], analyses, result.declared[key], told)

    for key, decls in sorted(result.declared.items()):
        dataset = _dataset(project, key)
        if key in failed or dataset is None:
            continue
        column, declared_type = _contract_entry(dataset, decls[0].cursor)
        result.specs[key] = IncrementalSpec(
            source=key[0],
            dataset=key[1],
            route=IncrementalRoute.SQL,
            cursor=column or decls[0].cursor,
            cursor_type=cursor_type(declared_type) if declared_type else None,
            inclusive=any(d.inclusive for d in decls),
            declared_by=tuple(sorted({d.pipeline for d in decls})),
        )
    result.literals = render_literals(project, infos, result, watermarks or {})
    return result


def substitute(infos: Mapping[str, PipelineInfo], literals: Mapping[str, list[str]]) -> None:
    """Put each watermark() call's literal in place of its placeholder in the pipeline's query text."""
    for name, texts in literals.items():
        info = infos.get(name)
        if info is None:
            continue

        def literal(match: re.Match[str], texts: list[str] = texts) -> str:
            index = int(match.group(1))
            return texts[index] if index < len(texts) else "NULL"

        info.query = WATERMARK_TOKEN_RE.sub(literal, info.query)
        info.display_query = WATERMARK_TOKEN_RE.sub(literal, info.display_query)


# ----------------------------------------------------------------------------------------------------------


def _dataset(project: Project, key: Key) -> DatasetSpec | None:
    source = project.sources.get(key[0])
    return source.datasets.get(key[1]) if source is not None else None


def _analyses(
    project: Project, infos: Mapping[str, PipelineInfo], calling: Mapping[str, list[Call]], names: list[str]
) -> dict[str, PipelineAnalysis | None]:
    """Each calling pipeline's query parsed once (all in one DuckDB call) and analysed."""
    from pipelinez.compile.watermark_sql import analyse, parse_queries

    trees = parse_queries([infos[n].query for n in names])
    out: dict[str, PipelineAnalysis | None] = {}
    for name, tree in zip(names, trees, strict=True):
        if tree is None:
            out[name] = None
            continue
        reads = [key for key in infos[name].reads if _dataset(project, key) is not None]
        staging = {staging_table(*key): key for key in reads}
        targets = {i: (c.args[0], c.args[1]) for i, c in enumerate(calling[name])}
        out[name] = analyse(tree, staging, targets)
    return out


def _call_words(call: Call) -> str:
    return f"watermark('{call.args[0]}', '{call.args[1]}')"


def _not_sourced(name: str, call: Call, project: Project) -> Diagnostic:
    exists = _dataset(project, (call.args[0], call.args[1])) is not None
    return error(
        "PZ0224",
        f"pipeline '{name}': {_call_words(call)} names a dataset the pipeline never source()s"
        + ("" if exists else " (and no source declares it)"),
        place=call.place,
        next_step=f"add {{{{ source('{call.args[0]}', '{call.args[1]}') }}}} to the pipeline's FROM clause "
        "and compare its cursor column, or name a dataset the pipeline reads",
    )


def _unrecognized(name: str, call: Call, cause: Cause, detail: str) -> Diagnostic:
    from pipelinez.compile.watermark_sql import Cause  # imported by check_sql_incremental already

    src, ds = call.args[0], call.args[1]
    example = f"<alias>.<cursor column> > {{{{ watermark('{src}', '{ds}') }}}}"
    hints = {
        Cause.UNQUALIFIED: f"qualify the cursor with its table's alias: {example}",
        Cause.WRONG_DATASET: f"compare a column of source('{src}', '{ds}'): {example}, or name that column's "
        "dataset in the watermark() call",
    }
    return error(
        "PZ0224",
        f"pipeline '{name}': {_call_words(call)} {detail}; a watermark() must be a lower bound on a column "
        f"of source('{src}', '{ds}')",
        place=call.place,
        next_step=hints.get(
            cause,
            f"rewrite as <cursor column> > / >= <expression containing {{{{ watermark('{src}', '{ds}') }}}}> "
            "in a WHERE clause",
        ),
    )


def _routes(
    project: Project,
    key: Key,
    dataset: DatasetSpec,
    calling: Mapping[str, list[Call]],
    infos: Mapping[str, PipelineInfo],
) -> list[Diagnostic]:
    """PZ0225 for a watermark() on a dataset that YAML already declares incremental, or windows."""
    sync = dataset.sync or {}
    windowed = sync.get("window") is not None
    if not windowed and sync.get("mode") != "incremental":
        return []
    file = project.sources[key[0]].file
    where = project.locate(file, ("datasets", key[1], "sync", "window" if windowed else "mode")).render()
    diags = []
    for name in sorted(calling):
        call = next((c for c in calling[name] if (c.args[0], c.args[1]) == key), None)
        if call is None or key not in infos[name].reads:
            continue
        if windowed:
            message = (
                f"pipeline '{name}': {_call_words(call)} targets a windowed dataset (sync: window: at "
                f"{where}); windowed backfill is YAML-only"
            )
            step = (
                "use YAML for windowed backfill: remove the watermark() comparison (the dataset's sync: "
                "already bounds each run's read)"
            )
        else:
            message = (
                f"source '{key[0]}' dataset '{key[1]}' is declared incremental twice: in YAML (sync: mode: "
                f"incremental at {where}) and in SQL by pipeline '{name}' ({_call_words(call)})"
            )
            step = (
                "pick one route: remove the watermark() comparison and keep YAML sync: { mode: "
                "incremental }, or remove sync: from the dataset and keep watermark()"
            )
        diags.append(error("PZ0225", message, place=call.place, next_step=step))
    return diags


def _cursors(key: Key, decls: list[Declaration]) -> list[Diagnostic]:
    """PZ0225 when the recognised calls for one dataset compare different cursor columns."""
    if not decls:
        return []
    first = decls[0]
    diags = []
    reported: set[tuple[str, str]] = set()
    for decl in decls[1:]:
        if decl.cursor.lower() == first.cursor.lower() or (decl.pipeline, decl.cursor.lower()) in reported:
            continue
        reported.add((decl.pipeline, decl.cursor.lower()))
        diags.append(
            error(
                "PZ0225",
                f"source '{key[0]}' dataset '{key[1]}': pipeline '{decl.pipeline}' compares cursor "
                f"'{decl.cursor}' with {_call_words(decl.call)}, but pipeline '{first.pipeline}' "
                f"({first.call.place.render()}) compares '{first.cursor}'",
                place=decl.call.place,
                next_step=f"make every watermark('{key[0]}', '{key[1]}') compare the same cursor column",
            )
        )
    return diags


def _contract_entry(dataset: DatasetSpec, cursor: str) -> tuple[str | None, str | None]:
    """(column as the contract spells it, its declared type), matched as DuckDB matches names."""
    for column, declared in (dataset.columns or {}).items():
        if column.lower() == cursor.lower():
            return column, declared
    return None, None


def _undeclared_cursor(
    project: Project, key: Key, dataset: DatasetSpec, decls: list[Declaration]
) -> list[Diagnostic]:
    """PZ0227 for each inferred cursor missing from the contract or of a type outside the allowed set."""
    diags = []
    file = project.sources[key[0]].file
    allowed = ", ".join(CURSOR_TYPES)
    for cursor in dict.fromkeys(d.cursor.lower() for d in decls):
        users = sorted({d.pipeline for d in decls if d.cursor.lower() == cursor})
        shown = next(d.cursor for d in decls if d.cursor.lower() == cursor)
        by = f"pipeline{'s' if len(users) > 1 else ''} {', '.join(repr(u) for u in users)}"
        column, declared = _contract_entry(dataset, cursor)
        if dataset.columns is None:
            problem = "has no columns: contract to declare it in"
            place = project.locate(file, ("datasets", key[1]))
        elif column is None:
            problem = "is not in the dataset's columns: contract"
            place = project.locate(file, ("datasets", key[1], "columns"))
        elif declared is not None and cursor_type(declared) is None:
            problem = f"is declared '{declared}', which is not a cursor type ({allowed})"
            place = project.locate(file, ("datasets", key[1], "columns", column))
        else:
            continue
        diags.append(
            error(
                "PZ0227",
                f"source '{key[0]}' dataset '{key[1]}': the watermark cursor '{shown}' (inferred from {by}) "
                f"{problem}",
                place=place,
                next_step=f"declare it under datasets: {key[1]}: columns: in {file}, e.g. {shown}: timestamp "
                f"(allowed: {allowed})",
            )
        )
    return diags


def _unfiltered_reads(
    key: Key,
    infos: Mapping[str, PipelineInfo],
    readers: list[str],
    analyses: Mapping[str, PipelineAnalysis | None],
    decls: list[Declaration],
    told: set[tuple[str, Key]],
) -> list[Diagnostic]:
    """PZ0226 for every pipeline that reads a SQL-declared dataset somewhere no recognised filter reaches."""
    declarers = sorted({d.pipeline for d in decls})
    cursor = decls[0].cursor
    diags = []
    for name in readers:
        info = infos[name]
        if (name, key) in told:
            continue
        if name in analyses:
            analysis = analyses[name]
            if analysis is None or key not in analysis.unfiltered:
                continue
            why = "reads it in a place no recognised watermark() comparison filters"
        else:
            why = "reads it with no watermark() filter"
        call = next(c for c in info.rendered.of("source") if (c.args[0], c.args[1]) == key)
        diags.append(
            error(
                "PZ0226",
                f"source '{key[0]}' dataset '{key[1]}' is declared incremental in SQL by pipeline"
                f"{'s' if len(declarers) > 1 else ''} {', '.join(repr(d) for d in declarers)}, but pipeline "
                f"'{name}' {why}: it would silently "
                "read only the rows after the watermark",
                place=call.place,
                next_step=f"add <alias>.{cursor} > {{{{ watermark('{key[0]}', '{key[1]}') }}}} to this "
                "pipeline's read of the dataset, or move the declaration into the dataset's YAML "
                f"sync: {{ mode: incremental, cursor: {cursor} }} and remove the watermark() comparisons",
            )
        )
    return diags


def render_literals(
    project: Project, infos: Mapping[str, PipelineInfo], result: SqlIncremental, watermarks: Mapping[Key, str]
) -> dict[str, list[str]]:
    """The text of each call: the literal of its dataset's cursor type, or NULL when none is known."""
    calling = {n: i.rendered.of("watermark") for n, i in infos.items() if i.rendered.of("watermark")}
    types: dict[Key, str | None] = {}
    for key, decls in result.declared.items():
        spec = result.specs.get(key)
        dataset = _dataset(project, key)
        if spec is not None:
            types[key] = spec.cursor_type
        elif dataset is not None:  # conflicting: the first cursor with an allowed type, so tier 4 still binds
            declared = (_contract_entry(dataset, d.cursor)[1] for d in decls)
            types[key] = next((t for t in map(lambda x: cursor_type(x) if x else None, declared) if t), None)
    return {
        name: [
            watermark_literal(types.get((c.args[0], c.args[1])), watermarks.get((c.args[0], c.args[1])))
            for c in calls
        ]
        for name, calls in calling.items()
    }
