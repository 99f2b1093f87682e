"""Tier 4 for checks: the options of a check must fit the types of the columns they name.

A check that binds can still be meaningless or fail at run time: `freshness` on a VARCHAR column,
`accepted_values` whose values can't be values of the column, a `relationships` field that can't be compared
with the column, an `expression` that is not true/false. Each is found here, on the empty staging tables,
and reported as PZ0405 before any data moves.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pipelinez.compile.nodes import CheckNode
from pipelinez.core.sqlnames import quote_ident, quote_literal

if TYPE_CHECKING:
    import duckdb

_TEMPORAL = re.compile(r"^(DATE|TIMESTAMP(_S|_MS|_NS)?|TIMESTAMP WITH TIME ZONE)$")
_NUMERIC = re.compile(r"^(U?(TINY|SMALL|BIG|HUGE)?INT(EGER)?|DECIMAL\(.*\)|FLOAT|DOUBLE|REAL)$")
_TEXT = re.compile(r"^(VARCHAR|TEXT|STRING)$")


def column_types(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, str]:
    return {str(r[0]): str(r[1]) for r in con.execute(f"DESCRIBE {quote_ident(table)}").fetchall()}


def _all_column_types(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, str]]:
    """The column types of every base table of the main schema whose name nothing else in the catalog
    holds (a temporary table or a view of that name would be what DESCRIBE finds first), by table, in
    column order: what `column_types` gives each of them (DuckDB writes both types alike; a view's NULL
    column is the exception, and views are not here), in one statement for all."""
    rows = con.execute(
        "SELECT c.table_name, c.column_name, c.data_type, "
        "t.table_name IS NOT NULL AND c.database_name = current_database() AND c.schema_name = 'main' "
        "FROM duckdb_columns() c LEFT JOIN duckdb_tables() t ON t.database_name = c.database_name "
        "AND t.schema_name = c.schema_name AND t.table_name = c.table_name "
        "ORDER BY c.database_name, c.schema_name, c.table_name, c.column_index"
    ).fetchall()
    found: dict[str, dict[str, str]] = {}
    elsewhere: set[str] = set()
    for table, column, duck_type, main_table in rows:
        if main_table:
            found.setdefault(str(table), {})[str(column)] = str(duck_type)
        else:
            elsewhere.add(str(table).lower())
    return {name: columns for name, columns in found.items() if name.lower() not in elsewhere}


class TypeLookups:
    """What `type_problem` asks DuckDB, each answer kept for one round of check binds (no table changes
    meanwhile): every table's column types (one statement for all, not one DESCRIBE per table) and whether
    a literal casts to a type (one statement per check for the values not known yet, not one per value)."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con
        self._types: dict[str, dict[str, str]] | None = None  # every table's, read at the first question
        self._casts: dict[tuple[str, str], bool] = {}
        self.queries = 0  # statements run, for tests

    def column_types(self, table: str) -> dict[str, str]:
        if self._types is None:
            self.queries += 1
            self._types = _all_column_types(self.con)
        if table not in self._types:  # not a table of the database's main schema alone: DESCRIBE says
            self.queries += 1
            self._types[table] = column_types(self.con, table)
        return self._types[table]

    def casts(self, texts: list[str], duck_type: str) -> list[bool]:
        """Whether each text casts to `duck_type` (TRY_CAST is not NULL)."""
        unknown = list(dict.fromkeys(t for t in texts if (t, duck_type) not in self._casts))
        if unknown:
            self.queries += 1
            items = ", ".join(f"TRY_CAST({quote_literal(t)} AS {duck_type}) IS NOT NULL" for t in unknown)
            row = self.con.execute(f"SELECT {items}").fetchone()
            for text, ok in zip(unknown, row or [False] * len(unknown), strict=True):
                self._casts[(text, duck_type)] = bool(ok)
        return [self._casts[(t, duck_type)] for t in texts]

    def result_type(self, sql: str) -> str:
        """The type of a one-column query's result: bound as a relation (nothing runs) when DuckDB reads
        the text as exactly one SELECT, else through DESCRIBE, whose error is the one raised."""
        import duckdb

        self.queries += 1
        try:
            statements = self.con.extract_statements(sql)
        except duckdb.Error:
            statements = []
        if len(statements) == 1 and statements[0].type == duckdb.StatementType.SELECT:
            return str(self.con.sql(sql).types[0])
        return str(self.con.execute(f"DESCRIBE {sql}").fetchall()[0][1])


def check_label(node: CheckNode) -> str:
    """How messages name a check: `check 'x' on 'table'`, or `singular test tests/x.sql`."""
    if node.check.type == "singular":
        return f"singular test {node.check.place.file}"
    return f"check '{node.check.name}' on '{node.target}'"


def _family(duck_type: str) -> str:
    for name, pattern in (("temporal", _TEMPORAL), ("numeric", _NUMERIC), ("text", _TEXT)):
        if pattern.match(duck_type):
            return name
    return duck_type


def type_problem(lookups: TypeLookups, node: CheckNode) -> str | None:
    """Why the check's options don't fit its columns' types, or None when they do."""
    check, options = node.check, node.check.options
    types = lookups.column_types(node.target)
    if check.type == "freshness":
        column = str(options["column"])
        if column in types and not _TEMPORAL.match(types[column]):
            return (
                f"freshness needs a date or timestamp column; '{column}' is {types.get(column)} "
                f"(cast it in the pipeline, e.g. CAST({column} AS TIMESTAMP))"
            )
    elif check.type == "accepted_values":
        return _values_problem(
            lookups, str(options["column"]), types.get(str(options["column"]), ""), options
        )
    elif check.type == "relationships" and len(node.work.inputs) > 1:
        column, field = str(options["column"]), str(options["field"])
        parent = lookups.column_types(node.work.inputs[1])
        if field in parent and column in types and _family(types[column]) != _family(parent[field]):
            return (
                f"'{column}' ({types[column]}) can't be compared with {options['to']}.{field} "
                f"({parent[field]}); cast one of them in its pipeline"
            )
    elif check.type == "expression":
        sql = f"SELECT (\n{options['sql']}\n) FROM {quote_ident(node.target)}"
        result = lookups.result_type(sql)
        if result not in ("BOOLEAN", '"NULL"'):
            return f"the expression must be true or false for each row; it is {result}"
    return None


def _values_problem(
    lookups: TypeLookups, column: str, duck_type: str, options: dict[str, object]
) -> str | None:
    values = options.get("values")
    if not duck_type or not isinstance(values, list):
        return None
    texts = [str(value).lower() if isinstance(value, bool) else str(value) for value in values]
    for text, ok in zip(texts, lookups.casts(texts, duck_type), strict=True):
        if not ok:
            return f"value '{text}' can never be a value of '{column}' ({duck_type})"
    return None
