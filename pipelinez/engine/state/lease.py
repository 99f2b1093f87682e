"""The project lock on a shared state backend: a lease taken when the run starts, renewed by a heartbeat
thread while the run lives (every third of the lease), released at its end. A holder that dies stops
renewing: its lease expires and the next run takes it over (its run is then recognised as interrupted,
PZ0503 for `pz retry`); while it lives every other process is refused with PZ0511, on any machine.

A holder that could not renew for a whole lease length (cut off from the database, paused) stops calling
itself the holder, judged by its own monotonic clock from the start of its last successful renewal (as
connectors/sdk_lease.py does) and after one more renewal attempt: `lost` then stays true, the run starts no
further node (`lease_fence`, PZ0541) and commits no watermark. The backend fences the commit too (the
lease row must still carry this holder's token and not have expired)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from pipelinez.core import failpoints
from pipelinez.core.diagnostics import Diagnostic, error
from pipelinez.core.state.backend import Holder, LeaseInfo, StateBackend, StateBackendError
from pipelinez.core.vocabulary import NodeError
from pipelinez.engine.run.failures import DEBUG_LOG, NodeFailure

if TYPE_CHECKING:
    from pipelinez.plan.planner import PlannedNode


class Lease:
    def __init__(self, backend: StateBackend):
        self.backend = backend
        self.holder = Holder.this_process()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lost = False  # taken over, or not renewed within its length: this run must not commit state
        self._renewed_at = 0.0  # time.monotonic() when the last successful acquire/renewal was sent

    @property
    def lost(self) -> bool:
        """Whether this process may no longer call itself the holder: a renewal found the lease taken over,
        or no renewal succeeded for a whole lease length (the lease may have expired and been taken). An
        overdue lease is renewed once more first: the heartbeat may only have been held up (a busy machine,
        a long call holding the GIL), and a renewal that succeeds proves no other run took it meanwhile
        (taking it changes its token, which the renewal must match)."""
        if not self._lost and self._renewed_at and self._overdue():
            self._renew()
            if self._overdue():
                self._lose("it was not renewed within state.lease_seconds")
        return self._lost

    def _overdue(self) -> bool:
        return time.monotonic() - self._renewed_at > self.backend.lease_seconds

    def _lose(self, why: str) -> None:
        if not self._lost:
            self._lost = True
            DEBUG_LOG.warning("the project lock's lease on %s was lost: %s", self.backend.describe(), why)

    def acquire(self) -> LeaseInfo | None:
        """None when taken (the heartbeat runs); else the live holder's lease."""
        sent = time.monotonic()
        other = self.backend.acquire(self.holder)
        if other is not None:
            return other
        self._renewed_at = sent
        self._thread = threading.Thread(target=self._beat, name="pz-state-lease", daemon=True)
        self._thread.start()
        return None

    def serve(self, run_id: str) -> None:
        """Record the run the lease serves (`pz state show`, the takeover's interrupted run)."""
        self.holder = Holder(self.holder.host, self.holder.pid, run_id, self.holder.token)
        self._renew()

    def _renew(self) -> None:
        if self._lost:  # never renewed again: another process may hold it now
            return
        failpoints.hit("state.lease_renew")
        sent = time.monotonic()
        try:
            if not self.backend.renew(self.holder):
                self._lose("another run took it over")
                return
        except StateBackendError as exc:  # unreachable for a moment: the next beat tries
            # again, until a whole lease length has passed without a successful renewal (`lost`)
            DEBUG_LOG.info("the project lock's lease could not be renewed: %s", exc)
            return
        self._renewed_at = sent

    def _beat(self) -> None:
        interval = max(0.1, self.backend.lease_seconds / 3)
        while not self._stop.wait(interval):
            self._renew()
            if self.lost:
                return

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


# -- the fence: once the lease is lost, the run starts no further node (so writes no further sink) and commits
# no watermark; it ends failed with PZ0541. A node under way when the loss is noticed finishes (a connector's
# commit is its own), which the message says.
LOST = (
    "this run lost the project lock's lease on the state backend ({where}): another run took it over, or it "
    "could not be renewed within state.lease_seconds"
)


def lease_fence(lease: Lease | None) -> Callable[[PlannedNode], NodeFailure | None] | None:
    """The executor's fence of a run holding `lease` (None for a local lock: the OS keeps it)."""
    if lease is None:
        return None
    held = lease

    def fence(planned: PlannedNode) -> NodeFailure | None:
        if not held.lost:
            return None
        where = held.backend.describe()
        return NodeFailure(
            "PZ0541",
            f"{planned.node.name} was not started: {LOST.format(where=where)}; nothing more is written",
        )

    return fence


def lost_error(lease: Lease) -> NodeError:
    """The run's error once its lease was lost."""
    where = lease.backend.describe()
    return NodeError(
        "PZ0541", f"{LOST.format(where=where)}: no node was started after that and no watermark was committed"
    )
