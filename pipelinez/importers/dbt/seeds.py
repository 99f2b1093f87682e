"""Seed typing as dbt's seed loader does it (agate's type tester, then the adapter's type names).

dbt tries, per column and over every value: Integer (never matches CSV text), Number, Date (`%Y-%m-%d`),
DateTime (`%Y-%m-%d %H:%M:%S`), ISO datetime, Boolean (`true`/`false`, any case), Text; `null` and the empty
field are NULL. A Number column with no digits after the point is INTEGER, else DOUBLE (float8); DateTime is
TIMESTAMP. A column of NULLs only is INTEGER. `column_types:` in the seed's config wins.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation

_NULLS = {"", "null"}
_NUMBER = re.compile(r"^[+-]?(\d[\d,]*(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def _number(value: str) -> int | None:
    """Digits after the point of a numeric value, or None when it is no number."""
    text = value.strip().lstrip("$€£¥")
    if not _NUMBER.match(text):
        return None
    try:
        exponent = Decimal(text.replace(",", "")).as_tuple().exponent
    except InvalidOperation:
        return None
    return -exponent if isinstance(exponent, int) and exponent < 0 else 0


def _is_date(value: str) -> bool:
    try:
        dt.datetime.strptime(value.strip(), "%Y-%m-%d")
    except ValueError:
        return False
    return True


def _is_datetime(value: str) -> bool:
    text = value.strip()
    try:
        dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S")
        return True
    except ValueError:
        pass
    try:
        dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return "T" in text


def _is_bool(value: str) -> bool:
    return value.strip().lower() in {"true", "false"}


_TESTS: list[tuple[str, Callable[[str], bool]]] = [
    ("number", lambda v: _number(v) is not None),
    ("date", _is_date),
    ("timestamp", _is_datetime),
    ("boolean", _is_bool),
]


def column_type(values: list[str]) -> str:
    present = [v for v in values if v.strip().lower() not in _NULLS]
    if not present:
        return "integer"
    for name, test in _TESTS:
        if all(test(v) for v in present):
            if name == "number":
                return "double" if any(_number(v) for v in present) else "integer"
            return name
    return "varchar"


def seed_columns(text: str, delimiter: str = ",") -> dict[str, str]:
    """Column name → DuckDB type, in file order."""
    rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))
    if not rows:
        return {}
    header, body = rows[0], rows[1:]
    columns: dict[str, str] = {}
    for index, name in enumerate(header):
        values = [row[index] if index < len(row) else "" for row in body]
        columns[name.strip()] = column_type(values)
    return columns


def has_null_word(text: str) -> bool:
    """dbt reads an unquoted `null` field as NULL; pz's CSV reader keeps it as text."""
    return any(field.strip().lower() == "null" for row in csv.reader(io.StringIO(text)) for field in row)
