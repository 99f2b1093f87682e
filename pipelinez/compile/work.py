"""Work items: what one node does, resolved once at compile from the project and its rendered templates.

A work item is frozen and picklable, and holds everything a worker needs to run its node given a staging
database: a source load's connector, connection, `DatasetRequest`, staging table and tier; a sink write's
`OutputRequest`, duplicates rule and input table; a pipeline's or check's SQL. Nothing downstream (planner,
runners, connectivity) looks the project up again.

Field metadata says how a field enters the node's content-hash id (`compile.ids`):
- `RUN_ONLY`: how or where an attempt runs (retry policy, max_concurrency, the project folder): not hashed;
- `SECRET`: what of the connection says where the data is (`connection_identity`: no password, user, token or
  TLS mode), which may still hold a secret: hashed as a digest, never serialized in the clear, and kept out
  of `repr`. The connection itself is not hashed: rotating a credential changes no id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelinez.compile.connection_identity import connection_identity
from pipelinez.compile.instances import ResolvedInstance
from pipelinez.compile.policy import RetryPolicy, declares_retry, effective_policy
from pipelinez.config.model import CheckSpec, InstanceSpec, Project, RetrySpec
from pipelinez.connectors import registry
from pipelinez.connectors.sdk import (
    Capabilities,
    Connector,
    ConnectorContext,
    DatasetRequest,
    OutputRequest,
    ReadBounds,
    choose_tier,
)
from pipelinez.core.diagnostics import ConnectorHostError
from pipelinez.core.json_types import JsonObject
from pipelinez.core.vocabulary import DEFAULT_STRATEGY, CheckSeverity, Duplicates, Strategy, Tier

RUN_ONLY: dict[str, str] = {"id": "exclude"}
SECRET: dict[str, str] = {"id": "digest"}


def _no_note(_message: str) -> None:
    return None


@dataclass(frozen=True)
class Endpoint:
    """The external system a source load reads or a sink write writes: one source or sink instance."""

    instance: str  # the source/sink name
    connector: str
    connection: JsonObject = field(repr=False, metadata=RUN_ONLY)  # rendered; may hold secrets
    project_dir: Path = field(metadata=RUN_ONLY)  # what relative paths in options are relative to
    file: str = field(metadata=RUN_ONLY)  # the instance's YAML file, for messages
    max_concurrency: int | None = field(default=None, metadata=RUN_ONLY)
    force_universal: bool = False
    # where the data is: the connection without credentials and transport settings (the node's identity)
    connection_identity: JsonObject = field(default_factory=dict, repr=False, metadata=SECRET)
    # what the connector declares it can do (its manifest), looked up once at compile: nothing downstream
    # (planner, tier gates, backends) asks the registry again. Empty when the manifest is unreadable (tier 3
    # reported it).
    caps: Capabilities = field(default_factory=Capabilities, repr=False, metadata=RUN_ONLY)

    def connect(self, note: Any = _no_note, run_id: str = "") -> Connector:
        """A connector instance for one attempt (the caller closes it). ConnectorHostError when its code
        cannot be loaded."""
        cls = registry.load_class(self.connector)
        return cls(
            ConnectorContext(self.instance, self.project_dir, self.connection, note=note, run_id=run_id)
        )


def capabilities_of(connector: str) -> Capabilities:
    """The manifest's capabilities; none when the manifest is unreadable (tier 3 reported it)."""
    try:
        return registry.manifest_of(connector).capabilities
    except ConnectorHostError:
        return Capabilities()


@dataclass(frozen=True)
class SourceLoadWork:
    """What a source load does: which dataset, into which staging table, by which tier."""

    endpoint: Endpoint
    request: DatasetRequest
    table: str  # the staging table it lands (unquoted)
    tier: Tier
    retry: RetryPolicy = field(metadata=RUN_ONLY)
    declares_retry: bool = field(default=False, metadata=RUN_ONLY)  # retry set below the engine level


@dataclass(frozen=True)
class SinkWriteWork:
    """What a sink write does: which output, from which staging table, by which tier."""

    endpoint: Endpoint
    request: OutputRequest  # run_id is filled in when the write runs
    source_table: str  # the pipeline's staging table it writes (unquoted)
    tier: Tier
    retry: RetryPolicy = field(metadata=RUN_ONLY)
    duplicates: Duplicates | None = None  # append: what to do with rows already in the target
    declares_retry: bool = field(default=False, metadata=RUN_ONLY)
    view_sql: str = ""  # strategy: view: the view's query in the target (compile/sink_views.py)
    view_display: str = field(default="", metadata=RUN_ONLY)  # the same with secrets masked

    @property
    def strategy(self) -> Strategy:
        return self.request.strategy


@dataclass(frozen=True)
class PipelineWork:
    """What a pipeline node runs: its query over its input tables."""

    sql: str  # the runnable query, refs resolved (line layout of the file)
    inputs: tuple[str, ...]  # the staging tables it reads
    retry: RetryPolicy = field(metadata=RUN_ONLY)  # the engine's: pipelines have no retry key of their own
    display_sql: str = field(default="", metadata=RUN_ONLY)  # the same with secrets masked
    external_access: bool = field(default=False, metadata=RUN_ONLY)  # engine.external_access: the guard off
    view: bool = False  # materialized: view: a view in staging, its query run by whatever reads it


@dataclass(frozen=True)
class CheckWork:
    """What a check node runs: its query over its target, severity and thresholds."""

    target: str  # the staging table it checks
    sql: str  # returns (failing BIGINT, detail VARCHAR)
    severity: CheckSeverity
    inputs: tuple[str, ...]
    check: CheckSpec = field(metadata=RUN_ONLY)  # name, type and options for the outcome message
    retry: RetryPolicy = field(metadata=RUN_ONLY)
    external_access: bool = field(default=False, metadata=RUN_ONLY)  # engine.external_access: the guard off
    thresholds: tuple[str, str] = ("!=0", "!=0")  # config warn_if, error_if: they decide the outcome


WorkItem = SourceLoadWork | SinkWriteWork | PipelineWork | CheckWork


def force_universal(project: Project, spec: InstanceSpec) -> bool:
    """The one force_universal rule: the engine setting, or the instance's own."""
    return bool(project.engine.force_universal or spec.force_universal)


def endpoint(project: Project, inst: ResolvedInstance) -> Endpoint:
    spec = inst.spec
    return Endpoint(
        spec.name,
        spec.connector,
        inst.connection,
        project.root,
        spec.file,
        spec.max_concurrency,
        force_universal(project, spec),
        connection_identity(spec.connector, inst.connection),
        capabilities_of(spec.connector),
    )


def dataset_request(
    project: Project, inst: ResolvedInstance, dataset: str, bounds: ReadBounds | None = None
) -> DatasetRequest:
    """The one place a DatasetRequest is built (runs, tier 4 static schemas, tier 5 live schemas); a run's
    request of an incremental dataset carries its read bounds."""
    spec = project.sources[inst.name].datasets[dataset]
    return DatasetRequest(
        dataset,
        inst.blocks.get(dataset, {}),
        spec.columns,
        force_universal(project, inst.spec),
        bounds or ReadBounds(),
        project.engine.staging_compression,
    )


def output_request(project: Project, inst: ResolvedInstance, output: str) -> OutputRequest:
    """The one place an OutputRequest is built; an output with no entry in its sink file is a replace."""
    out = project.sinks[inst.name].outputs.get(output)
    if out is None:
        return OutputRequest(output, inst.blocks.get(output, {}), DEFAULT_STRATEGY)
    return OutputRequest(
        output, inst.blocks.get(output, {}), out.strategy, out.keys, out.on_delete, out.allow_empty
    )


ENGINE_LEVEL = "engine.retry"  # the origin label of project.yml's engine.retry


def engine_retry(project: Project) -> RetryPolicy:
    """The policy of nodes with no retry key of their own (pipelines, checks)."""
    return effective_policy(((ENGINE_LEVEL, project.engine.retry),))


def _retry(project: Project, *levels: tuple[str, RetrySpec | None]) -> tuple[RetryPolicy, bool]:
    cascade = ((ENGINE_LEVEL, project.engine.retry), *levels)
    return effective_policy(cascade), declares_retry(cascade[1:])


def source_tier(caps: Capabilities, request: DatasetRequest) -> Tier:
    """The planned tier of a load. A native-only format under force_universal stays native: the connector
    refuses it with PZ0312 when the load starts, and `pz plan` notes it."""
    fmt = str(request.options.get("format", ""))
    if request.force_universal and fmt in caps.native_only_formats:
        return Tier.NATIVE
    return choose_tier(caps.source_tiers, request.force_universal)


def source_load_work(
    project: Project,
    inst: ResolvedInstance,
    dataset: str,
    table: str,
    bounds: ReadBounds | None = None,
    point: Endpoint | None = None,
) -> SourceLoadWork:
    """`point`: `endpoint(project, inst)` when the caller has it already."""
    point = point or endpoint(project, inst)
    request = dataset_request(project, inst, dataset, bounds)
    spec = project.sources[inst.name]
    retry, declared = _retry(
        project, (f"source '{spec.name}'", spec.retry), (f"dataset '{dataset}'", spec.datasets[dataset].retry)
    )
    return SourceLoadWork(point, request, table, source_tier(point.caps, request), retry, declared)


def sink_write_work(
    project: Project,
    inst: ResolvedInstance,
    output: str,
    source_table: str,
    view: tuple[str, str] = ("", ""),
    point: Endpoint | None = None,
) -> SinkWriteWork:
    """`point`: `endpoint(project, inst)` when the caller has it already."""
    point = point or endpoint(project, inst)
    spec = project.sinks[inst.name]
    out = spec.outputs.get(output)
    retry, declared = _retry(
        project, (f"sink '{spec.name}'", spec.retry), (f"output '{output}'", out.retry if out else None)
    )
    tier = choose_tier(point.caps.sink_tiers, point.force_universal)
    duplicates = out.duplicates if out else None
    return SinkWriteWork(
        point, output_request(project, inst, output), source_table, tier, retry, duplicates, declared, *view
    )
