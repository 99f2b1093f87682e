"""The project as loaded from its files: frozen dataclasses, values as written (templates unrendered)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelinez.config.positions import JsonPath, Positions
from pipelinez.core.diagnostics import Place
from pipelinez.core.json_types import JsonObject
from pipelinez.core.once import once
from pipelinez.core.vocabulary import (
    CheckSeverity,
    Duplicates,
    InstanceKind,
    Materialization,
    StagingCompression,
    Strategy,
    VarType,
)

VAR_TYPES = tuple(t.value for t in VarType)
STRATEGIES = tuple(s.value for s in Strategy)
# the process's DuckDB memory budget when project.yml sets none (build_engine uses core.memory_budget's
# default_limit: 320MB, or a quarter of the machine's memory where that is less); docs/resilience.md, Memory
DEFAULT_MEMORY_LIMIT = "320MB"
STAGING_COMPRESSIONS = tuple(c.value for c in StagingCompression)
DEFAULT_STAGING_COMPRESSION = StagingCompression.FAST
DATASET_ENGINE_KEYS = frozenset({"columns", "sync", "retry", "checks", "data_tests", "description"})
OUTPUT_ENGINE_KEYS = frozenset(
    {"strategy", "keys", "on_delete", "duplicates", "allow_empty", "retry", "description"}
)


@dataclass(frozen=True)
class RetrySpec:
    """A possibly partial retry policy; unset fields cascade from the next level out."""

    max_attempts: int | None = None
    base_delay: float | None = None
    max_delay: float | None = None


@dataclass(frozen=True)
class BreakerSpec:
    """The engine's circuit breaker: failures before it opens, and how long it stays open."""

    failure_threshold: int = 5
    cool_down: float = 30.0
    declared: frozenset[str] = field(default=frozenset(), compare=False)  # the keys the block sets


@dataclass(frozen=True)
class EngineSpec:
    """project.yml `engine:`: threads, fail-fast, retries, the breaker and staging settings."""

    threads: int | None = None
    fail_fast: bool = False
    force_universal: bool = False
    retry: RetrySpec = field(default_factory=RetrySpec)
    breaker: BreakerSpec | None = None
    memory_limit: str = DEFAULT_MEMORY_LIMIT
    staging_compression: StagingCompression = DEFAULT_STAGING_COMPRESSION
    # pipelines and checks may read files, URLs and other databases themselves (read_csv, ATTACH, ...)
    external_access: bool = False
    # the ray executor's object-store staging (--staging s3://...): endpoint, region, credentials; raw values
    # (templates unrendered), the keys of the s3 connector's connection block except `bucket`
    staging: JsonObject = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class VarSpec:
    """A declared var: its type, default and place."""

    name: str
    type: VarType
    default: Any
    place: Place


@dataclass(frozen=True)
class EnvSpec:
    """A declared environment variable: required or not, secret or not, its default and place."""

    name: str
    required: bool
    secret: bool
    default: str | None
    place: Place


@dataclass(frozen=True)
class CheckSpec:
    """One data check as declared (of a dataset or a pipeline): type, options, severity, thresholds."""

    type: str
    options: JsonObject
    severity: CheckSeverity
    name: str
    place: Place
    # where `options` is in its file (each templated value's own place); () unknown
    options_path: JsonPath = field(default=(), compare=False)
    where: str | None = None  # config.where: only rows matching this SQL predicate are checked
    warn_if: str = "!=0"  # config.warn_if / error_if: comparisons of the failure count (dbt's)
    error_if: str = "!=0"
    nulls_pass: bool = False  # expression: NULL is no failure (dbt spellings: dbt_utils.expression_is_true)
    column: str | None = None  # the column a dbt-style column test is listed under


@dataclass(frozen=True)
class DatasetSpec:
    """A source's dataset as declared: connector options, columns contract, checks, docs."""

    name: str
    options: JsonObject  # connector-owned keys (table, path, format, ...), raw
    columns: dict[str, str] | None  # the contract: name -> DuckDB type
    sync: JsonObject | None
    retry: RetrySpec
    checks: tuple[CheckSpec, ...]
    place: Place
    description: str | None = None  # docs only (pz docs)
    column_docs: dict[str, str] = field(default_factory=dict)  # column -> its description (docs only)


@dataclass(frozen=True)
class OutputSpec:
    """A sink's output as declared: connector options, strategy, keys and what a write may do."""

    name: str
    options: JsonObject  # connector-owned keys (table, path, format, ...), raw
    strategy: Strategy
    keys: tuple[str, ...]
    on_delete: str | None  # column whose true value deletes the key (merge)
    duplicates: Duplicates | None
    allow_empty: bool
    retry: RetrySpec
    place: Place
    declared: bool = True  # False when created by a sink() call with no entry in the sink file
    description: str | None = None  # docs only (pz docs)


@dataclass(frozen=True)
class InstanceSpec:
    """A source or sink instance: one YAML file under sources/ or sinks/."""

    kind: InstanceKind
    name: str
    file: str  # project-relative path
    connector: str
    connection: JsonObject
    max_concurrency: int | None
    retry: RetrySpec
    force_universal: bool | None
    place: Place


@dataclass(frozen=True)
class SourceSpec(InstanceSpec):
    """sources/<name>.yml: a connector instance and its datasets."""

    datasets: dict[str, DatasetSpec] = field(default_factory=dict)


@dataclass(frozen=True)
class SinkSpec(InstanceSpec):
    """sinks/<name>.yml: a connector instance and its outputs."""

    outputs: dict[str, OutputSpec] = field(default_factory=dict)


@dataclass(frozen=True)
class FolderConfig:
    """A block of project.yml `pipelines:`: defaults of the pipelines under one folder of pipelines/."""

    folder: str  # relative to pipelines/ ("marts/finance"; "." for all)
    materialized: str | None
    tags: tuple[str, ...]
    sink: str | None
    place: Place  # the folder's key in project.yml
    sink_place: Place | None = None


@dataclass(frozen=True)
class PipelineDefaults:
    """What the folder config gives one pipeline (deeper folders win for scalars; tags are the union)."""

    materialized: str | None = None
    tags: tuple[str, ...] = ()
    sink: str | None = None
    sink_place: Place | None = None


@dataclass(frozen=True)
class SidecarSpec:
    """A pipeline's sidecar (<name>.yml beside its .sql): docs, materialization, tags, checks."""

    file: str
    description: str | None
    materialized: Materialization | None  # None: not set in the sidecar (the folder config's, else table)
    tags: tuple[str, ...]
    checks: tuple[CheckSpec, ...]
    column_docs: dict[str, str] = field(default_factory=dict)  # column -> its description (docs only)


@dataclass(frozen=True)
class PipelineSource:
    """A pipeline as loaded: its .sql text, its sidecar and its folder's defaults."""

    name: str
    file: str  # project-relative path of the .sql file
    text: str
    sidecar: SidecarSpec | None
    defaults: PipelineDefaults = field(default_factory=PipelineDefaults)  # from project.yml `pipelines:`

    # computed once per instance (frozen: its fields never change; asked ~15 times per pipeline a compile)
    @once
    def materialized(self) -> Materialization:
        own = self.sidecar.materialized if self.sidecar else None
        return Materialization(own or self.defaults.materialized or Materialization.TABLE)

    @once
    def tags(self) -> tuple[str, ...]:
        own = self.sidecar.tags if self.sidecar else ()
        return tuple(dict.fromkeys((*self.defaults.tags, *own)))


@dataclass(frozen=True)
class SingularTest:
    """tests/**/*.sql: a query (ref/source/var/env) that must return no rows; node chk_test__<name>."""

    name: str  # the file stem
    file: str  # project-relative path
    text: str


@dataclass(frozen=True)
class Project:
    """A loaded project: settings, sources, sinks, pipelines and where each key of its files is."""

    root: Path
    name: str
    vars: dict[str, VarSpec]
    env: dict[str, EnvSpec]
    connector_pins: dict[str, str]
    engine: EngineSpec
    keep_last: int
    sources: dict[str, SourceSpec]
    sinks: dict[str, SinkSpec]
    pipelines: dict[str, PipelineSource]
    # where every key and value is, per project-relative file (project.yml, sources/, sinks/, sidecars)
    positions: dict[str, Positions] = field(default_factory=dict, repr=False, compare=False)
    # with a partial load: "source:<name>" / "sink:<name>" whose files failed tier 1 (left out above)
    broken: frozenset[str] = frozenset()
    # docs/**/*.md by project-relative path -> text: the `{% docs name %}` blocks descriptions' doc() name
    doc_files: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    singular_tests: dict[str, SingularTest] = field(default_factory=dict)  # by file stem
    # macros/**/*.sql by project-relative path -> text: the shared `{% macro %}` definitions
    macro_files: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    # project.yml `pipelines:` by folder (relative to pipelines/)
    folders: dict[str, FolderConfig] = field(default_factory=dict, repr=False, compare=False)
    # project.yml `state:` as written ({}: the local .pz/ folder); rendered by compile.state_block
    state: JsonObject = field(default_factory=dict)

    @property
    def state_dir(self) -> Path:
        return self.root / ".pz"

    def locate(self, file: str, path: JsonPath = (), *, at: str = "key") -> Place:
        """Place of the key (`at="value"`: the value) at `path` in `file` (the nearest existing ancestor's
        key when missing); Place(file) if unknown."""
        positions = self.positions.get(file)
        return positions.place(path, at=at) if positions is not None else Place(file)
