"""The retention sweep of a project whose run history lives in a shared state backend.

The rule is the local one (`runs.sweep`): the staging of all but the newest `retention.keep_last` runs is
deleted, the run history stays. With a shared backend "the newest runs" are the project's, whichever worker
made them: the window is taken over the backend's run ids, and the records of the runs that just fell out of
it are copied into this worker's `.pz/runs` first, so the sweep finds where they published their source
loads (a shared staging) and deletes it, even on a fresh worker that never saw those runs.

Each run pushes one run out of the window; the last `SWEEP_BACKLOG` runs out of it are looked at, so a sweep
that could not run (the store was down) is made up by the next ones without reading the whole history at the
end of every run. `pz clean` copies every run in (`shared.hydrate`) and deletes them all.
"""

from __future__ import annotations

from pathlib import Path

from pipelinez.core.state.backend import StateBackend
from pipelinez.engine.state.runs import run_ids
from pipelinez.engine.state.shared import hydrate

SWEEP_BACKLOG = 3  # runs out of the keep_last window whose records the sweep after a run reads


def sweep_history(backend: StateBackend, state_dir: Path, keep_last: int) -> list[str] | None:
    """The project's run ids, oldest first, for `runs.sweep`: the backend's and this worker's, with the
    records of the newest `SWEEP_BACKLOG` runs beyond `keep_last` copied in when missing here; None (the
    local folder's ids) for the local backend. Raises what the backend raises (StateBackendError, OSError)."""
    if not backend.remote:
        return None
    here = set(run_ids(state_dir))
    history = sorted(set(backend.run_ids()) | here)
    end = max(0, len(history) - keep_last)
    missing = [run_id for run_id in history[max(0, end - SWEEP_BACKLOG) : end] if run_id not in here]
    if missing:  # one listing per run otherwise: a worker that made the runs has their records
        hydrate(backend, state_dir, only=missing)
    return history
