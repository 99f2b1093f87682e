"""The SQL route's lower bound: what a recognised comparison's whole value side evaluates to.

`o.updated_at > {{ watermark('pg', 'orders') }} - INTERVAL 1 HOUR` reads from one hour below the watermark
(the lookback is the point: rows that committed late). The value side holds no column and no subquery, so
compile evaluates it once in DuckDB with the very literal watermark() renders, and the read pushes down
`updated_at > <that value>`: the same rows the pipeline's own filter keeps, never fewer.

A value side pz cannot push down exactly is PZ0224, never a narrower read:
- it calls a function whose result changes between calls or queries (now(), random(): the bound would differ
  from the pipeline's, and no clock enters a load's bounds);
- it cannot be evaluated (a cast that fails on the literal, e.g. before the first commit);
- its value is NULL, +infinity or NaN (the comparison admits no row);
- its value is not exactly a value of the cursor's type (12:00 on a date cursor, 11.025 on a decimal(12,2)).

-infinity (before the first commit: the literal admits every row) is no lower bound at all. A bare
`cursor > {{ watermark() }}` needs no evaluation: its bound is the committed watermark itself. Several
comparisons on one dataset read their union: the lowest bound, inclusive when any comparison at it is.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import partial
from typing import TYPE_CHECKING, Any

from pipelinez.compile.incremental_yaml import INTEGER_TYPES, utc_text
from pipelinez.compile.templating import WATERMARK_TOKEN_RE
from pipelinez.compile.watermark_literal import ZONED
from pipelinez.compile.watermark_rules import Declaration, SqlIncremental
from pipelinez.core import duck_connect
from pipelinez.core.diagnostics import Diagnostic, error
from pipelinez.core.duck_messages import condense

if TYPE_CHECKING:
    import duckdb

    from pipelinez.compile.watermark_sql import Json

Key = tuple[str, str]


@dataclass(frozen=True)
class LowerBound:
    """The lower bound a dataset's read pushes down: None reads every row."""

    value: str | None
    inclusive: bool


_BINDS_NOT = "\x00"  # marks a value side that does not type-check


@dataclass
class SqlLowerBounds:
    """Each SQL-declared dataset's lower bound (a dataset with an error has none), the PZ0224 errors, and the
    PZ0224 of value sides that do not type-check: reported only when tier 4 finds no error in their pipeline
    (it normally does, and says it better)."""

    bounds: dict[Key, LowerBound] = field(default_factory=dict)
    errors: list[Diagnostic] = field(default_factory=list)
    unless_bound: list[Diagnostic] = field(default_factory=list)


def sql_lower_bounds(
    result: SqlIncremental, literals: Mapping[str, list[str]], committed: Mapping[Key, str]
) -> SqlLowerBounds:
    """The lower bound of each SQL-declared dataset's read, and a PZ0224 for each comparison whose value side
    cannot be pushed down exactly. `literals`: each pipeline's rendered watermark() calls; `committed`: the
    usable committed watermarks."""
    evaluated: dict[int, LowerBound | str] = {}  # id(declaration) -> its bound, or why it has none
    pending: list[tuple[Key, Declaration]] = []
    for key in sorted(result.specs):
        for d in result.declared.get(key, []):
            if d.value is None:
                continue
            # the SQL analysis: imported only for a project whose pipelines call watermark()
            from pipelinez.compile.watermark_sql import token_index

            if token_index(d.value) is None:
                pending.append((key, d))
    if pending:
        evaluated = _evaluate(pending, result, literals)
    out = SqlLowerBounds()
    for key, spec in sorted(result.specs.items()):
        found: list[LowerBound] = []
        for decl in result.declared.get(key, []):
            bound = evaluated.get(id(decl))
            if bound is None:  # a bare watermark(): the committed watermark itself
                bound = LowerBound(committed.get(key), decl.inclusive)
            if isinstance(bound, LowerBound):
                found.append(bound)
            elif bound.startswith(_BINDS_NOT):
                out.unless_bound.append(_not_exact(decl, f"its value side cannot be evaluated ({bound[1:]})"))
            else:
                out.errors.append(_not_exact(decl, bound))
        if found and len(found) == len(result.declared.get(key, [])):
            out.bounds[key] = _union(found, spec.cursor_type)
    return out


def _not_exact(decl: Declaration, why: str) -> Diagnostic:
    src, ds = decl.call.args[0], decl.call.args[1]
    return error(
        "PZ0224",
        f"pipeline '{decl.pipeline}': watermark('{src}', '{ds}') is compared through an expression pz cannot "
        f"push down to the source exactly: {why}; the read would differ from the pipeline's filter",
        place=decl.call.place,
        next_step=f"write the lower bound as an expression of {{{{ watermark('{src}', '{ds}') }}}}, "
        "constants and deterministic functions whose value is a value of the cursor's type (CAST it to that "
        "type), "
        f"e.g. {decl.cursor} > {{{{ watermark('{src}', '{ds}') }}}} - INTERVAL 1 HOUR",
    )


def _union(found: list[LowerBound], cursor_type: str | None) -> LowerBound:
    """The bound that reads every row any of `found` reads."""
    if any(b.value is None for b in found):
        return LowerBound(None, False)
    lowest = min(found, key=lambda b: (_order(str(b.value), cursor_type), not b.inclusive))
    return lowest


def _order(text: str, cursor_type: str | None) -> Any:
    if cursor_type in INTEGER_TYPES:
        return int(text)
    if cursor_type and cursor_type.startswith("DECIMAL"):
        return Decimal(text)
    if cursor_type == "DATE":
        return dt.date.fromisoformat(text)
    if cursor_type == ZONED:
        return utc_text(text)  # one zone: the texts order as the instants do
    return text  # timestamps without zone: DuckDB's fixed-width text orders as the values do


# -- evaluation ----------------------------------------------------------------------------------------
def _evaluate(
    pending: list[tuple[Key, Declaration]], result: SqlIncremental, literals: Mapping[str, list[str]]
) -> dict[int, LowerBound | str]:

    con = duck_connect.connect()
    try:
        changing = _changing_functions(con)
        texts = _sql_texts(con, [d.value for _, d in pending])
        out: dict[int, LowerBound | str] = {}
        for (key, decl), text in zip(pending, texts, strict=True):
            called = sorted(set(_functions(decl.value)) & changing)
            if text is None:
                out[id(decl)] = "DuckDB cannot print its value side back as SQL"
            elif called:
                out[id(decl)] = (
                    f"its value side calls {', '.join(f'{n}()' for n in called)}, whose result changes "
                    "from one query to the next"
                )
            else:
                sql = WATERMARK_TOKEN_RE.sub(partial(_literal, literals.get(decl.pipeline, [])), text)
                cursor_type = result.specs[key].cursor_type
                # the value side's type whatever the watermark: each placeholder a column of the cursor's type
                probe = WATERMARK_TOKEN_RE.sub("pz_w", text)
                out[id(decl)] = _bound(con, sql, probe, cursor_type, decl.inclusive)
        return out
    finally:
        con.close()


def _literal(texts: list[str], match: re.Match[str]) -> str:
    index = int(match.group(1))
    return texts[index] if index < len(texts) else "NULL"


def _changing_functions(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute(
        "SELECT DISTINCT lower(function_name) FROM duckdb_functions() "
        "WHERE stability IN ('VOLATILE', 'CONSISTENT_WITHIN_QUERY')"
    ).fetchall()
    return {str(r[0]) for r in rows}


def _functions(tree: Any) -> Iterator[str]:
    stack = [tree]
    while stack:
        obj = stack.pop()
        if isinstance(obj, dict):
            if obj.get("class") == "FUNCTION":
                yield str(obj.get("function_name", "")).lower()
            stack.extend(obj.values())
        elif isinstance(obj, list):
            stack.extend(obj)


def _sql_texts(con: duckdb.DuckDBPyConnection, trees: list[Json | None]) -> list[str | None]:
    """Each value side as SQL text (`SELECT <expression>` printed by DuckDB, placeholders kept)."""
    import duckdb

    row = con.execute("SELECT json_serialize_sql('SELECT 1')").fetchone()
    template = json.loads(str(row[0])) if row else {}  # DuckDB's own SELECT, whatever its version writes
    out: list[str | None] = []
    for tree in trees:
        template["statements"][0]["node"]["select_list"] = [tree]
        try:
            statement = json.dumps(template)
            row = con.execute("SELECT json_deserialize_sql(?)", [statement]).fetchone()
        except (duckdb.Error, RecursionError, ValueError):  # a tree pz cannot print back: refused
            out.append(None)
            continue
        text = str(row[0]) if row and row[0] else ""
        out.append(text.removeprefix("SELECT ").strip() or None)
    return out


def _bound(
    con: duckdb.DuckDBPyConnection, expression: str, probe: str, cursor_type: str | None, inclusive: bool
) -> LowerBound | str:
    """What `expression` (literals in place) evaluates to, as a bound on a cursor of `cursor_type`; `probe`
    is the same expression on a column `pz_w` of the cursor's type, whose type must fit the cursor's (so a
    project that validates before its first commit validates after it)."""
    import duckdb

    as_cursor = f"TRY_CAST(v AS {cursor_type})" if cursor_type else "v"
    try:
        row = con.execute(
            f"SELECT CAST(v AS VARCHAR), typeof(v), CAST({as_cursor} AS VARCHAR), {as_cursor} = v, "
            f"(SELECT typeof(({probe})) FROM (SELECT CAST(NULL AS {cursor_type or 'VARCHAR'}) AS pz_w)) "
            f"FROM (SELECT ({expression}) AS v)"
        ).fetchone()
    except duckdb.Error as exc:
        if isinstance(exc, duckdb.BinderException):  # a type error: tier 4 says it in the pipeline's words
            return _BINDS_NOT + condense(str(exc))
        return f"its value side cannot be evaluated ({condense(str(exc))})"
    if row is None:
        return "its value side has no value"
    if cursor_type is not None and not _fits(str(row[4]), cursor_type):
        return (
            f"its value side is of type {row[4]}, which a {cursor_type} cursor cannot always hold exactly "
            f"(CAST it to {cursor_type})"
        )
    if row[0] is None:
        return "its value side is NULL, so the comparison admits no row"
    text, typ = str(row[0]), str(row[1])
    if text.lower() in ("-infinity", "-inf"):
        return LowerBound(None, False)  # before the first commit: every row
    if text.lower() in ("infinity", "inf", "nan", "-nan"):
        return f"its value side is {text}, so the comparison admits no row"
    if row[2] is None or not row[3]:
        return f"its value {text} ({typ}) is not exactly a value of the cursor's type ({cursor_type})"
    value = str(row[2])
    return LowerBound(utc_text(value) if cursor_type == ZONED else value, inclusive)


_INTEGERS = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER"})
_FINER = {  # a timestamp cursor holds every value of these types exactly
    "TIMESTAMP_NS": {"TIMESTAMP", "TIMESTAMP_MS", "TIMESTAMP_S", "DATE"},
    "TIMESTAMP": {"TIMESTAMP_MS", "TIMESTAMP_S", "DATE"},
    "TIMESTAMP_MS": {"TIMESTAMP_S", "DATE"},
    "TIMESTAMP_S": {"DATE"},
}


def _fits(found: str, cursor_type: str) -> bool:
    """Whether every value of type `found` is a value of `cursor_type` (ranges aside: a value out of the
    cursor's range is refused when evaluated)."""
    if found == cursor_type:
        return True
    if cursor_type in INTEGER_TYPES:
        return found in _INTEGERS
    if cursor_type.startswith("DECIMAL"):
        scale = _scale(cursor_type)
        return found in _INTEGERS or (found.startswith("DECIMAL") and _scale(found) <= scale)
    return found in _FINER.get(cursor_type, set())


def _scale(decimal_type: str) -> int:
    match = re.fullmatch(r"DECIMAL\(\d+,\s*(\d+)\)", decimal_type)
    return int(match.group(1)) if match else 99
