"""What column lineage and `pz docs` read of a compiled project beyond its nodes: the columns and types tier 4
bound for every staging table (source loads from their contracts or the schema cache, pipelines as DuckDB
binds them, ephemeral pipelines as their inlined query describes), and each pipeline's query as written, with
every ref() as the name of the pipeline it reads (an ephemeral one too, so lineage passes through it).

Gathered only when asked (`compile_project(..., describe=True)`): validate, plan and run never pay for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pipelinez.compile.inlining import inline, strip_trailing_semicolons
from pipelinez.compile.templating import REF_TOKEN_RE, staging_table
from pipelinez.config.model import Project
from pipelinez.core import duck_connect
from pipelinez.core.diagnostics import Diagnostic, warning
from pipelinez.core.sqlnames import quote_ident

if TYPE_CHECKING:
    import duckdb

    from pipelinez.compile.semantic import PipelineInfo

Columns = tuple[tuple[str, str], ...]  # (name, DuckDB type) in the table's order


@dataclass(frozen=True)
class Described:
    """The tables' columns and queries that lineage and `pz docs` read."""

    columns: dict[str, Columns] = field(default_factory=dict)  # staging table or pipeline -> its columns
    queries: dict[str, str] = field(default_factory=dict)  # pipeline -> its query, refs as pipeline names
    ephemeral: frozenset[str] = frozenset()
    reads: dict[str, tuple[str, ...]] = field(default_factory=dict)  # pipeline -> staging tables and refs


def unknown_doc_columns(
    project: Project, pipelines: Iterable[str], columns_of: Callable[[str], list[str] | None]
) -> list[Diagnostic]:
    """PZ0123 (warning): a sidecar `columns:` entry naming no result column of its pipeline (case-insensitive,
    as DuckDB names are). Pipelines tier 4 did not bind (ephemeral, loose, broken) are not judged."""
    found = []
    for name in pipelines:
        sidecar = project.pipelines[name].sidecar
        columns = columns_of(name) if sidecar is not None and sidecar.column_docs else None
        if sidecar is None or columns is None:
            continue
        known = {c.lower() for c in columns}
        for column in sidecar.column_docs:
            if column.lower() not in known:
                found.append(
                    warning(
                        "PZ0123",
                        f"pipeline '{name}': columns: documents '{column}', which is not a column of its "
                        f"result (columns: {', '.join(columns)})",
                        place=project.locate(sidecar.file, ("columns", column)),
                        next_step="name one of those columns, or remove the entry",
                    )
                )
    return found


class LastStaging:
    """The columns of a dataset with no contract and no cached schema, as the newest run that staged it
    landed them (`.pz/runs/<id>/staging.duckdb`, opened read-only, newest first; a run still writing its
    file is passed over). Asked only with `describe`: validate, plan and run never read old runs."""

    def __init__(self, state_dir: Path):
        self.files = sorted((state_dir / "runs").glob("*/staging.duckdb"), reverse=True)
        self.open: list[duckdb.DuckDBPyConnection] | None = None

    def _connections(self) -> list[duckdb.DuckDBPyConnection]:
        import duckdb

        if self.open is None:
            self.open = []
            for path in self.files[:5]:  # the newest few: an older schema is a worse guess than none
                try:
                    self.open.append(duck_connect.connect(str(path), read_only=True))
                except duckdb.Error:  # being written, or not a database any more: pass it over
                    continue
        return self.open

    def columns(self, table: str) -> list[tuple[str, str]] | None:
        import duckdb

        for con in self._connections():
            try:
                rows = con.execute(
                    "SELECT column_name, data_type FROM duckdb_columns() WHERE schema_name = 'main' "
                    "AND table_name = ? ORDER BY column_index",
                    [table],
                ).fetchall()
            except duckdb.Error:
                continue
            if rows:
                return [(str(c), str(t)) for c, t in rows]
        return None

    def close(self) -> None:
        for con in self.open or ():
            con.close()


def own_query(info: PipelineInfo) -> str:
    """The pipeline's query with secrets masked and each ref() as the name of the pipeline it reads."""
    text = REF_TOKEN_RE.sub(lambda match: quote_ident(match.group(1)), info.display_query)
    return strip_trailing_semicolons(text)


def describe(con: duckdb.DuckDBPyConnection, infos: dict[str, PipelineInfo]) -> Described:
    """Every table tier 4 bound on `con` (one catalog query), plus each ephemeral pipeline's columns."""
    import duckdb

    columns: dict[str, list[tuple[str, str]]] = {}
    rows = con.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE database_name = current_database() ORDER BY table_name, column_index"
    ).fetchall()
    for table, column, kind in rows:
        if column != "__pz_no_columns":
            columns.setdefault(str(table), []).append((str(column), str(kind)))
    ephemeral = frozenset(name for name, info in infos.items() if info.ephemeral)
    for name in sorted(ephemeral):
        query = strip_trailing_semicolons(inline(infos[name].display_query, infos, name, display=True)[0])
        try:
            described = con.execute("DESCRIBE " + query).fetchall()
        except duckdb.Error:  # it did not bind (tier 4 reported why): its columns are unknown
            continue
        columns[name] = [(str(r[0]), str(r[1])) for r in described]
    queries = {name: own_query(info) for name, info in infos.items()}
    reads = {
        name: (*dict.fromkeys(staging_table(s, d) for s, d in info.reads), *dict.fromkeys(info.refs))
        for name, info in infos.items()
    }
    return Described({k: tuple(v) for k, v in columns.items()}, queries, ephemeral, reads)
