"""Column-level lineage: for every column of every pipeline, the upstream columns it is computed from.

sqlglot does the reading (its DuckDB dialect, `optimizer.qualify` with the column types tier 4 bound, and its
`lineage` module over one scope per query): through CTEs, subqueries, joins (`USING` too), aggregates,
window functions, `UNION ALL` and `SELECT *` (with `EXCLUDE`/`REPLACE`). Each pipeline is read once, with
each ref() as the pipeline it names, so lineage goes from pipeline to pipeline (ephemeral ones too) back to
the source datasets' columns. Where a column cannot be traced, its `unresolved` says why, never a guess.
sqlglot is imported only here, and only when lineage is asked for.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelinez.compile.described import Described
from pipelinez.compile.nodes import Node, SourceLoadNode
from pipelinez.core.json_types import JsonObject

if TYPE_CHECKING:
    from sqlglot import exp

_LAST_PART = re.compile(r'(?:"((?:[^"]|"")*)"|([^."]+))$')
SOURCE = "source"
PIPELINE = "pipeline"


@dataclass(frozen=True, order=True)
class ColumnRef:
    kind: str  # "source" (a source dataset) or "pipeline"
    table: str  # "<source>.<dataset>" or the pipeline's name
    column: str

    def __str__(self) -> str:
        return f"{self.table}.{self.column}"


@dataclass(frozen=True)
class ColumnLineage:
    """One pipeline column and the columns (one step upstream) it is computed from."""

    pipeline: str
    column: str
    upstream: tuple[ColumnRef, ...] = ()
    unresolved: str | None = None  # why its upstream could not be traced (then `upstream` is what was)


@dataclass
class ProjectLineage:
    columns: dict[tuple[str, str], ColumnLineage] = field(default_factory=dict)  # (pipeline, column) ->

    def of(self, pipeline: str, column: str) -> ColumnLineage | None:
        found = self.columns.get((pipeline, column))
        if found is not None:
            return found
        wanted = (pipeline.lower(), column.lower())  # DuckDB names are case-insensitive
        return next((v for (p, c), v in self.columns.items() if (p.lower(), c.lower()) == wanted), None)

    def walk_up(self, pipeline: str, column: str) -> Iterator[tuple[int, ColumnRef, ColumnLineage | None]]:
        """Every column upstream of `pipeline.column`, depth first: (depth, column, its own lineage)."""
        seen: set[ColumnRef] = set()

        def visit(line: ColumnLineage, depth: int) -> Iterator[tuple[int, ColumnRef, ColumnLineage | None]]:
            for ref in line.upstream:
                inner = self.of(ref.table, ref.column) if ref.kind == PIPELINE else None
                yield depth, ref, inner
                if inner is not None and ref not in seen:
                    seen.add(ref)
                    yield from visit(inner, depth + 1)

        start = self.of(pipeline, column)
        if start is not None:
            yield from visit(start, 1)

    def source_columns(self, pipeline: str, column: str) -> list[ColumnRef]:
        """The source datasets' columns `pipeline.column` is computed from, in the end."""
        return sorted({ref for _, ref, _ in self.walk_up(pipeline, column) if ref.kind == SOURCE})

    def downstream(self, ref: ColumnRef) -> list[ColumnLineage]:
        """The pipeline columns computed directly from `ref`."""
        return [line for line in self.columns.values() if ref in line.upstream]

    def to_dict(self) -> dict[str, JsonObject]:
        out: dict[str, JsonObject] = {}
        for (pipeline, column), line in self.columns.items():
            out.setdefault(pipeline, {})[column] = {
                "upstream": [[r.kind, r.table, r.column] for r in line.upstream],
                "unresolved": line.unresolved,
            }
        return out


def staging_tables(nodes: Mapping[str, Node]) -> dict[str, str]:
    """Each source load's staging table -> "<source>.<dataset>"."""
    return {n.table: f"{n.source}.{n.dataset}" for n in nodes.values() if isinstance(n, SourceLoadNode)}


def project_lineage(described: Described, staging_tables: Mapping[str, str]) -> ProjectLineage:
    """Lineage of every pipeline of `described`; `staging_tables`: staging table -> "source.dataset"."""
    from sqlglot.schema import MappingSchema

    types: dict[str, object] = {
        table: dict(columns) for table, columns in described.columns.items() if columns
    }
    schema = MappingSchema(types, dialect="duckdb")
    names = _Names(described, staging_tables)
    lineage = ProjectLineage()
    for pipeline, query in described.queries.items():
        for line in _pipeline_lineage(pipeline, query, described.columns.get(pipeline, ()), schema, names):
            lineage.columns[(pipeline, line.column)] = line
    return lineage


class _Names:
    """Table and column names as sqlglot gives them (lower case) back to pz's names."""

    def __init__(self, described: Described, staging_tables: Mapping[str, str]):
        self.tables: dict[str, tuple[str, str]] = {}
        for table in described.columns:
            source = staging_tables.get(table)
            self.tables[table.lower()] = (SOURCE, source) if source else (PIPELINE, table)
        self.columns = {
            table.lower(): {c.lower(): c for c, _ in columns} for table, columns in described.columns.items()
        }

    def ref(self, table: str, column: str) -> ColumnRef | None:
        known = self.tables.get(table.lower())
        if known is None:
            return None
        real = self.columns.get(table.lower(), {}).get(column.lower(), column)
        return ColumnRef(known[0], known[1], real)


def _pipeline_lineage(
    pipeline: str, query: str, columns: tuple[tuple[str, str], ...], schema: Any, names: _Names
) -> list[ColumnLineage]:
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError
    from sqlglot.lineage import lineage
    from sqlglot.optimizer.qualify import qualify
    from sqlglot.optimizer.scope import build_scope

    if not columns:
        return []  # it did not bind: tier 4 said why; there are no columns to trace
    try:
        parsed = sqlglot.parse_one(query, dialect="duckdb")
        qualified = qualify(parsed, schema=schema, dialect="duckdb", validate_qualify_columns=False)
        scope = build_scope(qualified)
    except (SqlglotError, RecursionError) as exc:
        reason = f"sqlglot cannot read this pipeline's query ({_first_line(exc)})"
        return [ColumnLineage(pipeline, c, (), reason) for c, _ in columns]
    if scope is None or not isinstance(qualified, exp.Query):
        return [
            ColumnLineage(pipeline, c, (), "the query is not a SELECT sqlglot can trace") for c, _ in columns
        ]
    selects = {s.alias_or_name.lower(): s for s in qualified.selects}
    out = []
    for column, _ in columns:
        select = selects.get(column.lower())
        if select is None:
            reason = "no select item sqlglot reads makes it (COLUMNS(), a struct.* or a * it cannot expand)"
            out.append(ColumnLineage(pipeline, column, (), reason))
            continue
        try:
            node = lineage(
                select.alias_or_name,
                qualified,
                schema=schema,
                dialect="duckdb",
                scope=scope,
                trim_selects=False,  # nor copy: the qualified tree is read, never changed, for every column
                copy=False,
            )
        except (SqlglotError, KeyError, ValueError, RecursionError) as exc:
            out.append(ColumnLineage(pipeline, column, (), f"sqlglot cannot trace it ({_first_line(exc)})"))
            continue
        out.append(_from_node(pipeline, column, node, names))
    return out


def _from_node(pipeline: str, column: str, node: Any, names: _Names) -> ColumnLineage:
    from sqlglot import exp

    upstream: set[ColumnRef] = set()
    lost: list[str] = []
    for step in node.walk():
        if step.downstream:
            continue
        if isinstance(step.expression, exp.Table):
            ref = names.ref(step.expression.name, _column_name(step.name))
            if ref is None:
                lost.append(f"table {step.expression.name!r} is not a pipeline or a source dataset")
            else:
                upstream.add(ref)
        elif _reads_a_column(step.expression):
            lost.append(f"'{step.expression.sql(dialect='duckdb')[:80]}' reads a column sqlglot cannot place")
    return ColumnLineage(pipeline, column, tuple(sorted(upstream)), "; ".join(lost) or None)


def _reads_a_column(expression: exp.Expression) -> bool:
    from sqlglot import exp

    inner = expression.this if isinstance(expression, exp.Alias) else expression
    return inner.find(exp.Column) is not None


def _column_name(dotted: str) -> str:
    """The last part of the name sqlglot gives a leaf (`"o"."id"`, `o.id`), unquoted."""
    found = _LAST_PART.search(dotted)
    if found is None:
        return dotted
    quoted, plain = found.groups()
    return quoted.replace('""', '"') if quoted is not None else plain


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:160] if text else type(exc).__name__
