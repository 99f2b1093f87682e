"""Run ids, run folders, history, retention sweep and clean."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipelinez.core.oserrors import os_reason
from pipelinez.core.vocabulary import Provenance, RunStatus
from pipelinez.engine.run.failures import DEBUG_LOG
from pipelinez.engine.state.run_results import RunResults, UnreadableResults
from pipelinez.engine.state.statedir import state_error

STAGING_FILE = "staging.duckdb"
SEED_PREFIX = ".retry-seed-"  # files in the runs folder: a retry's copy of the staging it reuses, being made
STAGED_REMOVED = "staged.removed"  # in a run's folder: what it staged on an object store is deleted


def new_run_id(now: dt.datetime | None = None) -> str:
    now = now or dt.datetime.now(dt.UTC)
    return now.strftime("%Y%m%dT%H%M%S") + f"{now.microsecond // 1000:03d}Z-{secrets.token_hex(2)}"


def runs_dir(state_dir: Path) -> Path:
    return state_dir / "runs"


def run_ids(state_dir: Path) -> list[str]:
    """Every run id, oldest first (ids sort by time)."""
    folder = runs_dir(state_dir)
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and (p / "run_results.json").exists())


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    started_at: str
    finished_at: str | None
    status: RunStatus
    command: str  # a RunCommand, or "-" when the run's record cannot be read
    counts: dict[str, int]
    reused: int
    carried_forward: int
    duration_ms: int | None
    staging_kept: bool
    problem: str | None = None  # why the run's record could not be read (status `corrupt`, PZ0523)


def _duration(results: RunResults) -> int | None:
    try:
        start = dt.datetime.fromisoformat(results.started_at.replace("Z", "+00:00"))
        end = dt.datetime.fromisoformat(str(results.finished_at).replace("Z", "+00:00"))
    except (ValueError, TypeError):
        return None
    return int((end - start).total_seconds() * 1000)


def history(state_dir: Path, limit: int | None = None) -> list[RunSummary]:
    """The newest `limit` runs, newest first. A run whose record cannot be read is listed with status
    `corrupt` and a `problem` (PZ0523), never skipped. A `.pz` or `.pz/runs` that is not a folder is PZ0521
    (not "no runs yet": the history is there, or would be, and cannot be read)."""
    if state_dir.exists() and not state_dir.is_dir():
        raise state_error(FileExistsError(), state_dir)
    folder = runs_dir(state_dir)
    if os.path.lexists(folder) and not folder.is_dir():
        raise state_error(FileExistsError(None, None, str(folder)), folder)
    out = []
    ids = run_ids(state_dir)[::-1]
    for run_id in ids[:limit] if limit else ids:
        staged = (runs_dir(state_dir) / run_id / STAGING_FILE).exists()
        try:
            results = _read(runs_dir(state_dir) / run_id / "run_results.json")
        except (OSError, ValueError) as exc:
            out.append(
                RunSummary(
                    run_id, "-", None, RunStatus.CORRUPT, "-", {}, 0, 0, None, staged, unreadable_reason(exc)
                )
            )
            continue
        status = results.status
        if status == RunStatus.RUNNING and not pid_alive(results.pid):
            status = RunStatus.INTERRUPTED  # crashed or killed: no live process will ever finish it
        out.append(
            RunSummary(
                run_id,
                results.started_at,
                results.finished_at,
                status,
                results.command,
                results.counts,
                sum(1 for n in results.nodes if n.provenance == Provenance.REUSED),
                sum(1 for n in results.nodes if n.provenance == Provenance.CARRIED_FORWARD),
                _duration(results),
                staged,
            )
        )
    return out


def _read(path: Path) -> RunResults:
    return RunResults.from_dict(json.loads(path.read_text(encoding="utf-8")))


def unreadable_reason(exc: OSError | ValueError) -> str:
    """Why a run record cannot be read, in words (no Python exception names)."""
    if isinstance(exc, OSError):
        return os_reason(exc)
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    if isinstance(exc, UnreadableResults) and not re.match(r"^[A-Z]\w+Error: ", str(exc)):
        return str(exc)
    return "not a run record this pz can read (a field is missing or has the wrong shape)"


def sweep(
    state_dir: Path,
    keep_last: int,
    current: str | None = None,
    remove_staged: Callable[[str, str], None] | None = None,
    kept: list[str] | None = None,
    history: list[str] | None = None,
) -> list[str]:
    """Delete staging databases of all but the newest `keep_last` runs, and what a Ray run (or a local run
    given a shared staging) staged on its shared staging (`<staging>/<run-id>`); run history stays.
    `remove_staged(location, run_id)` deletes a run's staged tables wherever they are (an s3:// staging
    needs the project's engine.staging credentials); without it only a folder's are deleted, and what runs
    staged on an object store is kept for a later sweep that has it. A removal from an object store is
    recorded (`staged.removed` in the run's folder), so later sweeps do not ask the store again; one that
    failed is tried again by the next sweep. `kept` collects, in words, each run whose staging on an
    object store stays (no settings, or the store failed). `history`: every run id of the project, oldest
    first, when a shared state backend holds runs this folder lacks (`shared_retention.sweep_history`); the
    window is taken over it, and what a run of it did not leave here is not looked at."""
    removed = []
    for stray in runs_dir(state_dir).glob(f"{SEED_PREFIX}*"):  # a killed retry's copy (see staging_store)
        stray.unlink(missing_ok=True)
    ids = run_ids(state_dir) if history is None else history
    for run_id in ids[: max(0, len(ids) - keep_last)]:
        if run_id == current or not (runs_dir(state_dir) / run_id).is_dir():
            continue
        for name in (STAGING_FILE, STAGING_FILE + ".wal"):
            path = runs_dir(state_dir) / run_id / name
            if path.exists():
                path.unlink()
                if name == STAGING_FILE:
                    removed.append(run_id)
        location = _shared_staging(state_dir, run_id)
        if location is None:
            continue
        folder = "://" not in location
        marker = runs_dir(state_dir) / run_id / STAGED_REMOVED
        if marker.exists() if not folder else not (Path(location) / run_id).is_dir():
            continue  # nothing left: the objects' removal is recorded, or the folder is gone
        if remove_staged is None and not folder:
            DEBUG_LOG.info("the staging of run %s at %s was kept: no settings to reach it", run_id, location)
            if kept is not None:
                kept.append(
                    f"run {run_id}: what it staged at {location} was kept (no engine.staging settings)"
                )
            continue
        try:
            if remove_staged is not None:
                remove_staged(location, run_id)
            else:
                shutil.rmtree(Path(location) / run_id, ignore_errors=True)
        except Exception as exc:  # an object store unreachable now: the next sweep tries again
            DEBUG_LOG.info("the staging of run %s at %s was not removed: %s", run_id, location, exc)
            if kept is not None:
                kept.append(f"run {run_id}: what it staged at {location} could not be removed (see pz.log)")
            continue
        if not folder:
            _record_removal(marker)
        elif run_id not in removed:
            removed.append(run_id)
    return removed


def _record_removal(marker: Path) -> None:
    try:
        marker.touch()
    except OSError as exc:  # not recorded: the next sweep deletes again (nothing there, harmless)
        DEBUG_LOG.info("the removal of %s could not be recorded: %s", marker.parent.name, os_reason(exc))


def _shared_staging(state_dir: Path, run_id: str) -> str | None:
    """Where a run published its staged tables (its run_results.json args: a folder or s3://...), or None."""
    try:
        data = json.loads((runs_dir(state_dir) / run_id / "run_results.json").read_text(encoding="utf-8"))
        staging = (data.get("args") or {}).get("staging")
    except (OSError, ValueError, AttributeError):
        return None
    return str(staging) if staging else None


def clean(
    state_dir: Path, remove_staged: Callable[[str, str], None] | None = None, kept: list[str] | None = None
) -> list[str]:
    """Delete every staging database (pz clean) and what Ray runs staged. Run history stays."""
    return sweep(state_dir, 0, remove_staged=remove_staged, kept=kept)


def remove_tree(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
