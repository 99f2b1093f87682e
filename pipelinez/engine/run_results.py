"""run_results.json: versioned, written when the run starts and rewritten (atomically) as nodes finish."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pipelinez import __version__
from pipelinez.compile.values import Redactor

SCHEMA_VERSION = "https://pipelinez.dev/schemas/run_results/v1.json"
NODE_STATUSES = ("success", "failed", "skipped", "warn", "cancelled", "carried_forward", "pending", "running")
RUN_STATUSES = ("running", "success", "failed", "error")


@dataclass
class NodeResult:
    id: str
    name: str
    kind: str
    status: str = "pending"
    rows: int = 0
    duration_ms: int = 0
    attempts: int = 0
    tier: str | None = None
    error: dict[str, Any] | None = None
    provenance: str | None = None
    reused_from: str | None = None
    watermark: dict[str, Any] | None = None
    partitions: list[dict[str, Any]] | None = None
    batches_committed: int | None = None
    skipped_because: str | None = None
    message: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.provenance is None:
            data.pop("provenance")
            data.pop("reused_from")
        return data


@dataclass
class RunResults:
    run_id: str
    command: str
    started_at: str
    selection: list[str]
    args: dict[str, Any]
    pid: int = field(default_factory=os.getpid)
    status: str = "running"
    finished_at: str | None = None
    retry_of: str | None = None
    nodes: list[NodeResult] = field(default_factory=list)
    error: dict[str, Any] | None = None

    def node(self, name: str) -> NodeResult:
        return next(n for n in self.nodes if n.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "$schema": SCHEMA_VERSION,
            "schema_version": 1,
            "run_id": self.run_id,
            "pz_version": __version__,
            "command": self.command,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "status": self.status,
            "retry_of": self.retry_of,
            "selection": self.selection,
            "args": self.args,
            "pid": self.pid,
            "error": self.error,
            "nodes": [n.to_dict() for n in self.nodes],
        }


class ResultsWriter:
    """Rewrites run_results.json atomically (temp file + rename) so a reader never sees half a file."""

    def __init__(self, path: Path, results: RunResults, redactor: Redactor):
        self.path = path
        self.results = results
        self._redact = redactor
        self._lock = threading.Lock()

    def write(self) -> None:
        with self._lock:
            data = self._redact.deep(self.results.to_dict())
            tmp = self.path.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
            os.replace(tmp, self.path)


def read_results(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
