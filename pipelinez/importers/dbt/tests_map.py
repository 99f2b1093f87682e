"""schema.yml tests → pz's dbt test spellings (dbt_syntax.md item 3) and, on sources, pz checks."""

from __future__ import annotations

import re
from typing import Any

from pipelinez.core.json_types import JsonObject
from pipelinez.importers.dbt.yamlio import mapping

_CONFIG = ("severity", "where", "warn_if", "error_if")


def _split(test: Any) -> tuple[str, JsonObject]:
    if isinstance(test, str):
        return test, {}
    if isinstance(test, dict) and len(test) == 1:
        name, args = next(iter(test.items()))
        args = dict(mapping(args))
        args.update(mapping(args.pop("arguments", None)))
        return str(name), args
    return "", {}


def _config(args: JsonObject, where: str, skipped: list[str]) -> JsonObject:
    config = {**mapping(args.pop("config", None))}
    for key in _CONFIG:
        if key in args:
            config[key] = args.pop(key)
    for key in sorted(set(config) - set(_CONFIG)):
        skipped.append(f"{where}: test config `{key}` is not carried over")
    config = {k: (str(v).lower() if k == "severity" else v) for k, v in config.items() if k in _CONFIG}
    return config


def column_test(
    test: Any, column: str, where: str, skipped: list[str]
) -> tuple[Any | None, JsonObject | None]:
    """(column-level spelling, or a model-level one) for one dbt column test; (None, None) when skipped."""
    name, args = _split(test)
    if args.get("enabled") is False or mapping(args.get("config")).get("enabled") is False:
        skipped.append(f"{where}: disabled test {name} on column {column}")
        return None, None
    args.pop("name", None)
    config = _config(args, where, skipped)
    if name in ("unique", "not_null"):
        return ({name: {"config": config}} if config else name), None
    if name == "accepted_values":
        spec: JsonObject = {"values": list(args.get("values") or [])}
        return {name: _with(spec, config)}, None
    if name == "relationships":
        spec = {"to": str(args.get("to")), "field": str(args.get("field"))}
        return {name: _with(spec, config)}, None
    if name == "dbt_utils.expression_is_true" and "expression" in args:
        sql = f"{column} {args['expression']}"
        return None, {"expression": _with({"sql": sql}, config)}
    if name == "dbt_utils.accepted_range":
        return None, _range(column, args, config)
    skipped.append(f"{where}: test {name or test!r} on column {column} has no pz equivalent")
    return None, None


def _range(column: str, args: JsonObject, config: JsonObject) -> JsonObject:
    inclusive = args.get("inclusive", True)
    parts = []
    if "min_value" in args:
        parts.append(f"{column} {'>=' if inclusive else '>'} {args['min_value']}")
    if "max_value" in args:
        parts.append(f"{column} {'<=' if inclusive else '<'} {args['max_value']}")
    return {"expression": _with({"sql": " AND ".join(parts) or "TRUE"}, config)}


def model_test(test: Any, where: str, skipped: list[str]) -> JsonObject | None:
    name, args = _split(test)
    args.pop("name", None)
    config = _config(args, where, skipped)
    if name == "dbt_utils.expression_is_true" and "expression" in args:
        return {"expression": _with({"sql": str(args["expression"])}, config)}
    if name == "dbt_utils.unique_combination_of_columns":
        return {"unique": _with({"columns": list(args.get("combination_of_columns") or [])}, config)}
    skipped.append(f"{where}: model test {name or test!r} has no pz equivalent")
    return None


def _with(spec: JsonObject, config: JsonObject) -> JsonObject:
    return {**spec, "config": config} if config else spec


def source_check(test: Any, column: str, where: str, skipped: list[str]) -> JsonObject | None:
    """A source column's test as a pz `checks:` entry (the spelling source datasets take today)."""
    spelled, _model_level = column_test(test, column, where, skipped)
    if spelled is None:
        return None
    name = spelled if isinstance(spelled, str) else next(iter(spelled))
    spec = {} if isinstance(spelled, str) else dict(spelled[name])
    config = spec.pop("config", {})
    if set(config) - {"severity"}:
        skipped.append(f"{where}: where/warn_if/error_if of test {name} on {column} are not carried over")
    if name in ("unique", "not_null"):
        check: JsonObject = {name: {"columns": [column]}}
    elif name == "accepted_values":
        check = {name: {"column": column, "values": spec["values"]}}
    else:
        to = re.sub(r"^\s*ref\(\s*['\"](\w+)['\"]\s*\)\s*$", r"\1", str(spec.pop("to", "")))
        check = {name: {"column": column, "to": to, **spec}}
    if config.get("severity") == "warn":
        check["severity"] = "warn"
    return check
