"""Tier 3: every connection/dataset/output block against its connector's manifest JSON Schema, then the
connector's own cross-field `validate`. Manifests are read as data; connector code is imported only for
`validate`, and a connector that fails to load is reported, not raised.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pipelinez.compile.instances import ResolvedInstance
from pipelinez.config.model import InstanceSpec, Project, SinkSpec, SourceSpec
from pipelinez.config.shape_memo import ShapeMemo
from pipelinez.config.suggest import did_you_mean
from pipelinez.connectors import registry
from pipelinez.connectors.sdk import Manifest
from pipelinez.core.diagnostics import ConnectorHostError, Diagnostic, Place, error
from pipelinez.core.json_types import JsonObject

if TYPE_CHECKING:  # jsonschema is imported when a block is first checked, not with the package
    from jsonschema.exceptions import ValidationError

Locator = Callable[[str, tuple[str | int, ...]], Place]
# the blocks that passed their manifest's schema before (`config.shape_memo`), beside the files' shapes.json
MEMO_FILE = "connector_shapes.json"


def coerce(schema: JsonObject, value: Any) -> Any:
    """Rendered templates are strings: turn '5432' into 5432 where the schema wants a number/boolean."""
    kind = schema.get("type")
    if isinstance(value, str):
        try:
            if kind == "integer" and value.strip().lstrip("-").isdigit():
                return int(value)
            if kind == "number":
                return float(value)
        except ValueError:
            return value
        if kind == "boolean" and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        return value
    if isinstance(value, dict):
        props = schema.get("properties", {})
        return {k: coerce(props.get(k, {}), v) for k, v in value.items()}
    return value


def _schema_errors(
    schema: JsonObject,
    value: JsonObject,
    code: str,
    what: str,
    file: str,
    base: tuple[str | int, ...],
    locate: Locator,
    memo: ShapeMemo | None = None,
) -> list[Diagnostic]:
    diags = []
    for err in sorted(_errors(schema, value, memo), key=lambda e: list(map(str, e.absolute_path))):
        path = tuple(err.absolute_path)
        if err.validator == "additionalProperties":
            allowed = list(schema.get("properties", {}))
            extra = (
                [k for k in err.instance if k not in schema.get("properties", {})]
                if isinstance(err.instance, dict)
                else []
            )
            for key in extra:
                diags.append(
                    error(
                        code,
                        f"{what}: unknown key '{key}'{did_you_mean(key, allowed)}",
                        place=locate(file, (*base, *path, key)),
                        next_step=f"use one of: {', '.join(allowed)}",
                    )
                )
            continue
        where = ".".join(map(str, path))
        diags.append(
            error(
                code,
                f"{what}{': ' + where if where else ''}: {err.message}",
                place=locate(file, (*base, *path)),
            )
        )
    return diags


def _errors(schema: JsonObject, value: Any, memo: ShapeMemo | None) -> list[ValidationError]:
    """`value`'s errors against `schema`; none, without jsonschema, when `memo` saw it pass before."""
    digest = memo.digest(json.dumps(schema, sort_keys=True), value) if memo is not None else None
    if memo is not None and memo.passed(digest):
        return []
    from jsonschema import Draft202012Validator  # here: `import pipelinez.api` does not import jsonschema

    found = list(Draft202012Validator(schema).iter_errors(value))
    if memo is not None and not found:
        memo.remember(digest)
    return found


def _manifest(spec: InstanceSpec, locate: Locator) -> tuple[Manifest | None, list[Diagnostic]]:
    try:
        return registry.manifest_of(spec.connector), []
    except ConnectorHostError as exc:
        known = ", ".join(sorted(registry.installed()))
        return None, [
            error(
                d.code,
                f"{spec.kind} '{spec.name}': {d.message}"
                + (did_you_mean(spec.connector, registry.installed()) if d.code == "PZ0215" else ""),
                place=locate(spec.file, ("connector",)),
                next_step=d.next_step + (f" (installed: {known})" if d.code == "PZ0215" else ""),
            )
            for d in exc.diagnostics
        ]


def validate_instances(
    project: Project, resolved: dict[str, ResolvedInstance], locate: Locator
) -> list[Diagnostic]:
    """All tier-3 diagnostics of the project's sources and sinks. `resolved` is keyed by the spec's file."""
    diags: list[Diagnostic] = []
    memo = ShapeMemo(project.root, MEMO_FILE)
    specs: list[SourceSpec | SinkSpec] = [*project.sources.values(), *project.sinks.values()]
    for spec in specs:
        inst = resolved[spec.file]
        manifest, found = _manifest(spec, locate)
        diags += found
        if manifest is None:
            continue
        caps = manifest.capabilities
        is_source = isinstance(spec, SourceSpec)
        if (is_source and not caps.source) or (not is_source and not caps.sink):
            diags.append(
                error(
                    "PZ0306",
                    f"connector '{spec.connector}' cannot be used as a {'source' if is_source else 'sink'}",
                    place=locate(spec.file, ("connector",)),
                )
            )
            continue
        what = f"{spec.kind} '{spec.name}' connection"
        connection = coerce(manifest.connection_schema, inst.display_connection)
        diags += _schema_errors(
            manifest.connection_schema, connection, "PZ0301", what, spec.file, ("connection",), locate, memo
        )
        datasets: dict[str, JsonObject] = {}
        outputs: dict[str, JsonObject] = {}
        if isinstance(spec, SourceSpec):
            for name, ds in spec.datasets.items():
                datasets[name] = coerce(manifest.dataset_schema, inst.blocks.get(name, ds.options))
                diags += _schema_errors(
                    manifest.dataset_schema,
                    datasets[name],
                    "PZ0302",
                    f"source '{spec.name}' dataset '{name}'",
                    spec.file,
                    ("datasets", name),
                    locate,
                    memo,
                )
        else:
            for name, out in spec.outputs.items():
                outputs[name] = coerce(manifest.output_schema, inst.blocks.get(name, out.options))
                diags += _schema_errors(
                    manifest.output_schema,
                    outputs[name],
                    "PZ0303",
                    f"sink '{spec.name}' output '{name}'",
                    spec.file,
                    ("outputs", name),
                    locate,
                    memo,
                )
                diags += _strategy_rules(spec, name, manifest, locate)
        # cross-field rules run on what passed the schema: a bad block is left out, a bad connection key
        # dropped, so one schema error never hides the file's other errors
        invalid = any(d.code in ("PZ0301", "PZ0302", "PZ0303") and d.place.file == spec.file for d in diags)
        bad_keys = _invalid_keys(manifest.connection_schema, connection, memo)
        diags += _connector_rules(
            spec,
            {k: v for k, v in connection.items() if k not in bad_keys},
            {n: b for n, b in datasets.items() if not _invalid_keys(manifest.dataset_schema, b, memo)},
            {n: b for n, b in outputs.items() if not _invalid_keys(manifest.output_schema, b, memo)},
            locate,
            schema_errors=invalid,
        )
    memo.save()
    return diags


def _invalid_keys(schema: JsonObject, value: JsonObject, memo: ShapeMemo | None = None) -> set[str]:
    """Top-level keys of `value` that fail `schema` (unknown keys included); "" for a root-level error."""
    keys: set[str] = set()
    for err in _errors(schema, value, memo):
        if err.absolute_path:
            keys.add(str(err.absolute_path[0]))
        elif err.validator == "additionalProperties" and isinstance(err.instance, dict):
            keys |= {k for k in err.instance if k not in schema.get("properties", {})}
        else:
            keys.add("")
    return keys


def _strategy_rules(spec: SinkSpec, name: str, manifest: Manifest, locate: Locator) -> list[Diagnostic]:
    out = spec.outputs[name]
    base = ("outputs", name)
    diags = []
    caps = manifest.capabilities
    if out.strategy not in caps.strategies:
        diags.append(
            error(
                "PZ0305",
                f"sink '{spec.name}' output '{name}': connector '{manifest.name}' cannot "
                f"{out.strategy} (it supports: {', '.join(caps.strategies)})",
                place=locate(spec.file, (*base, "strategy")),
            )
        )
    if out.strategy == "merge" and not out.keys:
        diags.append(
            error(
                "PZ0305",
                f"sink '{spec.name}' output '{name}': strategy merge needs keys",
                place=locate(spec.file, base),
                next_step="add keys: [<key column>, ...]",
            )
        )
    if out.on_delete and out.strategy != "merge":
        diags.append(
            error(
                "PZ0305",
                f"sink '{spec.name}' output '{name}': on_delete only applies to merge",
                place=locate(spec.file, (*base, "on_delete")),
            )
        )
    if out.duplicates and out.strategy != "append":
        diags.append(
            error(
                "PZ0305",
                f"sink '{spec.name}' output '{name}': duplicates only applies to append",
                place=locate(spec.file, (*base, "duplicates")),
            )
        )
    if "foreign_files" in out.options and out.strategy != "replace":  # the file sinks' key (their schemas)
        diags.append(
            error(
                "PZ0305",
                f"sink '{spec.name}' output '{name}': foreign_files only applies to replace (what a replace "
                f"may delete; {out.strategy} deletes nothing)",
                place=locate(spec.file, (*base, "foreign_files")),
                next_step="remove foreign_files, or write with strategy replace",
            )
        )
    return diags


def _connector_rules(
    spec: SourceSpec | SinkSpec,
    connection: JsonObject,
    datasets: dict[str, JsonObject],
    outputs: dict[str, JsonObject],
    locate: Locator,
    schema_errors: bool = False,
) -> list[Diagnostic]:
    try:
        cls = registry.load_class(spec.connector)
        issues = cls.validate(connection, datasets, outputs)
    except ConnectorHostError as exc:
        return [
            error(d.code, f"{spec.kind} '{spec.name}': {d.message}", place=locate(spec.file, ("connector",)))
            for d in exc.diagnostics
        ]
    except Exception as exc:  # third-party validate code: report, never crash
        if schema_errors:
            return []  # it tripped on what the schema errors already reported
        return [
            error(
                "PZ0701",
                f"connector '{spec.connector}' validate() crashed: {type(exc).__name__}: {exc}",
                place=locate(spec.file, ("connector",)),
            )
        ]
    diags = []
    for issue in issues:
        base: tuple[str | int, ...] = ("connection",)
        what = f"{spec.kind} '{spec.name}'"
        if issue.block in ("dataset", "output"):
            base = (f"{issue.block}s", issue.name or "")
            what += f" {issue.block} '{issue.name}'" if issue.name else ""
        diags.append(
            error(
                "PZ0304",
                issue.message if issue.message.startswith(what) else f"{what}: {issue.message}",
                place=locate(spec.file, (*base, *issue.path)),
            )
        )
    return diags
