"""`pz state show` (where state lives, the committed watermarks, the last runs, the lock holder) and
`pz state migrate --to <backend>` (the local `.pz/` state copied into the shared backend `state:` names).

Migrating copies the committed watermarks of `.pz/state.duckdb` for the datasets the backend has none for
(in one commit: the backend's own are newer) and every run's run_results.json and events.jsonl it does not
have, under the project lock; run again, it copies nothing new (idempotent). The local files stay: they are
the record of what ran here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pipelinez.config.loader import find_project_root
from pipelinez.core.diagnostics import PzError, error
from pipelinez.core.run_state import RunState, Watermark
from pipelinez.core.state.backend import RESULTS, RUN_FILES
from pipelinez.core.state.local import LocalBackend
from pipelinez.engine.state.lock import ProjectLock
from pipelinez.engine.state.runs import RunSummary, history
from pipelinez.engine.state.shared import backend_at, hydrate


class MigrateRefused(PzError):
    pass


@dataclass(frozen=True)
class StateReport:
    backend: str  # local, postgres, ...
    where: str  # safe to print
    watermarks: list[Watermark]
    runs: list[RunSummary]
    lock: str | None  # the holder in words, or None when the lock is free


@dataclass(frozen=True)
class Migrated:
    backend: str
    where: str
    watermarks: int  # committed watermarks copied (those of datasets the backend has none for)
    runs: list[str] = field(default_factory=list)  # run ids copied
    present: int = 0  # runs the backend had already


def show(project_dir: Path | None, environ: Mapping[str, str] | None = None, limit: int = 5) -> StateReport:
    root = find_project_root(project_dir or Path.cwd())
    backend = backend_at(root, environ)
    try:
        marks = sorted(backend.watermarks().values(), key=lambda w: (w.source, w.dataset))
        hydrate(backend, root / ".pz")
        lease = backend.lease()
        lock: str | None
        if lease is not None:
            state = "expired, taken over by the next run" if lease.expired else "held"
            lock = f"{lease.holder.describe()} ({state}, lease until {lease.lease_until})"
        else:
            lock = _local_holder(root / ".pz")
        return StateReport(backend.name, backend.describe(), marks, history(root / ".pz", limit), lock)
    finally:
        backend.close()


def _local_holder(state_dir: Path) -> str | None:
    """The pid in `.pz/lock` while a process holds the flock (a free lock's file is empty)."""
    try:
        text = (state_dir / "lock").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return f"pid {text} on this machine" if text else None


def migrate(project_dir: Path | None, to: str, environ: Mapping[str, str] | None = None) -> Migrated:
    root = find_project_root(project_dir or Path.cwd())
    state_dir = root / ".pz"
    backend = backend_at(root, environ)
    if not backend.remote or backend.name != to:
        raise MigrateRefused(
            [
                error(
                    "PZ0582",
                    f"pz state migrate --to {to}: project.yml's state: names "
                    + (f"backend {backend.name}" if backend.remote else "no shared backend (state is local)"),
                    file="project.yml",
                    next_step=f"set `state: {{backend: {to}, ...}}` in project.yml first, then migrate",
                )
            ]
        )
    local = LocalBackend(state_dir)
    try:
        with ProjectLock(state_dir, backend):
            there = backend.watermarks()  # never replaced: the backend's may be newer than these
            marks = [m for key, m in RunState(state_dir).watermarks().items() if key not in there]
            backend.commit_watermarks(marks)
            present = set(backend.run_ids())
            copied = []
            for run_id in local.run_ids():
                if run_id in present:
                    continue
                for name in (n for n in RUN_FILES if n != RESULTS):
                    text = local.get_run_file(run_id, name)
                    if text is not None:
                        backend.put_run_file(run_id, name, text)
                text = local.get_run_file(run_id, RESULTS)  # last: a run is listed once it is whole
                if text is not None:
                    backend.put_run_file(run_id, RESULTS, text)
                    copied.append(run_id)
        return Migrated(backend.name, backend.describe(), len(marks), copied, len(present))
    finally:
        backend.close()
