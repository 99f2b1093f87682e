"""The portable helpers every template can call without a macros/ folder, each rendering DuckDB SQL.

Their arguments are SQL expressions, pasted as written (as a macro's would be), except what names a part of a
date (checked against a closed list), a type (checked against a type name's shape) and the column names of
`star(..., except=[...])` (quoted as identifiers). docs/project-files.md lists what each renders.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from pipelinez.core.sqlnames import quote_ident

DATE_PARTS = (
    "year",
    "quarter",
    "month",
    "week",
    "day",
    "hour",
    "minute",
    "second",
    "millisecond",
    "microsecond",
)
SURROGATE_NULL = "_pz_surrogate_key_null_"
_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_ ]*(\(\s*\d+\s*(,\s*\d+\s*)?\))?(\[\])*$")


class HelperError(ValueError):
    """A helper called with an argument it cannot render (the message says which and why)."""


def _part(function: str, part: object) -> str:
    text = str(part).strip().lower()
    if text not in DATE_PARTS:
        raise HelperError(f"{function}(): '{part}' is not a date part (one of: {', '.join(DATE_PARTS)})")
    return text


def _expressions(function: str, items: object) -> list[str]:
    if isinstance(items, str) or not isinstance(items, Iterable):
        raise HelperError(f"{function}() takes a list of column expressions, e.g. ['a', 'b']")
    found = [str(item) for item in items]
    if not found:
        raise HelperError(f"{function}() needs at least one column expression")
    return found


def generate_surrogate_key(field_list: object) -> str:
    """md5 of the fields as text joined by '-', NULL written as a marker (so NULL and '' differ)."""
    parts = [
        f"coalesce(CAST({expr} AS VARCHAR), '{SURROGATE_NULL}')"
        for expr in _expressions("generate_surrogate_key", field_list)
    ]
    joined = " || '-' || ".join(parts)
    return f"md5({joined})"


# keyword names are dbt's (datepart=, interval=, from_date_or_timestamp=, ...); positions are pz's: the
# date part first


def date_trunc(datepart: object, date: object) -> str:
    return f"date_trunc('{_part('date_trunc', datepart)}', {date})"


def dateadd(datepart: object, interval: object, from_date_or_timestamp: object) -> str:
    return f"date_add({from_date_or_timestamp}, INTERVAL ({interval}) {_part('dateadd', datepart).upper()})"


def datediff(datepart: object, first_date: object, second_date: object) -> str:
    """Part boundaries crossed from the first date to the second (later second: positive), as DuckDB's
    date_diff counts them."""
    return f"date_diff('{_part('datediff', datepart)}', {first_date}, {second_date})"


def star(relation: object = None, **options: Any) -> str:
    """Every column of the relation read (`*`), without the `except` columns (quoted); with
    `relation_alias`, qualified by that alias. The relation argument is for dbt's spelling only."""
    del relation
    options.pop("from", None)  # dbt's keyword spelling of the relation
    unknown = sorted(set(options) - {"except", "relation_alias"})
    if unknown:
        raise HelperError(f"star() takes except=[...] and relation_alias='...', not {', '.join(unknown)}")
    excluded = options.get("except") or []
    if isinstance(excluded, str) or not isinstance(excluded, Iterable):
        raise HelperError("star(): except= takes a list of column names, e.g. except=['a', 'b']")
    alias = options.get("relation_alias")
    head = f"{quote_ident(str(alias))}.*" if alias else "*"
    names = [quote_ident(str(name)) for name in excluded]
    return f"{head} EXCLUDE ({', '.join(names)})" if names else head


def safe_cast(field: object, type: object) -> str:  # dbt's keyword name
    text = str(type).strip()
    if not _TYPE.match(text):
        raise HelperError(f"safe_cast(): '{type}' is not a type name (e.g. 'integer', 'decimal(18, 2)')")
    return f"TRY_CAST({field} AS {text.upper()})"


HELPERS: dict[str, Callable[..., str]] = {
    "generate_surrogate_key": generate_surrogate_key,
    "date_trunc": date_trunc,
    "dateadd": dateadd,
    "datediff": datediff,
    "star": star,
    "safe_cast": safe_cast,
}
