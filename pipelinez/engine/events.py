"""Run events as data. Every event serializes to one JSON object with `event`, `ts`, `run_id`.

The bus redacts every string of every event before any subscriber sees it, so no secret reaches
events.jsonl, --log-format json, or the text output.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import ClassVar

from pipelinez.core.json_types import JsonObject
from pipelinez.core.printable import printable
from pipelinez.core.redact import Redactor
from pipelinez.core.vocabulary import (
    BreakerState,
    NodeError,
    NodeKind,
    NodeStatus,
    Provenance,
    RunCommand,
    RunStatus,
)


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Event:
    EVENT: ClassVar[str] = "event"
    run_id: str

    def to_dict(self) -> JsonObject:
        data = {"event": self.EVENT, "ts": utc_now()}
        data.update({k: v for k, v in asdict(self).items() if v is not None or k in self._keep_none})
        return data

    _keep_none: ClassVar[frozenset[str]] = frozenset()


@dataclass(frozen=True)
class RunStarted(Event):
    EVENT: ClassVar[str] = "run_started"
    command: RunCommand = RunCommand.RUN
    selection: list[str] = field(default_factory=list)
    nodes: int = 0
    retry_of: str | None = None


@dataclass(frozen=True)
class NodeStarted(Event):
    EVENT: ClassVar[str] = "node_started"
    name: str = ""
    id: str = ""
    kind: NodeKind | None = None
    attempt: int = 1


@dataclass(frozen=True)
class NodeCompleted(Event):
    EVENT: ClassVar[str] = "node_completed"
    name: str = ""
    id: str = ""
    kind: NodeKind | None = None
    status: NodeStatus = NodeStatus.PENDING
    rows: int = 0
    duration_ms: int = 0
    provenance: Provenance | None = None
    error: NodeError | None = None
    reason: str | None = None  # skipped: which upstream failed; warn: the check message


@dataclass(frozen=True)
class NodeRetry(Event):
    EVENT: ClassVar[str] = "node_retry"
    name: str = ""
    attempt: int = 0
    delay_ms: int = 0
    error: NodeError | None = None


@dataclass(frozen=True)
class BreakerStateChanged(Event):
    EVENT: ClassVar[str] = "breaker_state_changed"
    instance: str = ""  # source:<name> | sink:<name>
    from_state: BreakerState = BreakerState.CLOSED
    to_state: BreakerState = BreakerState.CLOSED
    reason: str = ""
    retry_in_ms: int | None = None  # to open: when the next probe may go

    def to_dict(self) -> JsonObject:
        data = super().to_dict()
        data["from"] = data.pop("from_state")
        data["to"] = data.pop("to_state")
        return data


@dataclass(frozen=True)
class WarningEvent(Event):
    EVENT: ClassVar[str] = "warning"
    code: str = ""
    message: str = ""
    place: str = ""
    next_step: str = ""


@dataclass(frozen=True)
class Note(Event):
    EVENT: ClassVar[str] = "note"
    message: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", printable(self.message))


@dataclass(frozen=True)
class RunCompleted(Event):
    EVENT: ClassVar[str] = "run_completed"
    status: RunStatus = RunStatus.RUNNING
    duration_ms: int = 0
    counts: dict[str, int] = field(default_factory=dict)


Subscriber = Callable[[Event, JsonObject], None]


class EventBus:
    """Fan-out of events to subscribers; thread-safe; redacts before publishing."""

    def __init__(self, redactor: Redactor | None = None):
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()
        self._redact = redactor or Redactor()

    def subscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.append(subscriber)

    def publish(self, event: Event) -> None:
        data = self._redact.deep(event.to_dict())
        with self._lock:
            for subscriber in self._subscribers:
                subscriber(event, data)


class JsonlWriter:
    """Appends each event as one JSON line to a file (events.jsonl)."""

    def __init__(self, path: Path):
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()

    def __call__(self, _event: Event, data: JsonObject) -> None:
        self._file.write(json.dumps(data, default=str) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()
