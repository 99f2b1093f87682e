"""The run model's words: node kinds, statuses, tiers, strategies, and the error a node ends with.

Every value is a `StrEnum`, so it compares equal to (and serializes as) the string the artifacts and events
have always carried: `NodeStatus.SUCCESS == "success"`, and `json.dumps` writes `"success"`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pipelinez.core.json_types import JsonObject


class NodeKind(StrEnum):
    SOURCE_LOAD = "source_load"
    PIPELINE = "pipeline"
    CHECK = "check"
    SINK_WRITE = "sink_write"


class NodeStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCESS = "success"
    WARN = "warn"  # a check of severity warn found rows
    FAILED = "failed"
    SKIPPED = "skipped"  # an upstream node failed
    CANCELLED = "cancelled"  # fail-fast, Ctrl-C, or the run stopped at the orchestrator level
    CARRIED_FORWARD = "carried_forward"  # a retry kept the committed write of the run it retries

    @property
    def ok(self) -> bool:
        """Whether what depends on a node that ended so may run."""
        return self in OK_STATUSES

    @property
    def finished(self) -> bool:
        return self not in (NodeStatus.PENDING, NodeStatus.RUNNING)


OK_STATUSES = frozenset({NodeStatus.SUCCESS, NodeStatus.WARN, NodeStatus.CARRIED_FORWARD})


class RunStatus(StrEnum):
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"  # some node failed (or the run was interrupted)
    ERROR = "error"  # the run stopped at the orchestrator level (PZ0512)
    INTERRUPTED = "interrupted"  # read back only: recorded as running, and its process is gone
    CORRUPT = "corrupt"  # read back only: its run_results.json cannot be read (PZ0523)


class Tier(StrEnum):
    NATIVE = "native"  # DuckDB reads/writes the external system itself
    UNIVERSAL = "universal"  # Arrow record batches through the connector


class Strategy(StrEnum):
    REPLACE = "replace"
    MERGE = "merge"
    APPEND = "append"
    VIEW = "view"  # a view in a database sink, of the pipeline's SQL over that sink's tables


DEFAULT_STRATEGY = Strategy.REPLACE  # an output with no entry in its sink file


class Duplicates(StrEnum):
    """An append output's `duplicates:` rule (PZ0214)."""

    ACCEPT = "accept"  # re-sent rows are appended again


class Materialization(StrEnum):
    """A pipeline's `materialized:` (sidecar or project.yml folder config)."""

    TABLE = "table"  # a staging table of its own (the default)
    VIEW = "view"  # a view in staging: its checks and readers run its query
    EPHEMERAL = "ephemeral"  # inlined into the pipelines that ref() it


class StagingCompression(StrEnum):
    """`engine.staging_compression`: how staging tables are compressed."""

    FAST = "fast"
    ZSTD = "zstd"
    AUTO = "auto"
    UNCOMPRESSED = "uncompressed"


class VarType(StrEnum):
    """A project variable's declared `type:`."""

    STRING = "string"
    INT = "int"
    BIGINT = "bigint"
    DECIMAL = "decimal"
    BOOL = "bool"
    DATE = "date"
    TIMESTAMP = "timestamp"


class RunCommand(StrEnum):
    """The command a run was started by (run_results.json `command`, the `run_started` event)."""

    RUN = "run"
    RETRY = "retry"
    TEST = "test"  # `pz test` and `pz show`: a throwaway run, never recorded in .pz/runs
    SHOW = "show"


class ExecutorKind(StrEnum):
    """Where a run's nodes execute (`--executor`, PZ_EXECUTOR; run_results.json `args.executor`)."""

    LOCAL = "local"  # threads of this process, staging in .pz/runs/<run-id>/staging.duckdb
    RAY = "ray"  # Ray tasks, staging on a shared folder or object store


class InstanceKind(StrEnum):
    """What a YAML file under sources/ or sinks/ declares."""

    SOURCE = "source"
    SINK = "sink"


class BreakerState(StrEnum):
    """A source or sink instance's circuit breaker (`engine.resilience.breaker`; `breaker_state_changed`)."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class Provenance(StrEnum):
    REUSED = "reused"  # a retry copied the source load from the failed run's staging
    CARRIED_FORWARD = "carried_forward"  # a retry kept a committed sink write


class CheckSeverity(StrEnum):
    """A check's `severity:`: an error check blocks what reads its table; a warn check only reports.
    Not a diagnostic's severity (`core.diagnostics.DiagnosticSeverity`: `error` | `warning`)."""

    ERROR = "error"
    WARN = "warn"


@dataclass(frozen=True)
class NodeError:
    """How a node failed, as recorded in run_results.json and in `node_completed`/`node_retry` events."""

    code: str
    message: str
    transient: bool = False

    def to_dict(self) -> JsonObject:
        return {"code": self.code, "message": self.message, "transient": self.transient}

    @staticmethod
    def from_dict(data: JsonObject) -> NodeError:
        return NodeError(str(data.get("code", "")), str(data.get("message", "")), bool(data.get("transient")))
