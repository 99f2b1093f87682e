"""Tier 1, shape: a parsed project file against its JSON Schema, plus the few cross-field rules a schema
cannot say (retry base_delay <= max_delay, row_count min <= max). Every problem of a file is reported,
deduplicated and sorted by position, each with file:line:col."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING, Any, TypeGuard

from pipelinez.config.checks import CHECK_TYPES, config_twice
from pipelinez.config.positions import JsonPath, dotted
from pipelinez.config.regions import check_lists, retry_blocks
from pipelinez.config.schemas import KINDS, load_schema, schema_text
from pipelinez.config.shape_errors import diagnose
from pipelinez.config.shape_memo import ShapeMemo
from pipelinez.config.yaml_doc import YamlDoc
from pipelinez.core.diagnostics import Diagnostic, error, sort_diagnostics
from pipelinez.core.durations import parse_duration

if TYPE_CHECKING:  # jsonschema is imported when a file is first checked, not with the package
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError


@cache
def _validator(kind: str) -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(load_schema(kind))


@cache
def _schema_text(kind: str) -> str:
    return schema_text(kind)


def validate_shape(doc: YamlDoc, kind: str, memo: ShapeMemo | None = None) -> list[Diagnostic]:
    """Every shape problem of `doc`, a file of `kind` (project, source, sink, sidecar). With `memo`, data
    that passed the schema before is not checked by jsonschema again (`config.shape_memo`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown file kind {kind!r}")
    found: list[Diagnostic] = []
    digest = memo.digest(_schema_text(kind), doc.data) if memo is not None else None
    if memo is None or not memo.passed(digest):
        errors = _relevant(_validator(kind).iter_errors(doc.data))
        for err in errors:
            found.extend(diagnose(err, doc, kind))
        if memo is not None and not errors:
            memo.remember(digest)
    found.extend(_retry_rules(doc, kind))
    found.extend(_breaker_rules(doc, kind))
    found.extend(_check_rules(doc, kind))
    return sort_diagnostics(found)


def _relevant(errors: Iterable[ValidationError]) -> list[ValidationError]:
    """Drop the errors a wrong type makes moot: once a value has the wrong type, its bounds don't matter."""
    errors = list(errors)
    mistyped = {tuple(e.absolute_path) for e in errors if e.validator == "type"}
    return [e for e in errors if e.validator == "type" or tuple(e.absolute_path) not in mistyped]


def _retry_rules(doc: YamlDoc, kind: str) -> list[Diagnostic]:
    found = []
    for path, block in retry_blocks(kind, doc.data):
        base, cap = _seconds(block, "base_delay"), _seconds(block, "max_delay")
        if base is not None and cap is not None and base > cap:
            line, col = doc.locate((*path, "base_delay"), at="value")
            found.append(
                error(
                    "PZ0121",
                    f"'{dotted(path)}' has base_delay {block['base_delay']} longer than "
                    f"max_delay {block['max_delay']}",
                    file=doc.file,
                    line=line,
                    col=col,
                    next_step="make base_delay at most max_delay",
                )
            )
    return found


def _breaker_rules(doc: YamlDoc, kind: str) -> list[Diagnostic]:
    """A zero cool_down would let a probe through the instant the breaker opens: no breaker at all."""
    engine = doc.data.get("engine") if kind == "project" and isinstance(doc.data, dict) else None
    block = engine.get("breaker") if isinstance(engine, dict) else None
    if not isinstance(block, dict) or _seconds(block, "cool_down") != 0:
        return []
    line, col = doc.locate(("engine", "breaker", "cool_down"), at="value")
    return [
        error(
            "PZ0120",
            f"'engine.breaker.cool_down' is {block['cool_down']}: a breaker must stay open for some time",
            file=doc.file,
            line=line,
            col=col,
        )
    ]


def _check_rules(doc: YamlDoc, kind: str) -> list[Diagnostic]:
    found = []
    for path, checks in check_lists(kind, doc.data):
        if not isinstance(checks, list):
            continue
        for index, item in enumerate(checks):
            found.extend(_config_rules(doc, (*path, index), item))
            options = item.get("row_count") if isinstance(item, dict) else None
            if not isinstance(options, dict):
                continue
            low, high = options.get("min"), options.get("max")
            if _count(low) and _count(high) and low > high:
                item_path: JsonPath = (*path, index, "row_count", "min")
                line, col = doc.locate(item_path, at="value")
                found.append(
                    error(
                        "PZ0113",
                        f"check row_count has min {low} greater than max {high}",
                        file=doc.file,
                        line=line,
                        col=col,
                        next_step="make min at most max, e.g. " + _example_row_count(),
                    )
                )
    return found


def _config_rules(doc: YamlDoc, path: JsonPath, item: Any) -> list[Diagnostic]:
    """PZ0135: config given twice; PZ0136: a row_count bounded by nothing (its options hold only config)."""
    found = []
    twice = config_twice(item)
    if twice:
        line, col = doc.locate(path, at="key")
        found.append(
            error(
                "PZ0135",
                f"check '{dotted(path)}' sets {twice}",
                file=doc.file,
                line=line,
                col=col,
                next_step="keep one of them, e.g. `config: { severity: warn }`",
            )
        )
    options = item.get("row_count") if isinstance(item, dict) else None
    if isinstance(options, dict) and options and not ("min" in options or "max" in options):
        line, col = doc.locate((*path, "row_count"), at="key")
        found.append(
            error(
                "PZ0136",
                f"check '{dotted(path)}' is a row_count with neither min nor max: it could never fail",
                file=doc.file,
                line=line,
                col=col,
                next_step="add min: and/or max:, e.g. " + _example_row_count(),
            )
        )
    return found


def _example_row_count() -> str:
    return "- row_count: { min: 1, max: 1000000 }" if "row_count" in CHECK_TYPES else ""


def _count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _seconds(block: Any, key: str) -> float | None:
    if not isinstance(block, dict) or not isinstance(block.get(key), str):
        return None
    try:
        return parse_duration(block[key])
    except ValueError:
        return None
