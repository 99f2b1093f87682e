"""Building the model's dataclasses from shape-valid documents.

Values stay raw: `{{ env() }}`/`{{ var() }}` templates are rendered by the compile layer. Durations of retry
and breaker blocks become float seconds; every var/env/dataset/output/check gets its YAML position.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, TypedDict

from pipelinez.config.dbt_tests import build_all_checks
from pipelinez.config.model import (
    DATASET_ENGINE_KEYS,
    DEFAULT_STAGING_COMPRESSION,
    OUTPUT_ENGINE_KEYS,
    BreakerSpec,
    DatasetSpec,
    EngineSpec,
    EnvSpec,
    FolderConfig,
    OutputSpec,
    RetrySpec,
    SidecarSpec,
    SinkSpec,
    SourceSpec,
    VarSpec,
)
from pipelinez.config.positions import JsonPath
from pipelinez.config.schema_defs import DEFAULT_KEEP_LAST
from pipelinez.config.yaml_doc import YamlDoc
from pipelinez.core.diagnostics import Place
from pipelinez.core.durations import parse_duration
from pipelinez.core.json_types import JsonObject
from pipelinez.core.memory_budget import default_limit
from pipelinez.core.vocabulary import (
    DEFAULT_STRATEGY,
    Duplicates,
    InstanceKind,
    Materialization,
    StagingCompression,
    Strategy,
    VarType,
)


@dataclass(frozen=True)
class ProjectSettings:
    """What project.yml declares."""

    name: str
    vars: dict[str, VarSpec]
    env: dict[str, EnvSpec]
    connector_pins: dict[str, str]
    engine: EngineSpec
    keep_last: int
    folders: dict[str, FolderConfig]
    state: JsonObject  # the `state:` block as written ({}: the local .pz/ folder)


def stem(doc: YamlDoc) -> str:
    return PurePosixPath(doc.file).stem


def build_settings(doc: YamlDoc) -> ProjectSettings:
    data = doc.data
    variables = {
        name: VarSpec(name, VarType(spec["type"]), spec.get("default"), doc.positions.place(("vars", name)))
        for name, spec in _mapping(data.get("vars")).items()
    }
    env = {name: _env(doc, name, spec or {}) for name, spec in _mapping(data.get("env")).items()}
    pins = {str(k): str(v) for k, v in _mapping(data.get("connectors")).items()}
    retention = _mapping(data.get("retention"))
    return ProjectSettings(
        str(data["name"]),
        variables,
        env,
        pins,
        build_engine(_mapping(data.get("engine"))),
        int(retention.get("keep_last", DEFAULT_KEEP_LAST)),
        {
            str(folder): _folder(doc, str(folder), block or {})
            for folder, block in _mapping(data.get("pipelines")).items()
        },
        dict(_mapping(data.get("state"))),
    )


def _folder(doc: YamlDoc, folder: str, block: JsonObject) -> FolderConfig:
    sink = block.get("sink")
    materialized = block.get("materialized")
    return FolderConfig(
        folder=folder.strip("/") or ".",
        materialized=None if materialized is None else str(materialized),
        tags=tuple(str(t) for t in block.get("tags") or ()),
        sink=None if sink is None else str(sink),
        place=doc.positions.place(("pipelines", folder)),
        sink_place=None if sink is None else doc.positions.place(("pipelines", folder, "sink"), at="value"),
    )


def _env(doc: YamlDoc, name: str, spec: JsonObject) -> EnvSpec:
    default = spec.get("default")
    return EnvSpec(
        name,
        bool(spec.get("required", False)),
        bool(spec.get("secret", False)),
        None if default is None else _text(default),
        doc.positions.place(("env", name)),
    )


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def build_engine(engine: JsonObject) -> EngineSpec:
    breaker = engine.get("breaker")
    threads = engine.get("threads")
    return EngineSpec(
        threads=None if threads is None else int(threads),
        fail_fast=bool(engine.get("fail_fast", False)),
        force_universal=bool(engine.get("force_universal", False)),
        external_access=bool(engine.get("external_access", False)),
        memory_limit=str(engine.get("memory_limit") or default_limit()).strip(),
        staging_compression=StagingCompression(
            engine.get("staging_compression", DEFAULT_STAGING_COMPRESSION)
        ),
        retry=build_retry(engine.get("retry")),
        breaker=None if breaker is None else build_breaker(breaker),
        staging=dict(_mapping(engine.get("staging"))),
    )


def build_retry(block: Any) -> RetrySpec:
    block = _mapping(block)
    attempts = block.get("max_attempts")
    return RetrySpec(
        max_attempts=None if attempts is None else int(attempts),
        base_delay=_seconds(block.get("base_delay")),
        max_delay=_seconds(block.get("max_delay")),
    )


def build_breaker(block: Any) -> BreakerSpec:
    block = _mapping(block)
    defaults = BreakerSpec()
    threshold = block.get("failure_threshold")
    cool_down = _seconds(block.get("cool_down"))
    return BreakerSpec(
        failure_threshold=defaults.failure_threshold if threshold is None else int(threshold),
        cool_down=defaults.cool_down if cool_down is None else cool_down,
        declared=frozenset(k for k in ("failure_threshold", "cool_down") if block.get(k) is not None),
    )


def build_source(doc: YamlDoc) -> SourceSpec:
    data = doc.data
    datasets = {
        name: _dataset(doc, name, entry or {}) for name, entry in _mapping(data.get("datasets")).items()
    }
    return SourceSpec(**_instance(doc, InstanceKind.SOURCE), datasets=datasets)


def build_sink(doc: YamlDoc) -> SinkSpec:
    data = doc.data
    outputs = {name: _output(doc, name, entry or {}) for name, entry in _mapping(data.get("outputs")).items()}
    return SinkSpec(**_instance(doc, InstanceKind.SINK), outputs=outputs)


class _InstanceFields(TypedDict):
    """The fields a source and a sink file share (`InstanceSpec`)."""

    kind: InstanceKind
    name: str
    file: str
    connector: str
    connection: JsonObject
    max_concurrency: int | None
    retry: RetrySpec
    force_universal: bool | None
    place: Place


def _instance(doc: YamlDoc, kind: InstanceKind) -> _InstanceFields:
    data = doc.data
    concurrency = data.get("max_concurrency")
    engine = _mapping(data.get("engine"))
    universal = engine.get("force_universal")
    return {
        "kind": kind,
        "name": stem(doc),
        "file": doc.file,
        "connector": str(data["connector"]),
        "connection": dict(_mapping(data.get("connection"))),
        "max_concurrency": None if concurrency is None else int(concurrency),
        "retry": build_retry(data.get("retry")),
        "force_universal": None if universal is None else bool(universal),
        "place": doc.positions.place(("connector",)),
    }


def _dataset(doc: YamlDoc, name: str, entry: JsonObject) -> DatasetSpec:
    path: JsonPath = ("datasets", name)
    columns = entry.get("columns")
    sync = entry.get("sync")
    return DatasetSpec(
        name=name,
        options={k: v for k, v in entry.items() if k not in DATASET_ENGINE_KEYS},
        columns=None if columns is None else {str(k): _column_type(v) for k, v in columns.items()},
        sync=None if sync is None else dict(sync),
        retry=build_retry(entry.get("retry")),
        checks=build_all_checks(doc, path, entry),
        place=doc.positions.place(path),
        description=_optional_text(entry.get("description")),
        column_docs=_column_docs(columns),
    )


def _optional_text(value: Any) -> str | None:
    return None if value is None else str(value)


def _column_type(entry: Any) -> str:
    """A contract column: `name: type`, or `name: { type: ..., description: ... }`."""
    return str(entry["type"]) if isinstance(entry, dict) else str(entry)


def _column_docs(columns: Any) -> dict[str, str]:
    """The `description:` of each column entry that has one (contract long form or sidecar `columns:`)."""
    return {
        str(name): str(entry["description"])
        for name, entry in (columns or {}).items()
        if isinstance(entry, dict) and entry.get("description") is not None
    }


def _output(doc: YamlDoc, name: str, entry: JsonObject) -> OutputSpec:
    on_delete = entry.get("on_delete")
    duplicates = entry.get("duplicates")
    return OutputSpec(
        name=name,
        options={k: v for k, v in entry.items() if k not in OUTPUT_ENGINE_KEYS},
        strategy=Strategy(entry.get("strategy", DEFAULT_STRATEGY)),
        keys=tuple(str(k) for k in entry.get("keys") or ()),
        on_delete=None if on_delete is None else str(on_delete["column"]),
        duplicates=None if duplicates is None else Duplicates(duplicates),
        allow_empty=bool(entry.get("allow_empty", False)),
        retry=build_retry(entry.get("retry")),
        place=doc.positions.place(("outputs", name)),
        description=_optional_text(entry.get("description")),
    )


def build_sidecar(doc: YamlDoc) -> SidecarSpec:
    data = doc.data
    description = data.get("description")
    return SidecarSpec(
        file=doc.file,
        description=None if description is None else str(description),
        materialized=None if data.get("materialized") is None else Materialization(data["materialized"]),
        tags=tuple(str(t) for t in data.get("tags") or ()),
        checks=build_all_checks(doc, (), data),
        column_docs=_column_docs(data.get("columns")),
    )


def _mapping(value: Any) -> JsonObject:
    return value if isinstance(value, dict) else {}


def _seconds(value: Any) -> float | None:
    return None if value is None else parse_duration(str(value))
