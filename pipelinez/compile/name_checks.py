"""Names pz cannot use as they are, refused at validate instead of changed or failing at run time.

- PZ0229 (tier 2): names that differ only by case where one name is meant: two pipelines (`P.sql` and
  `p.sql`), a pipeline and a dataset's staging table, two datasets' staging tables. DuckDB's identifiers
  ignore case, so staging holds one table for both ("already exists"), and a case-insensitive file system
  (macOS, Windows) one file. Names equal to the letter are PZ0204 and PZ0216.
- PZ0118 (tier 2): a `sink()` output name that is not one safe name (empty, a path separator, `.`/`..`, a
  control character): it becomes a file, folder, object or table name in every connector.
- PZ0119 (tier 4): two columns of a dataset or of a pipeline's result whose names differ only by case.
  DuckDB takes them for one: a contract cannot be created, and `CREATE TABLE … AS` renames the second to
  `A_1` silently, in staging and then in every sink.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from pipelinez.compile.inlining import inline_text
from pipelinez.compile.nodes import Node, PipelineNode
from pipelinez.compile.semantic import PipelineInfo
from pipelinez.compile.sql_inputs import CATALOG_VIEWS
from pipelinez.compile.templating import staging_table
from pipelinez.config.model import Project
from pipelinez.core.diagnostics import Diagnostic, Place, error

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_RENAMED = re.compile(r"(.*)_\d+", re.DOTALL)  # how CREATE TABLE … AS renames a column whose name is taken


@dataclass(frozen=True)
class _Named:
    """A staging table name and what claims it."""

    name: str  # the staging table name
    what: str  # "pipeline 'P' (pipelines/P.sql)"
    place: Place
    dataset: tuple[str, str] | None = None


def case_clashes(project: Project) -> tuple[list[Diagnostic], set[tuple[str, str]]]:
    """(PZ0229 for every name that differs from an earlier one only by case, the (source, dataset) pairs
    that lost a clash: pipelines reading them are not compiled further). Each error is at the later name
    (pipelines, then datasets, each sorted) and names the earlier one."""
    named = [
        _Named(name, f"pipeline '{name}' ({pipe.file})", Place(pipe.file))
        for name, pipe in sorted(project.pipelines.items())
    ]
    for src, spec in sorted(project.sources.items()):
        for dataset, ds in sorted(spec.datasets.items()):
            table = staging_table(src, dataset)
            what = f"source '{src}' dataset '{dataset}' ({spec.file}, staged as '{table}')"
            named.append(_Named(table, what, ds.place, (src, dataset)))
    first: dict[str, _Named] = {}
    diags: list[Diagnostic] = []
    lost: set[tuple[str, str]] = set()
    for item in named:
        if item.name.casefold() in CATALOG_VIEWS:
            diags.append(
                error(
                    "PZ0238",
                    f"{item.what} has the name of one of DuckDB's own catalog views, which staging cannot "
                    "hold as a table",
                    place=item.place,
                )
            )
        earlier = first.setdefault(item.name.casefold(), item)
        if earlier is item or earlier.name == item.name:  # the same name exactly: PZ0204 / PZ0216
            continue
        diags.append(
            error(
                "PZ0229",
                f"{item.what} and {earlier.what} differ only by case: staging (DuckDB) and case-insensitive "
                "file systems take them for one name",
                place=item.place,
            )
        )
        if item.dataset is not None:
            lost.add(item.dataset)
    return diags, lost


def unsafe_output_names(infos: Mapping[str, PipelineInfo]) -> list[Diagnostic]:
    """PZ0118 for every sink() output name that is not one safe name, at its call."""
    diags = []
    for info in infos.values():
        for (sink, output), place in zip(info.sinks, info.sink_places, strict=True):
            why = unsafe_output_name(output)
            if why:
                diags.append(
                    error(
                        "PZ0118",
                        f"pipeline '{info.name}': sink('{sink}', {output!r}) names an output that {why}; an "
                        "output name becomes a file, folder, object or table name",
                        place=place,
                    )
                )
    return diags


def unsafe_output_name(name: str) -> str | None:
    """Why `name` is not one safe output name (PZ0118), or None."""
    if not name.strip():
        return "is empty"
    if name in (".", ".."):
        return f"is {name!r}"
    if "/" in name or "\\" in name:
        return "holds a path separator"
    if _CONTROL.search(name):
        return "holds a control character"
    return None


def column_clash(columns: Iterable[str]) -> tuple[str, str] | None:
    """The first two column names that differ only by case, or None. (Two equal names, as a `SELECT *`
    over a join gives, are DuckDB's usual `id`, `id_1` and not refused here.)"""
    seen: dict[str, str] = {}
    for column in columns:
        other = seen.setdefault(column.casefold(), column)
        if other != column:
            return other, column
    return None


def column_clash_error(what: str, pair: tuple[str, str], place: Place, fix: str) -> Diagnostic:
    """PZ0119 for `what` ("dataset 'files.orders'", "pipeline 'p'")."""
    return error(
        "PZ0119",
        f"{what} has columns '{pair[0]}' and '{pair[1]}', whose names differ only by case: staging (DuckDB) "
        f"takes them for one column and would rename '{pair[1]}' in every sink",
        place=place,
        next_step=fix,
    )


def result_column_clashes(
    nodes: Mapping[str, Node],
    infos: Mapping[str, PipelineInfo],
    stored_columns: Callable[[str], Sequence[str] | None],
    query_columns: Callable[[str], Sequence[str] | None],
) -> list[Diagnostic]:
    """PZ0119 for every pipeline whose query's result holds two columns differing only by case.
    A materialized pipeline's `stored_columns` are those of the table tier 4 created (free to read): its
    query is described again (`query_columns`) only when one of them looks renamed (`A_1`), so tier 4 still
    binds each such pipeline once. An ephemeral pipeline is described on its own (its readers see the
    clash renamed already)."""
    diags = []
    for name, node in nodes.items():
        if not isinstance(node, PipelineNode):
            continue
        stored = stored_columns(name)
        if stored and _may_be_renamed(stored):
            diags += _clash(name, query_columns(node.display_sql), node.place)
    for name, info in infos.items():
        if info.ephemeral:
            sql = inline_text(info.display_query, dict(infos), name, display=True)
            diags += _clash(name, query_columns(sql), Place(info.source.file))
    return diags


def _may_be_renamed(columns: Sequence[str]) -> bool:
    """Whether CREATE TABLE … AS may have renamed one of these columns: one is `<name>_<digits>` and
    another is `<name>` but for case (the first column of a name keeps it; each later one whose name is
    taken, whatever its case, becomes `<name>_<n>`). `extra_1` beside no `extra` was written so."""
    bases = [
        found.group(1).lower()
        for column in columns
        if column[-1:].isdigit() and (found := _RENAMED.fullmatch(column))  # the digit: no regex for most
    ]
    return bool(bases) and not {column.lower() for column in columns}.isdisjoint(bases)


def _clash(pipeline: str, columns: Sequence[str] | None, place: Place) -> list[Diagnostic]:
    pair = column_clash(columns or ())
    if pair is None:
        return []
    fix = f"give one of them another name with AS in {place.file}"
    return [column_clash_error(f"pipeline '{pipeline}'", pair, place, fix)]
