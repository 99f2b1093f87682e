"""`pz retry`: which run it finishes, when it refuses, and what a retry decided (`RetryOutcome`).

The last run is the newest folder under `.pz/runs`. It is refused with a PZ code when it cannot be finished,
only redone: PZ0502 no earlier run, PZ0503 interrupted mid-flight (recorded as running, and no process holds
the project: a crash or a kill, or killed before it recorded anything), PZ0504 failed at the orchestrator
level, PZ0526 its record cannot be read. All of them are decided under the project lock, so a run still in
progress is PZ0511 instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pipelinez.core.codes import lookup
from pipelinez.core.diagnostics import Diagnostic, PzError, error
from pipelinez.core.vocabulary import RunStatus
from pipelinez.engine.retry.retry_select import RetrySelection
from pipelinez.engine.run.session import RunOutcome
from pipelinez.engine.state.run_results import RESULTS_FILE, RunResults
from pipelinez.engine.state.runs import runs_dir, unreadable_reason

NOTHING = "nothing to retry"
NOTHING_CHANGED = "nothing to retry (project changed)"


class RetryRefused(PzError):
    pass


@dataclass(frozen=True)
class RetryOutcome:
    """What `pz retry` did: ran the retry (`run`), or found nothing to retry (`message`), or, with
    `dry_run`, only decided (`selection`)."""

    retry_of: str | None
    notes: tuple[str, ...] = ()
    message: str | None = None
    selection: RetrySelection | None = None
    run: RunOutcome | None = None
    dry_run: bool = False
    warnings: tuple[Diagnostic, ...] = ()
    # PZ0534: nothing of the last run can be finished because what it left unfinished changed (exit 2)
    refusal: Diagnostic | None = None

    @property
    def exit_code(self) -> int:
        if self.refusal is not None:
            return 2
        return self.run.exit_code if self.run is not None else 0


def project_changed(run_id: str, changed: list[str], removed: list[str]) -> Diagnostic:
    """PZ0534: the retry of `run_id` has nothing it can finish: what it left unfinished was edited or
    removed since."""
    what = [f"{n} changed" for n in changed] + [f"{n} was removed" for n in removed]
    return error(
        "PZ0534",
        f"nothing of run {run_id} can be finished: what it left unfinished changed since ({', '.join(what)})",
        file=f".pz/runs/{run_id}/{RESULTS_FILE}",
        next_step=lookup("PZ0534").next_step,
    )


def _refuse(code: str, message: str, run_id: str | None = None) -> RetryRefused:
    where = f".pz/runs/{run_id}/{RESULTS_FILE}" if run_id else ".pz/runs"
    return RetryRefused([error(code, message, file=where)])


def last_run(state_dir: Path) -> RunResults:
    """The newest run's results, or a refusal (PZ0502, PZ0503, PZ0526). Call it holding the project lock."""
    folder = runs_dir(state_dir)
    ids = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    if not ids:
        raise _refuse("PZ0502", "there is no earlier run to retry")
    run_id = ids[-1]
    path = folder / run_id / RESULTS_FILE
    if not path.exists():
        raise _refuse(
            "PZ0503",
            f"the last run {run_id} was interrupted (a crash or a kill) before it recorded any result",
            run_id,
        )
    try:
        results = RunResults.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise _refuse(
            "PZ0526", f"the record of the last run {run_id} cannot be read: {unreadable_reason(exc)}", run_id
        ) from None
    if results.status == RunStatus.RUNNING:
        raise _refuse(
            "PZ0503",
            f"the last run {run_id} was interrupted mid-flight (a crash or a kill): its recorded statuses "
            "can't be trusted",
            run_id,
        )
    if results.status == RunStatus.ERROR:
        cause = f" ({results.error.code}: {results.error.message})" if results.error else ""
        raise _refuse(
            "PZ0504", f"the last run {run_id} failed at the orchestrator level, not at a node{cause}", run_id
        )
    return results
