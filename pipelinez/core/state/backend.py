"""The state backend seam: what pz remembers between runs, wherever it lives.

A backend keeps the committed watermarks (read all, commit a set atomically), the run history (each run's
`run_results.json` and `events.jsonl`, replaced atomically), the project lock as a lease (acquired with the
holder's identity, renewed while the run lives, released at its end; an expired lease is taken over) and
small named blobs (the `--connect` schema cache). `LocalBackend` is the project's `.pz/` folder; another
backend is one subclass registered under entry-point group `pipelinez.state_backends` (see `registry`).

Every failure a backend raises is a `StateBackendError`: a coded diagnostic naming the backend and a next
step, never a driver's exception (and never a secret of its connection).
"""

from __future__ import annotations

import os
import secrets
import socket
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pipelinez.core.diagnostics import PzError, error
from pipelinez.core.run_state import Watermark

RESULTS = "run_results.json"
EVENTS = "events.jsonl"
RUN_FILES = (RESULTS, EVENTS)
DEFAULT_LEASE_SECONDS = 60.0


class StateBackendError(PzError):
    """The state backend failed (PZ0580 unreachable, PZ0581 a read or write refused)."""


def backend_error(code: str, backend: str, message: str, next_step: str = "") -> StateBackendError:
    return StateBackendError(
        [error(code, f"state backend {backend}: {message}", file="project.yml", next_step=next_step)]
    )


def fenced_commit_error(backend: str, why: str, lost: str) -> StateBackendError:
    """The watermark commit of a run whose lease `why` ("expired", "was taken over") refused, PZ0581;
    `lost`: what the holder may have lost contact with ("the database", "the store")."""
    return backend_error(
        "PZ0581",
        backend,
        f"the project lock's lease of this run {why} before its watermarks were committed: nothing was "
        "committed",
        "the next run reads the same rows again; raise state.lease_seconds if runs pause or lose "
        f"{lost} longer than it",
    )


@dataclass(frozen=True)
class Holder:
    """Who holds (or asks for) the project lock: a host, a process and the run it serves."""

    host: str
    pid: int
    run_id: str = ""
    token: str = ""  # unique per acquisition: a reused pid never renews another process's lease

    @staticmethod
    def this_process(run_id: str = "") -> Holder:
        return Holder(socket.gethostname(), os.getpid(), run_id, secrets.token_hex(8))

    def describe(self) -> str:
        run = f", run {self.run_id}" if self.run_id else ""
        return f"pid {self.pid} on {self.host}{run}"


@dataclass(frozen=True)
class LeaseInfo:
    """Who holds the state's lease, until when, and whether it has expired."""

    holder: Holder
    lease_until: str  # ISO-8601 UTC
    expired: bool


class StateBackend(ABC):
    """One place where a project's state lives. `settings` is the rendered `state:` block (secrets
    included: a backend never prints them); `project` names the project, so several share one store."""

    name: str = ""
    remote: bool = True  # False only for the local `.pz/` folder

    def __init__(self, project: str, settings: Mapping[str, Any]):
        self.project = project
        self.settings = settings
        self.lease_seconds = float(settings.get("lease_seconds") or DEFAULT_LEASE_SECONDS)

    @abstractmethod
    def describe(self) -> str:
        """Where the state lives, safe to print (no secret)."""

    # -- watermarks --------------------------------------------------------------------------------
    @abstractmethod
    def watermarks(self) -> dict[tuple[str, str], Watermark]:
        """Every committed watermark by (source, dataset)."""

    @abstractmethod
    def commit_watermarks(self, marks: Iterable[Watermark]) -> None:
        """Record `marks` (each replacing its dataset's previous one) atomically: all or none."""

    # -- runs --------------------------------------------------------------------------------------
    @abstractmethod
    def put_run_file(self, run_id: str, name: str, text: str) -> None:
        """Replace run `run_id`'s file `name` (run_results.json, events.jsonl) atomically."""

    @abstractmethod
    def get_run_file(self, run_id: str, name: str) -> str | None:
        """The text of run `run_id`'s file `name`, or None."""

    @abstractmethod
    def run_ids(self) -> list[str]:
        """Every run id with a run_results.json, oldest first."""

    @abstractmethod
    def delete_run(self, run_id: str) -> None: ...

    # -- the project lock ----------------------------------------------------------------------------
    @abstractmethod
    def acquire(self, holder: Holder) -> LeaseInfo | None:
        """Take the lease for `lease_seconds` in one atomic step: None when taken, else the live holder's
        lease (the caller refuses with PZ0511). An expired lease is taken over."""

    @abstractmethod
    def renew(self, holder: Holder) -> bool:
        """Extend the lease `holder` holds; False when it lost it (expired and taken over)."""

    @abstractmethod
    def release(self, holder: Holder) -> None: ...

    @abstractmethod
    def lease(self) -> LeaseInfo | None:
        """The lease as it stands (expired or not), or None when nobody holds it."""

    # -- blobs ---------------------------------------------------------------------------------------
    @abstractmethod
    def put_blob(self, name: str, data: bytes) -> None: ...

    @abstractmethod
    def get_blob(self, name: str) -> bytes | None: ...

    # -- checks ----------------------------------------------------------------------------------------
    @abstractmethod
    def check_writable(self) -> None:
        """Raise StateBackendError unless the backend is reachable and accepts writes (tier 5)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""
