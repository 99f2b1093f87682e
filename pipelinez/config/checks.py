"""The check catalogue (types and their options, as JSON Schema) and building CheckSpecs with their names.

A check in a sidecar or under a dataset is a one-key mapping `{type: options}`, with optional siblings
`severity: error|warn` and `name:`. The default name is derived from the type and its columns.
"""

from __future__ import annotations

import re

from pipelinez.config.model import CheckSpec
from pipelinez.config.positions import JsonPath
from pipelinez.core.diagnostics import Diagnostic, Place, error
from pipelinez.core.durations import DURATION_PATTERN
from pipelinez.core.json_types import JsonObject
from pipelinez.core.sqlnames import NAME_PATTERN
from pipelinez.core.vocabulary import CheckSeverity

SEVERITIES = tuple(s.value for s in CheckSeverity)
CHECK_KEYS = ("severity", "name")  # siblings of the type key in a check item

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
        "properties": properties,
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
    return {
        "description": "one check: `- <type>: { options }` with optional severity and name",
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
        "oneOf": [{"required": [t]} for t in CHECK_TYPES],
    }


def check_defs() -> JsonObject:
    defs: JsonObject = {f"check_{t}": schema for t, schema in CHECK_TYPES.items()}
    defs["check"] = check_item_schema()
    defs["checks"] = {
        "type": ["array", "null"],
        "items": {"$ref": "#/$defs/check"},
        "description": "data tests run in staging after the table is built",
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


def build_check(item: JsonObject, index: int, place: Place, item_path: JsonPath = ()) -> CheckSpec:
    """A CheckSpec from a shape-valid check item; `index` is its 1-based position in the list, `item_path`
    the item's path in its file (when known)."""
    check_type = check_type_of(item)
    options = dict(item[check_type] or {})
    name = item.get("name") or default_check_name(check_type, options, index)
    options_path = (*item_path, check_type) if item_path else ()
    return CheckSpec(
        check_type,
        options,
        CheckSeverity(item.get("severity", CheckSeverity.ERROR)),
        str(name),
        place,
        options_path,
    )


EXAMPLES: dict[str, str] = {
    "not_null": "{ columns: [order_id] }",
    "unique": "{ columns: [order_id] }",
    "accepted_values": "{ column: status, values: [open, shipped] }",
    "row_count": "{ min: 1, max: 1000000 }",
    "expression": '{ sql: "amount >= 0", name: non_negative_amount }',
    "relationships": "{ column: customer_id, to: customers, field: id }",
    "freshness": "{ column: updated_at, max_age: 1d }",
}


def example(check_type: str) -> str:
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
