"""The YAML route of incremental reads: each dataset's
`sync: { mode: incremental, cursor, start, window, lag }` resolved to an `IncrementalSpec`, with every
problem reported at once.

Rules (each a diagnostic naming the source, the dataset and the key):
- the cursor must be a column of the `columns:` contract with an allowed cursor type, when a contract is
  declared (PZ0227, the same allowed set as the SQL route: `watermark_literal.cursor_type`);
- `window:` and `lag:` are durations over time, so they need a date or timestamp cursor whose type is declared
  in `columns:` (PZ0230); on a date cursor they must be whole days;
- `window:` needs `start:` (the first window starts there) (PZ0230);
- `start:` must be a value of the cursor's type when that type is declared (PZ0230).

The YAML route reads `cursor > watermark` (exclusive): see docs/incremental.md for why.
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal, InvalidOperation

from pipelinez.compile.incremental import IncrementalRoute, IncrementalSpec
from pipelinez.compile.templating import TemplateFailure, Templater
from pipelinez.compile.watermark_literal import CURSOR_TYPES, ZONED, cursor_type
from pipelinez.config.model import Project
from pipelinez.core.diagnostics import Diagnostic, Place, error
from pipelinez.core.duck_types import parse_type
from pipelinez.core.durations import parse_duration

INTEGER_TYPES = frozenset({"INTEGER", "BIGINT"})
TEMPORAL_TYPES = frozenset(
    {"DATE", "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", ZONED}
)  # window:/lag: arithmetic
_NOT_FINITE = frozenset({"infinity", "+infinity", "-infinity", "inf", "+inf", "-inf", "nan", "+nan", "-nan"})
_ALLOWED = ", ".join(CURSOR_TYPES)
_DAY = 86400.0


def cursor_problem(columns: dict[str, str] | None, cursor: str) -> str | None:
    """Why `cursor` cannot be the cursor of a dataset with contract `columns` (None: it can, or there is no
    contract to check against). The PZ0227 rule, shared by both routes."""
    if not columns:
        return None
    if cursor not in columns:
        return f"cursor column '{cursor}' is not in the dataset's columns: contract ({', '.join(columns)})"
    try:
        parse_type(columns[cursor])
    except ValueError:
        return None  # an unknown type is reported by the contract's own check
    if cursor_type(columns[cursor]) is None:
        return f"cursor column '{cursor}' is declared {columns[cursor]}; a cursor must be one of {_ALLOWED}"
    return None


def declared_type(columns: dict[str, str] | None, cursor: str) -> str | None:
    """The cursor's DuckDB type from the contract, normalized (None when not declared)."""
    if not columns or cursor not in columns:
        return None
    return cursor_type(columns[cursor])


def value_problem(text: str, duck_type: str) -> str | None:
    """Why `text` is not a finite value of `duck_type` (None when it is). Infinity and NaN are refused: no
    row could ever lie past such a watermark."""
    shown = "timestamptz" if duck_type == ZONED else duck_type.lower()
    article = "an" if shown[0] in "aeiou" else "a"
    if text.strip().lower() in _NOT_FINITE:
        return f"'{text}' is not a finite {shown} value"
    try:
        if duck_type in INTEGER_TYPES:
            int(text)
        elif duck_type.startswith("DECIMAL"):
            Decimal(text)
        elif duck_type == "DATE":
            dt.date.fromisoformat(text)
        elif duck_type.startswith("TIMESTAMP"):
            _timestamp(text)
    except (ValueError, InvalidOperation):
        return f"'{text}' is not {article} {shown} value"
    return None


def _timestamp(text: str) -> dt.datetime:
    """A timestamp literal's text (Python reads up to microseconds: longer fractions are cut)."""
    match = re.fullmatch(r"(.{19}(?:\.\d{1,6})?)\d*(.*)", text.strip())
    return dt.datetime.fromisoformat(match.group(1) + match.group(2) if match else text)


def utc_text(text: str) -> str:
    """A timestamptz value's text in UTC, as pz stores and pushes it down: `2024-01-01 08:00:00+00:00`. A
    value without an offset is taken as UTC."""
    moment = _timestamp(text)
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC)
    return moment.replace(tzinfo=dt.UTC).isoformat(sep=" ")


def yaml_specs(
    project: Project, templater: Templater
) -> tuple[dict[tuple[str, str], IncrementalSpec], list[Diagnostic]]:
    """Every YAML-declared incremental dataset, and every problem with those declarations."""
    specs: dict[tuple[str, str], IncrementalSpec] = {}
    diags: list[Diagnostic] = []
    for s_name, source in sorted(project.sources.items()):
        for d_name, dataset in sorted(source.datasets.items()):
            sync = dataset.sync or {}
            if sync.get("mode") != "incremental":
                continue
            path = ("datasets", d_name, "sync")
            where = f"source '{s_name}' dataset '{d_name}'"

            def place(key: str, file: str = source.file, p: tuple[str, ...] = path) -> Place:
                return project.locate(file, (*p, key))  # the nearest existing key

            found: list[Diagnostic] = []
            cursor = str(sync.get("cursor", ""))
            problem = cursor_problem(dataset.columns, cursor)
            if problem:
                found.append(error("PZ0227", f"{where}: {problem}", place=place("cursor")))
            cursor_type = declared_type(dataset.columns, cursor)
            start = sync.get("start")
            if isinstance(start, str):
                try:
                    at_value = project.locate(source.file, (*path, "start"), at="value")
                    start = templater.render_value(start, source.file, at_value)[0]
                except TemplateFailure as exc:
                    diags += exc.diagnostics
                    continue
            if isinstance(start, bool):
                start = None
            if start is not None and cursor_type and not problem:
                bad = value_problem(str(start), cursor_type)
                if bad:
                    found.append(_invalid(f"{where}: start: {bad} (the cursor's type)", place("start")))
                elif cursor_type == ZONED:
                    start = utc_text(str(start))
            seconds: dict[str, float | None] = {}
            for key in ("window", "lag"):
                seconds[key], problem_found = _duration(where, key, sync.get(key), cursor, cursor_type)
                if problem_found is not None:
                    message, next_step = problem_found
                    found.append(_invalid(message, place(key), next_step))
            if seconds["window"] is not None and start is None:
                found.append(
                    _invalid(
                        f"{where}: window: needs start: (the first window starts there)",
                        place("window"),
                        "add start: with the first value to backfill from",
                    )
                )
            diags += found
            if found:
                continue
            specs[(s_name, d_name)] = IncrementalSpec(
                s_name,
                d_name,
                IncrementalRoute.YAML,
                cursor,
                cursor_type,
                inclusive=False,
                start=None if start is None else str(start),
                window_seconds=seconds["window"],
                lag_seconds=seconds["lag"],
            )
    return specs, diags


def _duration(
    where: str, key: str, raw: object, cursor: str, cursor_type: str | None
) -> tuple[float | None, tuple[str, str | None] | None]:
    """`window:` or `lag:` in seconds (None when not set or invalid), and its problem as (message, next step):
    not a duration, or a cursor it cannot apply to (untyped, not temporal, a date and not whole days)."""
    if raw is None:
        return None, None
    try:
        seconds = parse_duration(str(raw))
    except ValueError as exc:
        return None, (f"{where}: {key}: {exc}", None)
    if cursor_type is None:
        return seconds, (
            f"{where}: {key}: needs the cursor's type, and '{cursor}' has no type in columns:",
            "declare the cursor in the dataset's columns: as date or timestamp",
        )
    if cursor_type not in TEMPORAL_TYPES:
        return seconds, (
            f"{where}: {key}: works on a date or timestamp cursor, and '{cursor}' is {cursor_type.lower()}",
            f"remove {key}:, or use a date or timestamp cursor",
        )
    if cursor_type == "DATE" and seconds % _DAY:
        return seconds, (
            f"{where}: {key}: {raw} on a date cursor must be whole days",
            f"write {key}: as days (e.g. 1d, 7d)",
        )
    return seconds, None


def _invalid(message: str, place: Place, next_step: str | None = None) -> Diagnostic:
    return error("PZ0230", message, place=place, next_step=next_step or "")
