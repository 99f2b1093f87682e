"""The project lock on a shared state backend: a lease taken when the run starts, renewed by a heartbeat
thread while the run lives (every third of the lease), released at its end. A holder that dies stops
renewing: its lease expires and the next run takes it over (its run is then recognised as interrupted,
PZ0503 for `pz retry`); while it lives every other process is refused with PZ0511, on any machine."""

from __future__ import annotations

import threading

from pipelinez.core import failpoints
from pipelinez.core.diagnostics import Diagnostic, error
from pipelinez.core.state.backend import Holder, LeaseInfo, StateBackend, StateBackendError
from pipelinez.engine.run.failures import DEBUG_LOG


class Lease:
    def __init__(self, backend: StateBackend):
        self.backend = backend
        self.holder = Holder.this_process()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost = False  # a renewal found the lease taken over: this run must not commit state

    def acquire(self) -> LeaseInfo | None:
        """None when taken (the heartbeat runs); else the live holder's lease."""
        other = self.backend.acquire(self.holder)
        if other is not None:
            return other
        self._thread = threading.Thread(target=self._beat, name="pz-state-lease", daemon=True)
        self._thread.start()
        return None

    def serve(self, run_id: str) -> None:
        """Record the run the lease serves (`pz state show`, the takeover's interrupted run)."""
        self.holder = Holder(self.holder.host, self.holder.pid, run_id, self.holder.token)
        self._renew()

    def _renew(self) -> None:
        failpoints.hit("state.lease_renew")
        try:
            if not self.backend.renew(self.holder):
                self.lost = True
                DEBUG_LOG.warning("the project lock's lease on %s was lost", self.backend.describe())
        except StateBackendError as exc:  # unreachable for a moment: the next beat tries again
            DEBUG_LOG.info("the project lock's lease could not be renewed: %s", exc)

    def _beat(self) -> None:
        interval = max(0.1, self.backend.lease_seconds / 3)
        while not self._stop.wait(interval):
            self._renew()

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            try:
                self.backend.release(self.holder)
            except StateBackendError as exc:  # it expires by itself
                DEBUG_LOG.info("the project lock's lease could not be released: %s", exc)


def locked_error(backend: StateBackend, other: LeaseInfo) -> list[Diagnostic]:
    return [
        error(
            "PZ0511",
            f"another pz process ({other.holder.describe()}) holds the project lock on the state backend "
            f"({backend.describe()}) until {other.lease_until}",
            file="project.yml",
            next_step="wait for that run to finish; if its machine died, the lock is taken over once its "
            "lease expires (state.lease_seconds)",
        )
    ]
