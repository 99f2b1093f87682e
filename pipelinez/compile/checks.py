"""SQL of each check type. Every check query returns one row: (failing BIGINT, observed VARCHAR).

`failing` > 0 means the check failed; `observed` feeds the message. Rows reported for a check are the
offending rows (0 for table-level checks such as row_count and freshness).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipelinez.config.model import CheckSpec
from pipelinez.core.durations import parse_duration
from pipelinez.core.sqlnames import quote_ident, quote_literal
from pipelinez.core.vocabulary import CheckSeverity

TABLE_LEVEL = frozenset({"row_count", "freshness"})
DEFAULT_THRESHOLD = "!=0"
_THRESHOLD = re.compile(r"^\s*(>=|<=|!=|<>|==|=|>|<)\s*(\d+)\s*$")
_COMPARE: dict[str, Callable[[int, int], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "!=": operator.ne,
    "<>": operator.ne,
    "==": operator.eq,
    "=": operator.eq,
    ">": operator.gt,
    "<": operator.lt,
}


@dataclass(frozen=True)
class CheckOutcome:
    """What a check found: whether it failed, its failing rows and message."""

    failed: bool
    rows: int
    message: str
    severity: CheckSeverity = (
        CheckSeverity.ERROR
    )  # when failed: error blocks, warn only reports (config thresholds)


def threshold_hit(count: int, threshold: str) -> bool:
    """Whether the failure count matches a dbt threshold such as `>10` or `!=0`."""
    match = _THRESHOLD.match(threshold)
    if match is None:
        raise ValueError(f"not a threshold: {threshold!r}")
    return _COMPARE[match.group(1)](count, int(match.group(2)))


def _verdict(check: CheckSpec, count: int) -> tuple[CheckSeverity | None, str]:
    """dbt's order: with severity error, error_if is tried first, then warn_if; with severity warn only
    warn_if. (the severity reached or None, the threshold that decided it when it is not the default)."""
    if check.severity == CheckSeverity.ERROR and threshold_hit(count, check.error_if):
        return (
            CheckSeverity.ERROR,
            "" if check.error_if == DEFAULT_THRESHOLD else f"error_if {check.error_if}",
        )
    if threshold_hit(count, check.warn_if):
        return CheckSeverity.WARN, "" if check.warn_if == DEFAULT_THRESHOLD else f"warn_if {check.warn_if}"
    return None, ""


def checked_table(check: CheckSpec, table: str) -> str:
    """`table`, or with config.where the subquery of its rows that match it (dbt's `where`)."""
    if not check.where:
        return table
    return f"(SELECT * FROM {table} WHERE (\n{check.where}\n))"


def human_age(seconds: float) -> str:
    """An age in its largest whole unit, as durations are written: 3d, 5h, 12m, 40s."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{max(0, int(seconds))}s"


def _value_literal(value: Any) -> str:
    return quote_literal(str(value).lower() if isinstance(value, bool) else str(value))


def check_sql(check: CheckSpec, table: str, ref_table: str | None = None) -> str:
    """The check's query against `table` (quoted). `ref_table` (quoted) is a relationships target."""
    o = check.options
    table = checked_table(check, table)
    if check.type == "not_null":
        cond = " OR ".join(f"{quote_ident(c)} IS NULL" for c in o["columns"])
        return f"SELECT count(*)::BIGINT, NULL::VARCHAR FROM {table} WHERE {cond}"
    if check.type == "unique":
        cols = ", ".join(quote_ident(c) for c in o["columns"])
        return (
            f"SELECT coalesce(sum(n), 0)::BIGINT, count(*)::VARCHAR FROM "
            f"(SELECT count(*) AS n FROM {table} GROUP BY {cols} HAVING count(*) > 1)"
        )
    if check.type == "accepted_values":
        # compared in the column's own type (DuckDB casts the literals): 1.5 matches a DECIMAL 1.50
        col = quote_ident(o["column"])
        values = ", ".join(_value_literal(v) for v in o["values"])
        return (
            f"SELECT count(*)::BIGINT, string_agg(DISTINCT CAST({col} AS VARCHAR), ', ')::VARCHAR "
            f"FROM {table} WHERE {col} IS NOT NULL AND {col} NOT IN ({values})"
        )
    if check.type == "row_count":
        conds = []
        if o.get("min") is not None:
            conds.append(f"n < {int(o['min'])}")
        if o.get("max") is not None:
            conds.append(f"n > {int(o['max'])}")
        failed = " OR ".join(conds) or "FALSE"
        return (
            f"SELECT CASE WHEN {failed} THEN 1 ELSE 0 END::BIGINT, n::VARCHAR "
            f"FROM (SELECT count(*) AS n FROM {table})"
        )
    if check.type == "expression":
        # on lines of its own, so a trailing -- comment in the expression cannot swallow the closing paren
        if check.nulls_pass:  # dbt_utils.expression_is_true: a NULL result is not a failure
            return f"SELECT count(*)::BIGINT, NULL::VARCHAR FROM {table} WHERE NOT (\n{o['sql']}\n)"
        return (
            f"SELECT count(*)::BIGINT, NULL::VARCHAR FROM {table} WHERE NOT coalesce((\n{o['sql']}\n), FALSE)"
        )
    if check.type == "relationships":
        col, field = quote_ident(o["column"]), quote_ident(o["field"])
        return (
            f"SELECT count(*)::BIGINT, NULL::VARCHAR FROM {table} AS child "
            f"WHERE child.{col} IS NOT NULL AND NOT EXISTS "
            f"(SELECT 1 FROM {ref_table} AS parent WHERE parent.{field} = child.{col})"
        )
    if check.type == "freshness":
        col = quote_ident(o["column"])
        max_age = parse_duration(str(o["max_age"]))
        age = f"(epoch(current_timestamp) - epoch(CAST(max({col}) AS TIMESTAMPTZ)))"
        return (
            f"SELECT CASE WHEN max({col}) IS NULL OR {age} > {max_age} THEN 1 ELSE 0 END::BIGINT, "
            f"{age}::VARCHAR FROM {table}"
        )
    raise ValueError(f"unknown check type {check.type}")


def outcome(check: CheckSpec, target: str, failing: int, observed: str | None) -> CheckOutcome:
    """The check's result and the message printed for it."""
    o = check.options
    head = f"check '{check.name}' on '{target}'"
    severity, why = _verdict(check, failing)
    failed = severity is not None
    if check.type == "not_null":
        msg = f"{head}: {failing} row(s) with NULL in {', '.join(o['columns'])}"
    elif check.type == "unique":
        msg = f"{head}: {failing} row(s) share {observed} duplicated value(s) of ({', '.join(o['columns'])})"
    elif check.type == "accepted_values":
        msg = f"{head}: {failing} row(s) with {o['column']} outside the accepted values (found: {observed})"
    elif check.type == "row_count":
        bounds = f"min {o.get('min', '-')}, max {o.get('max', '-')}"
        msg = f"{head}: {observed} row(s), outside {bounds}"
        return _decided(failed, 0, msg, severity, why)
    elif check.type == "expression":
        msg = f"{head}: {failing} row(s) where NOT ({o['sql']})"
    elif check.type == "relationships":
        msg = f"{head}: {failing} row(s) with {o['column']} not found in {o['to']}.{o['field']}"
    elif check.type == "singular":
        msg = f"singular test {o['file']}: its query returned {failing} row(s); it must return none"
    else:  # freshness
        age = human_age(float(observed)) if observed not in (None, "") else None
        max_age = o["max_age"]
        msg = (
            f"{head}: newest {o['column']} is {age} old (max_age {max_age})"
            if age
            else f"{head}: no {o['column']} values at all (max_age {max_age})"
        )
        return _decided(failed, 0, msg, severity, why)
    return _decided(failed, failing, msg, severity, why)


def _decided(failed: bool, rows: int, message: str, severity: CheckSeverity | None, why: str) -> CheckOutcome:
    return CheckOutcome(
        failed, rows, f"{message} ({why})" if why else message, severity or CheckSeverity.ERROR
    )
