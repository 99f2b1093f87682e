"""run_results.json: versioned, written when the run starts and rewritten (atomically) as nodes finish, and
read back through the same typed classes (`RunResults.from_dict`), whatever schema version wrote it.

Reading an older version goes through `_UPGRADES`: one function per version step, each taking the dict of
version N to the dict of version N + 1, like dbt's `upgrade_schema_version`. A file newer than this pz, or
one that is not a run_results.json at all, raises `UnreadableResults`.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelinez import __version__
from pipelinez.connectors.sdk_delivery import DeliveryCheckpoint
from pipelinez.core import failpoints
from pipelinez.core.json_types import JsonObject
from pipelinez.core.redact import Redactor
from pipelinez.core.vocabulary import (
    ExecutorKind,
    NodeError,
    NodeKind,
    NodeStatus,
    Provenance,
    RunCommand,
    RunStatus,
    Tier,
)

SCHEMA_VERSION = 1
RESULTS_FILE = "run_results.json"
SCHEMA_URL = f"https://pipelinez.dev/schemas/run_results/v{SCHEMA_VERSION}.json"


class UnreadableResults(ValueError):
    """The file is not a run_results.json this pz can read (corrupt, foreign, or from a newer pz)."""


# version N -> function taking a version-N dict to a version-N+1 dict. Empty while v1 is the only version.
_UPGRADES: dict[int, Callable[[JsonObject], JsonObject]] = {}


def upgrade(data: JsonObject) -> JsonObject:
    """The dict of any version this pz has written, brought to SCHEMA_VERSION step by step."""
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise UnreadableResults(f"no readable schema_version ({version!r})")
    if version > SCHEMA_VERSION:
        raise UnreadableResults(
            f"schema_version {version} was written by a newer pz (this pz reads up to {SCHEMA_VERSION})"
        )
    while version < SCHEMA_VERSION:
        data = _UPGRADES[version](data)
        version += 1
        data["schema_version"] = version
    return data


@dataclass(frozen=True)
class RunArgs:
    """The command-line arguments a run was started with (what `pz retry` reuses)."""

    select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    vars: dict[str, str] = field(default_factory=dict)
    threads: int | None = None
    fail_fast: bool | None = None
    full_refresh: bool = False
    executor: ExecutorKind = ExecutorKind.LOCAL
    # where the run published its staged tables (a retry of the run reads them): the ray executor's staging,
    # or the local executor's shared staging (--staging / PZ_STAGING_URL)
    staging: str | None = None

    def to_dict(self) -> JsonObject:
        data: JsonObject = {
            "select": list(self.select),
            "exclude": list(self.exclude),
            "vars": dict(self.vars),
            "threads": self.threads,
            "fail_fast": self.fail_fast,
            "full_refresh": self.full_refresh,
        }
        # recorded when not the default, as older files have no such keys
        if self.executor != ExecutorKind.LOCAL or self.staging is not None:
            data["executor"] = self.executor
            data["staging"] = self.staging
        return data

    @staticmethod
    def from_dict(data: JsonObject) -> RunArgs:
        threads, fail_fast = data.get("threads"), data.get("fail_fast")
        return RunArgs(
            tuple(str(s) for s in data.get("select") or ()),
            tuple(str(s) for s in data.get("exclude") or ()),
            {str(k): str(v) for k, v in (data.get("vars") or {}).items()},
            int(threads) if threads is not None else None,
            bool(fail_fast) if fail_fast is not None else None,
            bool(data.get("full_refresh", False)),
            ExecutorKind(data.get("executor") or ExecutorKind.LOCAL),
            str(data["staging"]) if data.get("staging") else None,
        )


@dataclass(frozen=True)
class WatermarkRecord:
    """What a run did with an incremental load's watermark: the bounds the read used, the new watermark it
    captured from the staged rows, and whether the end of the run committed it (and if not, why)."""

    cursor: str
    low: str | None  # the lower bound the read used
    high: str | None  # the new watermark; None: unchanged (nothing new staged)
    previous: str | None  # the committed watermark the bounds came from
    committed: bool
    upper: str | None = None  # the window's upper bound, if any
    reason: str | None = None  # why it was not committed, or what was
    null_rows: int = 0  # staged rows whose cursor is NULL
    trimmed: int = 0  # rows the connector delivered outside the bounds, deleted by the backstop

    def to_dict(self) -> JsonObject:
        data: JsonObject = {"cursor": self.cursor, "low": self.low, "high": self.high}
        if self.upper is not None:
            data["upper"] = self.upper
        data["previous"] = self.previous
        data["committed"] = self.committed
        if self.reason:
            data["reason"] = self.reason
        data["null_rows"] = self.null_rows
        data["trimmed"] = self.trimmed
        return data

    @staticmethod
    def from_dict(data: Any) -> WatermarkRecord | None:
        if not isinstance(data, dict):
            return None
        return WatermarkRecord(
            cursor=str(data["cursor"]),
            low=_text(data.get("low")),
            high=_text(data.get("high")),
            previous=_text(data.get("previous")),
            committed=bool(data.get("committed")),
            upper=_text(data.get("upper")),
            reason=_text(data.get("reason")),
            null_rows=int(data.get("null_rows") or 0),
            trimmed=int(data.get("trimmed") or 0),
        )


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class PartitionResult:
    index: int
    rows: int
    status: NodeStatus = NodeStatus.SUCCESS
    fingerprint: str | None = None  # of the partition's definition: a retry reuses it only for the same slice
    provenance: Provenance | None = None  # reused: a retry copied it from the failed run's staging

    def to_dict(self) -> JsonObject:
        data: JsonObject = {"index": self.index, "rows": self.rows, "status": str(self.status)}
        if self.fingerprint is not None:
            data["fingerprint"] = self.fingerprint
        if self.provenance is not None:
            data["provenance"] = str(self.provenance)
        return data

    @staticmethod
    def from_dict(data: JsonObject) -> PartitionResult:
        provenance = data.get("provenance")
        return PartitionResult(
            int(data["index"]),
            int(data["rows"]),
            NodeStatus(data["status"]),
            data.get("fingerprint"),
            Provenance(provenance) if provenance is not None else None,
        )


@dataclass
class NodeResult:
    id: str
    name: str
    kind: NodeKind
    status: NodeStatus = NodeStatus.PENDING
    rows: int = 0
    duration_ms: int = 0
    attempts: int = 0
    tier: Tier | None = None
    error: NodeError | None = None
    provenance: Provenance | None = None
    reused_from: str | None = None
    watermark: WatermarkRecord | None = None
    partitions: list[PartitionResult] | None = None
    batches_committed: int | None = None
    skipped_because: str | None = None
    message: str | None = None
    checkpoint: DeliveryCheckpoint | None = None  # checkpointed delivery: every acknowledged batch
    id_parts: dict[str, str] | None = (
        None  # a digest per part of what the id hashes (what changed, for retry)
    )
    description: str | None = None  # the node's `description:` (dataset, pipeline, output, column)

    def to_dict(self) -> JsonObject:
        data: JsonObject = {
            "id": self.id,
            "name": self.name,
            "kind": str(self.kind),
            "status": str(self.status),
            "rows": self.rows,
            "duration_ms": self.duration_ms,
            "attempts": self.attempts,
            "tier": None if self.tier is None else str(self.tier),
            "error": None if self.error is None else self.error.to_dict(),
        }
        if self.provenance is not None:
            data["provenance"] = str(self.provenance)
            data["reused_from"] = self.reused_from
        data["watermark"] = None if self.watermark is None else self.watermark.to_dict()
        data["partitions"] = None if self.partitions is None else [p.to_dict() for p in self.partitions]
        data["batches_committed"] = self.batches_committed
        if self.checkpoint is not None:
            data["checkpoint"] = self.checkpoint.to_dict()
        data["skipped_because"] = self.skipped_because
        data["message"] = self.message
        if self.id_parts is not None:
            data["id_parts"] = self.id_parts
        if self.description is not None:
            data["description"] = self.description
        return data

    @staticmethod
    def from_dict(data: JsonObject) -> NodeResult:
        error, tier, provenance = data.get("error"), data.get("tier"), data.get("provenance")
        partitions = data.get("partitions")
        return NodeResult(
            id=str(data["id"]),
            name=str(data["name"]),
            kind=NodeKind(data["kind"]),
            status=NodeStatus(data["status"]),
            rows=int(data.get("rows") or 0),
            duration_ms=int(data.get("duration_ms") or 0),
            attempts=int(data.get("attempts") or 0),
            tier=Tier(tier) if tier is not None else None,
            error=NodeError.from_dict(error) if isinstance(error, dict) else None,
            provenance=Provenance(provenance) if provenance is not None else None,
            reused_from=data.get("reused_from"),
            watermark=WatermarkRecord.from_dict(data.get("watermark")),
            partitions=[PartitionResult.from_dict(p) for p in partitions] if partitions is not None else None,
            batches_committed=data.get("batches_committed"),
            skipped_because=data.get("skipped_because"),
            message=data.get("message"),
            checkpoint=DeliveryCheckpoint.from_dict(data.get("checkpoint")),
            id_parts=dict(data["id_parts"]) if isinstance(data.get("id_parts"), dict) else None,
            description=data.get("description"),
        )


@dataclass
class RunResults:
    run_id: str
    command: RunCommand
    started_at: str
    selection: list[str]
    args: RunArgs
    pid: int = field(default_factory=os.getpid)
    status: RunStatus = RunStatus.RUNNING
    finished_at: str | None = None
    retry_of: str | None = None
    nodes: list[NodeResult] = field(default_factory=list)
    error: NodeError | None = None
    pz_version: str = __version__

    def node(self, name: str) -> NodeResult:
        return next(n for n in self.nodes if n.name == name)

    def to_dict(self) -> JsonObject:
        return {
            "$schema": SCHEMA_URL,
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "pz_version": self.pz_version,
            "command": self.command,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "status": str(self.status),
            "retry_of": self.retry_of,
            "selection": self.selection,
            "args": self.args.to_dict(),
            "pid": self.pid,
            "error": None if self.error is None else self.error.to_dict(),
            "nodes": [n.to_dict() for n in self.nodes],
        }

    @staticmethod
    def from_dict(data: Any) -> RunResults:
        """Any version this pz has written, upgraded; UnreadableResults when it is not one."""
        if not isinstance(data, dict):
            raise UnreadableResults("the top level is not an object")
        data = upgrade(dict(data))
        try:
            error = data.get("error")
            return RunResults(
                run_id=str(data["run_id"]),
                command=RunCommand(data["command"]),
                started_at=str(data["started_at"]),
                selection=[str(s) for s in data.get("selection") or ()],
                args=RunArgs.from_dict(data.get("args") or {}),
                pid=int(data.get("pid") or 0),
                status=RunStatus(data["status"]),
                finished_at=data.get("finished_at"),
                retry_of=data.get("retry_of"),
                nodes=[NodeResult.from_dict(n) for n in data.get("nodes") or ()],
                error=NodeError.from_dict(error) if isinstance(error, dict) else None,
                pz_version=str(data.get("pz_version", "")),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise UnreadableResults(f"{type(exc).__name__}: {exc}") from exc

    @property
    def counts(self) -> dict[str, int]:
        """How many nodes ended in each status."""
        counts: dict[str, int] = {}
        for n in self.nodes:
            counts[n.status] = counts.get(n.status, 0) + 1
        return counts


class ResultsWriter:
    """Rewrites run_results.json atomically (temp file + rename) so a reader never sees half a file, and
    durably: the temp file is fsynced before the rename, so whatever a power loss leaves under the name is a
    whole record (this write or an earlier one); the folders are fsynced after the first write (the run and
    its record exist) and after the final one (`final`: the run's status survives a power loss once pz has
    exited)."""

    def __init__(
        self,
        path: Path,
        results: RunResults,
        redactor: Redactor,
        after: Callable[[], None] | None = None,
    ):
        """`after`: called after each write (a shared state backend's copy)."""
        self.path = path
        self._after = after
        self.results = results
        self._redact = redactor
        self._lock = threading.Lock()
        self._writes = 0

    def write(self, final: bool = False) -> None:
        with self._lock:
            self._writes += 1
            data = self._redact.deep(self.results.to_dict())
            tmp = self.path.with_suffix(".json.tmp")
            with tmp.open("w", encoding="utf-8") as handle:
                handle.write(json.dumps(data, indent=2, default=str) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            failpoints.hit("results.before_rename", str(self._writes))
            os.replace(tmp, self.path)
            if self._writes == 1:  # the run's folder and its record exist after a power loss
                fsync_folder(self.path.parent.parent)
                fsync_folder(self.path.parent)
            elif final:
                fsync_folder(self.path.parent)
            if self._after is not None:
                self._after()


def fsync_folder(folder: Path) -> None:
    """Make the names in `folder` durable (a rename into it, a new file); a no-op where folders cannot be
    opened (Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_results(path: Path) -> RunResults | None:
    """The run's results, or None when the file is missing or unreadable."""
    try:
        return RunResults.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None
