"""The check catalogue (types and their options, as JSON Schema) and building CheckSpecs with their names.

A check in a sidecar or under a dataset is a one-key mapping `{type: options}`, with optional siblings
`severity: error|warn`, `name:` and `config:`. The default name is derived from the type and its columns.
The dbt spellings (column `tests:`/`data_tests:`, pipeline `data_tests:`, bare `- unique`) are built in
`config.dbt_tests`; `config: {severity, where, warn_if, error_if}` is read here for every spelling.
"""

from __future__ import annotations

import re
from typing import Any

from pipelinez.config.model import CheckSpec
from pipelinez.config.positions import JsonPath
from pipelinez.core.diagnostics import Diagnostic, Place, error
from pipelinez.core.durations import DURATION_PATTERN
from pipelinez.core.json_types import JsonObject
from pipelinez.core.sqlnames import NAME_PATTERN
from pipelinez.core.vocabulary import CheckSeverity

SEVERITIES = tuple(s.value for s in CheckSeverity)
CHECK_KEYS = ("severity", "name", "config")  # siblings of the type key in a check item
CONFIG_KEYS = ("severity", "where", "warn_if", "error_if")
DEFAULT_THRESHOLD = "!=0"
THRESHOLD_PATTERN = r"^\s*(>=|<=|!=|<>|==|=|>|<)\s*\d+\s*$"

CONFIG: JsonObject = {
    "description": "dbt-style test config: severity, a where filter and failure-count thresholds",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "severity": {"enum": list(SEVERITIES), "description": "error (default) | warn"},
        "where": {
            "type": "string",
            "minLength": 1,
            "description": "SQL predicate: only the rows it keeps are checked",
        },
        "warn_if": {
            "type": "string",
            "pattern": THRESHOLD_PATTERN,
            "description": "warn when the failure count matches this comparison (default !=0)",
        },
        "error_if": {
            "type": "string",
            "pattern": THRESHOLD_PATTERN,
            "description": "fail when the failure count matches this comparison "
            "(default !=0; with severity error only)",
        },
    },
}

_COLUMN = {"type": "string", "minLength": 1, "description": "a column of the checked table"}
_COLUMNS = {
    "type": "array",
    "items": {"type": "string", "minLength": 1},
    "minItems": 1,
    "description": "columns of the checked table",
}
_TEXT = {"type": "string", "minLength": 1}
_COUNT = {"type": "integer", "minimum": 0}


def _options(
    description: str, properties: JsonObject, required: list[str], min_properties: int = 0
) -> JsonObject:
    schema: JsonObject = {
        "description": description,
        "type": "object",
        "properties": {**properties, "config": {"$ref": "#/$defs/check_config"}},
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    if min_properties:
        schema["minProperties"] = min_properties
    return schema


CHECK_TYPES: dict[str, JsonObject] = {
    "not_null": _options("every listed column is non-null in every row", {"columns": _COLUMNS}, ["columns"]),
    "unique": _options("the listed columns together are unique", {"columns": _COLUMNS}, ["columns"]),
    "accepted_values": _options(
        "the column holds only the listed values",
        {
            "column": _COLUMN,
            "values": {
                "type": "array",
                "items": {"type": ["string", "number", "boolean"]},
                "minItems": 1,
                "description": "the allowed values",
            },
        },
        ["column", "values"],
    ),
    "row_count": _options(
        "the table's row count is within [min, max]",
        {
            "min": {**_COUNT, "description": "fewest rows allowed"},
            "max": {**_COUNT, "description": "most rows allowed"},
        },
        [],
        min_properties=1,
    ),
    "expression": _options(
        "a SQL boolean expression true for every row",
        {
            "sql": {**_TEXT, "description": "boolean SQL expression over the table's columns"},
            "name": {"type": "string", "pattern": NAME_PATTERN, "description": "names the check"},
        },
        ["sql"],
    ),
    "relationships": _options(
        "every non-null value of column exists in field of `to` (a pipeline or source('src', 'dataset'))",
        {
            "column": _COLUMN,
            "to": {**_TEXT, "description": "a pipeline name or source('src', 'dataset')"},
            "field": {**_TEXT, "description": "the referenced column"},
        },
        ["column", "to", "field"],
    ),
    "freshness": _options(
        "the newest value of column is at most max_age old",
        {
            "column": _COLUMN,
            "max_age": {
                "type": "string",
                "pattern": DURATION_PATTERN,
                "description": "a duration: 500ms, 2s, 5m, 1h, 1d",
            },
        },
        ["column", "max_age"],
    ),
}


def check_item_schema() -> JsonObject:
    """JSON Schema of one check item; option schemas are referenced from `$defs/check_<type>`."""
    properties: JsonObject = {t: {"$ref": f"#/$defs/check_{t}"} for t in CHECK_TYPES}
    properties["severity"] = {
        "enum": list(SEVERITIES),
        "description": "error (default) blocks the "
        "pipeline's sink writes when the check fails; warn only reports",
    }
    properties["name"] = {
        "type": "string",
        "pattern": NAME_PATTERN,
        "description": "the check's name (default: derived from type and columns)",
    }
    properties["config"] = {"$ref": "#/$defs/check_config"}
    return {
        "description": "one check: `- <type>: { options }` with optional severity and name",
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
        "oneOf": [{"required": [t]} for t in CHECK_TYPES],
    }


def check_defs() -> JsonObject:
    defs: JsonObject = {f"check_{t}": schema for t, schema in CHECK_TYPES.items()}
    defs["check_config"] = CONFIG
    defs["check"] = check_item_schema()
    defs["checks"] = {
        "type": ["array", "null"],
        "items": {"$ref": "#/$defs/check"},
        "description": "data tests run in staging after the table is built",
    }
    defs.update(column_test_defs())
    return defs


BARE_TESTS = ("not_null", "unique")  # column tests written as a bare name: `- unique`
_COLUMN_KEYS = ("column", "columns")  # implied by the column a test is listed under


def _column_options(check_type: str) -> JsonObject:
    """The options of a column-level test: the check's, without the column(s) it is listed under."""
    schema = CHECK_TYPES[check_type]
    properties = {k: v for k, v in schema["properties"].items() if k not in _COLUMN_KEYS}
    required = [k for k in schema.get("required", []) if k not in _COLUMN_KEYS]
    options: JsonObject = {
        "description": schema["description"],
        "type": "object" if required or "minProperties" in schema else ["object", "null"],
        "properties": {**properties, "config": {"$ref": "#/$defs/check_config"}},
        "additionalProperties": False,
    }
    if required:
        options["required"] = required
    if "minProperties" in schema:
        options["minProperties"] = schema["minProperties"]
    return options


def column_test_defs() -> JsonObject:
    """`columns: {c: {tests: [...]}}`: `- unique`, or `- <type>: { options, config }` without column(s)."""
    defs: JsonObject = {f"column_test_{t}": _column_options(t) for t in CHECK_TYPES}
    siblings = {k: v for k, v in check_item_schema()["properties"].items() if k in CHECK_KEYS}
    item = {
        "description": "one dbt-style column test: `- unique`, `- not_null` or `- <type>: { options }`",
        "type": "object",
        "properties": {**{t: {"$ref": f"#/$defs/column_test_{t}"} for t in CHECK_TYPES}, **siblings},
        "additionalProperties": False,
        "oneOf": [{"required": [t]} for t in CHECK_TYPES],
    }
    defs["column_test"] = {
        "if": {"type": "string"},
        "then": {"enum": list(BARE_TESTS), "description": "a test without options"},
        "else": item,
    }
    defs["column_tests"] = {
        "type": ["array", "null"],
        "items": {"$ref": "#/$defs/column_test"},
        "description": "dbt-style data tests of this column (they become checks)",
    }
    return defs


# --- building ------------------------------------------------------------------------------------

_NOT_NAME = re.compile(r"[^A-Za-z0-9_]+")


def check_type_of(item: JsonObject) -> str:
    return next(key for key in item if key in CHECK_TYPES)


def default_check_name(check_type: str, options: JsonObject, index: int) -> str:
    """`not_null_a_b`, `unique_a`, `accepted_values_c`, `row_count`, `expression_<name|index>`,
    `relationships_c`, `freshness_c`; `index` is the check's 1-based position in its list."""
    if check_type in ("not_null", "unique"):
        suffix = "_".join(str(c) for c in options.get("columns", []))
    elif check_type == "expression":
        suffix = str(options.get("name") or index)
    elif check_type == "row_count":
        suffix = ""
    else:
        suffix = str(options.get("column", ""))
    name = f"{check_type}_{suffix}" if suffix else check_type
    return _NOT_NAME.sub("_", name).strip("_") or check_type


def build_check(
    item: JsonObject, index: int, place: Place, item_path: JsonPath = (), *, dbt: bool = False
) -> CheckSpec:
    """A CheckSpec from a shape-valid check item; `index` is its 1-based position in the list, `item_path`
    the item's path in its file (when known). `dbt`: a `data_tests:` item (dbt's NULL semantics)."""
    check_type = check_type_of(item)
    options = dict(item[check_type] or {})
    config = {**dict(item.get("config") or {}), **dict(options.pop("config", None) or {})}
    name = item.get("name") or default_check_name(check_type, options, index)
    options_path = (*item_path, check_type) if item_path else ()
    severity = CheckSeverity(item.get("severity") or config.get("severity") or CheckSeverity.ERROR)
    return CheckSpec(
        check_type,
        options,
        severity,
        str(name),
        place,
        options_path,
        where=None if config.get("where") is None else str(config["where"]),
        warn_if=str(config.get("warn_if", DEFAULT_THRESHOLD)).strip(),
        error_if=str(config.get("error_if", DEFAULT_THRESHOLD)).strip(),
        nulls_pass=dbt,
    )


def config_twice(item: Any) -> str | None:
    """Why a check item sets its config twice (`severity:` and `config: {severity}`; `config:` beside the
    type key and inside its options), or None."""
    if not isinstance(item, dict):
        return None
    types = [k for k in item if k in CHECK_TYPES]
    inner = item.get(types[0]) if len(types) == 1 else None
    inner_config = inner.get("config") if isinstance(inner, dict) else None
    outer_config = item.get("config")
    if isinstance(inner_config, dict) and isinstance(outer_config, dict):
        return "`config:` both beside the check type and inside its options"
    config = inner_config if isinstance(inner_config, dict) else outer_config
    if "severity" in item and isinstance(config, dict) and "severity" in config:
        return "`severity:` both beside the check type and in its `config:`"
    return None


EXAMPLES: dict[str, str] = {
    "not_null": "{ columns: [order_id] }",
    "unique": "{ columns: [order_id] }",
    "accepted_values": "{ column: status, values: [open, shipped] }",
    "row_count": "{ min: 1, max: 1000000 }",
    "expression": '{ sql: "amount >= 0", name: non_negative_amount }',
    "relationships": "{ column: customer_id, to: customers, field: id }",
    "freshness": "{ column: updated_at, max_age: 1d }",
}


COLUMN_EXAMPLES: dict[str, str] = {  # a column test: its column is implied
    "not_null": "",
    "unique": "",
    "accepted_values": ": { values: [open, shipped] }",
    "row_count": ": { min: 1 }",
    "expression": ': { sql: "amount >= 0" }',
    "relationships": ": { to: ref('customers'), field: id }",
    "freshness": ": { max_age: 1d }",
}


def example(check_type: str, column_test: bool = False) -> str:
    if column_test:
        return f"- {check_type}{COLUMN_EXAMPLES.get(check_type, ': { ... }')}"
    return f"- {check_type}: {EXAMPLES.get(check_type, '{ ... }')}"


def duplicate_check_names(checks: tuple[CheckSpec, ...], owner: str) -> list[Diagnostic]:
    """PZ0204 for every check whose name an earlier check of the same pipeline/dataset already has."""
    seen: dict[str, CheckSpec] = {}
    found = []
    for check in checks:
        first = seen.setdefault(check.name, check)
        if first is not check:
            found.append(
                error(
                    "PZ0204",
                    f"two checks of {owner} are named '{check.name}' (the other at line "
                    f"{first.place.line}); check names become node names and must be unique",
                    file=check.place.file,
                    line=check.place.line,
                    col=check.place.col,
                    next_step="give one of them its own `name:`",
                )
            )
    return found
