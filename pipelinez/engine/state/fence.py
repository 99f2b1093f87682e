"""The fence of a run on a shared state backend: once the project lock's lease is lost (taken over by another
run, or not renewed within `state.lease_seconds`), the run starts no further node (so writes no further sink)
and commits no watermark; it ends failed with PZ0541. A node under way when the loss is noticed finishes (a
connector's commit is its own), which the message says."""

from __future__ import annotations

from collections.abc import Callable

from pipelinez.core.vocabulary import NodeError
from pipelinez.engine.run.failures import NodeFailure
from pipelinez.engine.state.lock import ProjectLock
from pipelinez.plan.planner import PlannedNode

LOST = (
    "this run lost the project lock's lease on the state backend ({where}): another run took it over, or it "
    "could not be renewed within state.lease_seconds"
)


def lost_message(lock: ProjectLock) -> str:
    lease = lock.lease
    return LOST.format(where=lease.backend.describe() if lease is not None else "local")


def lease_fence(lock: ProjectLock) -> Callable[[PlannedNode], NodeFailure | None] | None:
    """The executor's fence for a run under `lock` (None for a local lock: the OS keeps it while we live)."""
    if lock.lease is None:
        return None

    def fence(planned: PlannedNode) -> NodeFailure | None:
        if not lock.lost:
            return None
        return NodeFailure(
            "PZ0541", f"{planned.node.name} was not started: {lost_message(lock)}; nothing more is written"
        )

    return fence


def lost_error(lock: ProjectLock) -> NodeError:
    """The run's error once its lease was lost."""
    return NodeError(
        "PZ0541", f"{lost_message(lock)}: no node was started after that and no watermark was committed"
    )
