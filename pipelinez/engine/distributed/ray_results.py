"""What comes back from Ray tasks, on the driver: the staged tables they published, as views in the run's
`staging.duckdb` (`StagedViews`, so `pz` inspection and `pz retry` read a Ray run's staging like a local
one), and the failures of a task that did not return its result (`lost`: a lost worker is a transient
PZ0710 with `worker_lost`) or whose published data the driver cannot read (`unreadable`: PZ0712).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from pipelinez.connectors.sdk_errors import is_transient_store_error
from pipelinez.core.redact import Redactor
from pipelinez.core.sqlnames import quote_ident
from pipelinez.engine.distributed.remote_task import StagedInput
from pipelinez.engine.run.backend import Attempt
from pipelinez.engine.run.failures import NodeFailure
from pipelinez.engine.staging.manifest import TableManifest
from pipelinez.engine.staging.shared_staging import StagingRoot
from pipelinez.engine.staging.staging_store import ReuseUnavailable, first_line

# Ray errors that mean the worker, its node or its raylet went away mid-task: the attempt is lost, not failed
_LOST = (
    "WorkerCrashedError",
    "NodeDiedError",
    "LocalRayletDiedError",
    "ObjectLostError",
    "OwnerDiedError",
    "OutOfMemoryError",
    "ObjectReconstructionFailedError",
    "ObjectReconstructionFailedMaxAttemptsExceededError",
    "ObjectReconstructionFailedLineageEvictedError",
    "ObjectFetchTimedOutError",
    "RaySystemError",
)

# what the driver failing to read or combine a task's published data can raise
UNREADABLE = (ReuseUnavailable, OSError, RuntimeError)


def lost(item: Attempt, exc: BaseException, redactor: Redactor) -> NodeFailure:
    """A task that did not return its result: cancelled, its worker lost, or (a bug) it raised."""
    kinds = {cls.__name__ for cls in type(exc).__mro__}
    what = redactor(first_line(exc))
    if "TaskCancelledError" in kinds:
        return NodeFailure("PZ0514", f"{item.name}: interrupted (its Ray task was cancelled)")
    if kinds & set(_LOST) or ("RayError" in kinds and "RayTaskError" not in kinds):
        return NodeFailure(
            "PZ0710",
            f"{item.name}: the Ray worker running attempt {item.attempt} was lost ({type(exc).__name__}: "
            f"{what})",
            transient=True,
            worker_lost=True,
        )
    return NodeFailure("PZ0512", f"internal error running '{item.name}' on Ray: {type(exc).__name__}: {what}")


def unreadable(message: str, exc: Exception, redactor: Redactor) -> NodeFailure:
    """PZ0712: the driver cannot read (or combine) what a task published; transient when the store says so."""
    return NodeFailure(
        "PZ0712",
        redactor(f"{message}: {exc}"),
        transient=(isinstance(exc, ReuseUnavailable) and exc.transient) or is_transient_store_error(exc),
    )


class StagedViews:
    """The tables the run's tasks published: their manifests (a later task's inputs) and a view over each
    one's Parquet in the driver's staging.duckdb."""

    def __init__(self, root: StagingRoot, views: Any) -> None:
        self.root = root
        self._views = views  # a cursor of the run's staging.duckdb
        self._lock = threading.Lock()
        self._staged: dict[str, StagedInput] = {}  # table -> its manifest, as the tasks published them

    def inputs(self, tables: Iterable[str]) -> tuple[StagedInput, ...]:
        """The staged inputs among `tables` (a table not staged by a task is not one)."""
        with self._lock:
            return tuple(self._staged[t] for t in tables if t in self._staged)

    def register(self, published: TableManifest) -> None:
        """A task published a table: the driver reads its manifest back (a node is done only when its
        manifest exists on the shared staging) and makes it a view in the run's staging.duckdb."""
        import duckdb

        manifest = self.root.read_manifest(published.run_id, published.table)
        if manifest.files != published.files or manifest.rows != published.rows:
            raise RuntimeError(
                f"{published.table}: its manifest in {self.root.location} is not the one the task wrote"
            )
        sql = self.root.select_sql(manifest.run_id, manifest)
        with self._lock:
            self._staged[manifest.table] = StagedInput(manifest.run_id, manifest)
            try:
                self._views.execute(f"CREATE OR REPLACE VIEW {quote_ident(manifest.table)} AS {sql}")
            except duckdb.Error as exc:
                raise RuntimeError(first_line(exc)) from exc

    def close(self) -> None:
        self._views.close()
