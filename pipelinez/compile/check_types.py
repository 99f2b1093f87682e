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


def type_problem(con: duckdb.DuckDBPyConnection, node: CheckNode) -> str | None:
    """Why the check's options don't fit its columns' types, or None when they do."""
    check, options = node.check, node.check.options
    types = column_types(con, node.target)
    if check.type == "freshness":
        column = str(options["column"])
        if column in types and not _TEMPORAL.match(types[column]):
            return (
                f"freshness needs a date or timestamp column; '{column}' is {types.get(column)} "
                f"(cast it in the pipeline, e.g. CAST({column} AS TIMESTAMP))"
            )
    elif check.type == "accepted_values":
        return _values_problem(con, str(options["column"]), types.get(str(options["column"]), ""), options)
    elif check.type == "relationships" and len(node.work.inputs) > 1:
        column, field = str(options["column"]), str(options["field"])
        parent = column_types(con, node.work.inputs[1])
        if field in parent and column in types and _family(types[column]) != _family(parent[field]):
            return (
                f"'{column}' ({types[column]}) can't be compared with {options['to']}.{field} "
                f"({parent[field]}); cast one of them in its pipeline"
            )
    elif check.type == "expression":
        sql = f"SELECT (\n{options['sql']}\n) FROM {quote_ident(node.target)}"
        result = str(con.execute(f"DESCRIBE {sql}").fetchall()[0][1])
        if result not in ("BOOLEAN", '"NULL"'):
            return f"the expression must be true or false for each row; it is {result}"
    return None


def _values_problem(
    con: duckdb.DuckDBPyConnection, column: str, duck_type: str, options: dict[str, object]
) -> str | None:
    values = options.get("values")
    if not duck_type or not isinstance(values, list):
        return None
    for value in values:
        text = str(value).lower() if isinstance(value, bool) else str(value)
        cast = con.execute(f"SELECT TRY_CAST({quote_literal(text)} AS {duck_type})").fetchone()
        if cast is None or cast[0] is None:
            return f"value '{text}' can never be a value of '{column}' ({duck_type})"
    return None
