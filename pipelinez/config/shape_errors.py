"""Turning one jsonschema ValidationError into diagnostics: the right code, a message naming the key and
what is allowed, and the position of the offending key or value."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from pipelinez.config.checks import CHECK_KEYS, CHECK_TYPES, THRESHOLD_PATTERN, example
from pipelinez.config.positions import JsonPath, dotted
from pipelinez.config.regions import TEST_KEYS, Region, region_of
from pipelinez.config.suggest import did_you_mean, expected_types, kind_of, one_of, show
from pipelinez.config.yaml_doc import YamlDoc
from pipelinez.core.diagnostics import Diagnostic, error
from pipelinez.core.durations import DURATION_PATTERN

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
from pipelinez.core.json_types import JsonObject
from pipelinez.core.printable import excerpt
from pipelinez.core.sqlnames import NAME_PATTERN

MAX_UNKNOWN_KEYS = 5  # more unknown keys in one mapping are one diagnostic, their names not echoed


@dataclass(frozen=True)
class Finding:
    """One shape error found in a YAML file: code, message and where."""

    code: str
    message: str
    path: JsonPath
    at: str = "value"  # "key" or "value"
    next_step: str = ""


@dataclass(frozen=True)
class _Ctx:
    """Where a shape error is being worded: the document, its kind and the error's path."""

    doc: YamlDoc
    kind: str
    err: ValidationError
    path: JsonPath
    region: Region | None

    @property
    def instance(self) -> Any:
        return self.err.instance

    @property
    def expected(self) -> Any:
        """The keyword's value in the schema (the required list, the enum, the bound, ...)."""
        return self.err.validator_value

    @property
    def schema(self) -> JsonObject:
        return self.err.schema if isinstance(self.err.schema, dict) else {}


def diagnose(err: ValidationError, doc: YamlDoc, kind: str) -> list[Diagnostic]:
    path: JsonPath = tuple(err.absolute_path)
    ctx = _Ctx(doc, kind, err, path, region_of(kind, path))
    handler = _HANDLERS.get(str(err.validator), _generic)
    diagnostics = []
    for finding in handler(ctx):
        region = region_of(kind, finding.path) or ctx.region
        code = region.code if region is not None and finding.code != "PZ0112" else finding.code
        line, col = doc.positions.locate(finding.path, at=finding.at)
        diagnostics.append(
            error(code, finding.message, file=doc.file, line=line, col=col, next_step=finding.next_step)
        )
    return diagnostics


# --- helpers -------------------------------------------------------------------------------------


def _subject(ctx: _Ctx, path: JsonPath | None = None) -> str:
    target = ctx.path if path is None else path
    return f"'{dotted(target)}'" if target else ctx.doc.file


def _where(ctx: _Ctx, path: JsonPath) -> str:
    return f"in '{dotted(path)}'" if path else f"at the top level of {ctx.doc.file}"


def _check_item(ctx: _Ctx, path: JsonPath) -> tuple[JsonPath, int] | None:
    """(item path, 0-based index) when `path` is inside a check item of a checks list."""
    region = ctx.region if ctx.region is not None else region_of(ctx.kind, path)
    if region is None or region.kind != "check" or len(path) <= len(region.base):
        return None
    index = path[len(region.base)]
    return (*region.base, index), int(index) if isinstance(index, int) else 0


def _check_type_at(ctx: _Ctx, path: JsonPath) -> str | None:
    """The check type when `path` is a check's options mapping (item + type key)."""
    found = _check_item(ctx, path)
    if found is None or len(path) != len(found[0]) + 1:
        return None
    last = path[-1]
    return last if isinstance(last, str) and last in CHECK_TYPES else None


def _is_check_item(ctx: _Ctx, path: JsonPath) -> bool:
    found = _check_item(ctx, path)
    return found is not None and found[0] == path


def _example(ctx: _Ctx, check_type: str) -> str:
    """An example of the check, as a column test when the error is in a column's `tests:` list."""
    region = ctx.region if ctx.region is not None else region_of(ctx.kind, ctx.path)
    column_test = region is not None and len(region.base) >= 3 and region.base[-1] in TEST_KEYS
    return example(check_type, column_test)


def _templated(value: Any) -> str:
    if isinstance(value, str) and "{{" in value:
        return "; {{ }} templates are rendered only in connector settings and string values"
    return ""


def _name_label(path: JsonPath) -> str:
    labels = {"vars": "variable", "env": "environment variable", "datasets": "dataset", "outputs": "output"}
    return labels.get(str(path[-1]), "") if path else ""


# --- handlers: one per JSON Schema keyword ---------------------------------------------------------


def _additional(ctx: _Ctx) -> list[Finding]:
    instance = ctx.instance
    if not isinstance(instance, dict):
        return []
    schema = ctx.schema
    allowed = list(schema.get("properties", {}))
    patterns = list(schema.get("patternProperties", {}))
    extras = [k for k in instance if k not in allowed and not any(re.search(p, k) for p in patterns)]
    if len(extras) > MAX_UNKNOWN_KEYS:  # not the file it should be (a symlink to a system file): no echo
        return [
            Finding(
                "PZ0102",
                f"{len(extras)} unknown keys {_where(ctx, ctx.path)} "
                f"(the first: '{excerpt(str(extras[0]))}'); "
                f"is this the right file? allowed keys: {one_of(allowed)}",
                (*ctx.path, extras[0]),
                "key",
            )
        ]
    findings = []
    for key in extras:
        key_path = (*ctx.path, key)
        findings.append(
            Finding(
                "PZ0102",
                _unknown_key_message(ctx, key, allowed),
                key_path,
                "key",
                _unknown_key_next(ctx, key),
            )
        )
    return findings


def _unknown_key_message(ctx: _Ctx, raw_key: str, allowed: list[str]) -> str:
    key = excerpt(raw_key)
    if _is_check_item(ctx, ctx.path):
        item = ctx.instance
        if not any(k in CHECK_TYPES for k in item):
            return (
                f"unknown check type '{key}'{did_you_mean(key, CHECK_TYPES)}; "
                f"check types: {one_of(CHECK_TYPES)}"
            )
        return (
            f"unknown key '{key}' in a check{did_you_mean(key, [*CHECK_TYPES, *CHECK_KEYS])}; "
            f"a check has one type key and optionally: {one_of(CHECK_KEYS)}"
        )
    check_type = _check_type_at(ctx, ctx.path)
    if check_type is not None:
        return (
            f"unknown option '{key}' for check '{check_type}'{did_you_mean(key, allowed)}; "
            f"options: {one_of(allowed)}"
        )
    hint = did_you_mean(key, allowed) or f"; allowed keys: {one_of(allowed)}"
    return f"unknown key '{key}' {_where(ctx, ctx.path)}{hint}"


def _unknown_key_next(ctx: _Ctx, key: str) -> str:
    if _is_check_item(ctx, ctx.path) and not any(k in CHECK_TYPES for k in ctx.instance):
        return f"use a check type, e.g. {_example(ctx, _closest_type(key))}"
    check_type = _check_type_at(ctx, ctx.path)
    if check_type is not None:
        return f"write the check as {_example(ctx, check_type)}"
    return ""


def _closest_type(word: str) -> str:
    match = difflib.get_close_matches(word, list(CHECK_TYPES), n=1, cutoff=0.0)
    return match[0] if match else "not_null"


def _required(ctx: _Ctx) -> list[Finding]:
    instance = ctx.instance
    if not isinstance(instance, dict):
        return []
    missing = [k for k in ctx.expected if k not in instance]
    why = ""
    if "then" in ctx.err.relative_schema_path and ctx.path[-1:] == ("sync",):
        why = " (mode: incremental reads rows after a cursor column's watermark)"
    check_type = _check_type_at(ctx, ctx.path)
    findings = []
    for key in missing:
        if check_type is not None:
            message = f"check '{check_type}' is missing option '{key}'"
            step = f"write the check as {_example(ctx, check_type)}"
        elif not ctx.path:
            message, step = f"{ctx.doc.file} is missing required key '{key}'", ""
        else:
            message, step = f"'{dotted(ctx.path)}' is missing required key '{key}'{why}", ""
        findings.append(Finding("PZ0104", message, ctx.path, "key", step))
    return findings


def _type(ctx: _Ctx) -> list[Finding]:
    value = ctx.instance
    schema = ctx.schema
    if schema.get("pattern") == DURATION_PATTERN:
        return [
            Finding(
                "PZ0106", f"{_subject(ctx)} must be a duration like 2s or 5m, not {kind_of(value)}", ctx.path
            )
        ]
    if _is_check_item(ctx, ctx.path):
        known = isinstance(value, str) and value in CHECK_TYPES
        step = f"write it as {_example(ctx, value)}" if known else ""
        return [
            Finding(
                "PZ0113",
                f"check {_subject(ctx)} must be a mapping like "
                f"`- <type>: {{ options }}`, not {kind_of(value)}",
                ctx.path,
                next_step=step,
            )
        ]
    check_type = _check_type_at(ctx, ctx.path)
    if check_type is not None:
        return [
            Finding(
                "PZ0113",
                f"the options of check '{check_type}' must be a mapping, not {kind_of(value)}",
                ctx.path,
                next_step=f"write the check as {_example(ctx, check_type)}",
            )
        ]
    expected = expected_types(ctx.expected)
    return [
        Finding(
            "PZ0103", f"{_subject(ctx)} must be {expected}, not {kind_of(value)}{_templated(value)}", ctx.path
        )
    ]


def _enum(ctx: _Ctx) -> list[Finding]:
    allowed = ctx.expected
    if str(ctx.err.validator) == "const":
        allowed = [allowed]
    value = ctx.instance
    if _is_check_item(ctx, ctx.path) and isinstance(value, str):
        return [_bare_test(ctx, value, [str(a) for a in allowed])]
    hint = did_you_mean(value, [str(a) for a in allowed]) if isinstance(value, str) else ""
    return [
        Finding(
            "PZ0103", f"{_subject(ctx)} must be one of: {one_of(allowed)}; not {show(value)}{hint}", ctx.path
        )
    ]


def _bare_test(ctx: _Ctx, value: str, bare: list[str]) -> Finding:
    """A column test written as a bare name that is not one (`- accepted_values`, `- uniqe`)."""
    if value in CHECK_TYPES:
        return Finding(
            "PZ0113",
            f"column test '{value}' needs options; only {one_of(bare)} may be written as a bare name",
            ctx.path,
            next_step=f"write it as {_example(ctx, value)}",
        )
    return Finding(
        "PZ0113",
        f"unknown column test {show(value)}{did_you_mean(value, list(CHECK_TYPES))}; "
        f"bare names: {one_of(bare)}; with options: {one_of([t for t in CHECK_TYPES if t not in bare])}",
        ctx.path,
        next_step=f"write it as {_example(ctx, _closest_type(value))}",
    )


def _pattern(ctx: _Ctx) -> list[Finding]:
    value = ctx.instance
    pattern = ctx.expected
    from_names = "propertyNames" in ctx.err.relative_schema_path
    path = (*ctx.path, str(value)) if from_names else ctx.path
    at = "key" if from_names else "value"
    if pattern == DURATION_PATTERN:
        return [
            Finding(
                "PZ0106",
                f"{_subject(ctx)} is not a duration: {show(value)} "
                "(write a number and a unit: 500ms, 2s, 5m, 1h, 1d)",
                path,
                at,
            )
        ]
    if pattern == NAME_PATTERN:
        label = _name_label(ctx.path) if from_names else "check"
        what = f"{label} name" if label else "name"
        return [
            Finding(
                "PZ0107",
                f"{show(value)} is not a valid {what}: use letters, digits and _, not starting with a digit",
                path,
                at,
            )
        ]
    if pattern == THRESHOLD_PATTERN:
        return [
            Finding(
                "PZ0103",
                f"{_subject(ctx)} is not a failure-count threshold: {show(value)} "
                "(write a comparison and a whole number, as dbt: >10, >=1, !=0, =0, <5)",
                path,
                at,
            )
        ]
    return [Finding("PZ0103", f"{_subject(ctx, path)} does not match the pattern {pattern}", path, at)]


def _bound(ctx: _Ctx) -> list[Finding]:
    value = ctx.instance
    limit = ctx.expected
    validator = str(ctx.err.validator)
    relation = {
        "minimum": "at least",
        "exclusiveMinimum": "more than",
        "maximum": "at most",
        "exclusiveMaximum": "less than",
    }[validator]
    return [Finding("PZ0103", f"{_subject(ctx)} must be {relation} {limit}, not {show(value)}", ctx.path)]


def _min_length(ctx: _Ctx) -> list[Finding]:
    if "propertyNames" in ctx.err.relative_schema_path:
        path = (*ctx.path, str(ctx.instance))
        return [Finding("PZ0103", f"an empty key {_where(ctx, ctx.path)}", path, "key")]
    return [Finding("PZ0103", f"{_subject(ctx)} must not be empty", ctx.path)]


def _min_items(ctx: _Ctx) -> list[Finding]:
    return [Finding("PZ0103", f"{_subject(ctx)} must list at least {ctx.expected} item(s)", ctx.path)]


def _min_properties(ctx: _Ctx) -> list[Finding]:
    schema = ctx.schema
    keys = one_of(schema.get("properties", {}))
    check_type = _check_type_at(ctx, ctx.path)
    subject = f"check '{check_type}'" if check_type else _subject(ctx)
    return [Finding("PZ0103", f"{subject} sets nothing; set at least one of: {keys}", ctx.path)]


def _unique_items(ctx: _Ctx) -> list[Finding]:
    return [Finding("PZ0103", f"{_subject(ctx)} lists the same item more than once", ctx.path)]


def _one_of(ctx: _Ctx) -> list[Finding]:
    item = ctx.instance
    if not _is_check_item(ctx, ctx.path):
        return _generic(ctx)
    if not isinstance(item, dict):
        return []  # reported by the type error of the same item
    types = [k for k in item if k in CHECK_TYPES]
    if len(types) > 1:
        return [
            Finding(
                "PZ0113",
                f"check {_subject(ctx)} names {len(types)} check types ({one_of(types)}); "
                "each list item is one check",
                ctx.path,
                "key",
                "split it into one list item per check type",
            )
        ]
    if any(k not in CHECK_KEYS for k in item):
        return []  # the unknown key is reported as an unknown check type
    return [
        Finding(
            "PZ0113",
            f"check {_subject(ctx)} names no check type; check types: {one_of(CHECK_TYPES)}",
            ctx.path,
            "key",
            f"add the check's type, e.g. {_example(ctx, 'not_null')}",
        )
    ]


def _removed(ctx: _Ctx) -> list[Finding]:
    if ctx.region is not None and ctx.region.kind == "input":
        sink = PurePosixPath(ctx.doc.file).stem
        output = str(ctx.path[1])
        step = (
            f"remove `input:` and add INSERT INTO {{{{ sink('{sink}', '{output}') }}}} to the pipeline "
            "that feeds it"
        )
        return [
            Finding(
                "PZ0112",
                f"output '{output}' declares `input:`, which was removed: the load is "
                "inline in the pipeline SQL now",
                ctx.path,
                "key",
                step,
            )
        ]
    return _generic(ctx)


def _generic(ctx: _Ctx) -> list[Finding]:
    return [Finding("PZ0103", f"{_subject(ctx)}: {ctx.err.message}", ctx.path)]


_HANDLERS: dict[str, Callable[[_Ctx], list[Finding]]] = {
    "additionalProperties": _additional,
    "required": _required,
    "type": _type,
    "enum": _enum,
    "const": _enum,
    "pattern": _pattern,
    "minimum": _bound,
    "exclusiveMinimum": _bound,
    "maximum": _bound,
    "exclusiveMaximum": _bound,
    "minLength": _min_length,
    "minItems": _min_items,
    "minProperties": _min_properties,
    "uniqueItems": _unique_items,
    "oneOf": _one_of,
    "not": _removed,
}
