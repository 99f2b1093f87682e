"""The facade the CLI calls: load → compile → plan → execute. Decides; never prints.

Refusals before any node runs raise PzValidationError (every diagnostic of every tier that ran) or
PzConfigError; the CLI renders them and exits 2.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pipelinez.compile.compiler import CompileResult, compile_project
from pipelinez.compile.dag import CompiledDag
from pipelinez.compile.described import Described
from pipelinez.compile.nodes import SourceLoadNode
from pipelinez.compile.staging import resolve_staging
from pipelinez.compile.templating import Templater
from pipelinez.compile.values import resolve_values
from pipelinez.config.loader import find_project_root, load_project
from pipelinez.config.model import Project
from pipelinez.core.diagnostics import Diagnostic, PzValidationError
from pipelinez.core.run_state import RunState, StateFileError, Watermark
from pipelinez.core.vocabulary import RunCommand, RunStatus
from pipelinez.engine.connect.connectivity import check_connectivity
from pipelinez.engine.events import Subscriber

if TYPE_CHECKING:  # what runs, retries and cleans imports when it is called: `pz validate` never needs it
    from pipelinez.engine.retry.retry_command import RetryOutcome
    from pipelinez.engine.retry.retry_select import RetrySelection
    from pipelinez.engine.run.backend import BackendProvider
    from pipelinez.engine.run.executor_choice import ExecutorChoice
    from pipelinez.engine.run.session import RunOutcome
    from pipelinez.engine.staging.staging_store import StagingStore
    from pipelinez.engine.state.run_results import RunArgs, RunResults
    from pipelinez.engine.state.runs import RunSummary
from pipelinez.core.json_types import JsonObject
from pipelinez.plan.planner import Plan, build_plan, plan_named


@dataclass
class Validation:
    project: Project | None
    errors: list[Diagnostic] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    compiled: CompileResult | None = None


def validate(
    project_dir: Path | None,
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    connect: bool = False,
    full_refresh: bool = False,
    describe: bool = False,
) -> Validation:
    """Tiers 1-4 (and 5 with `connect`); every diagnostic gathered. Never raises for user errors.
    Incremental datasets are compiled against their committed watermarks, none with `full_refresh`.
    `describe`: also gather the tables' columns and queries lineage and `pz docs` read."""
    root = find_project_root(project_dir or Path.cwd())
    project, diags = load_project(root, partial=True)
    errors = [d for d in diags if d.is_error]
    warnings = [d for d in diags if not d.is_error]
    if project is None:
        return Validation(None, errors, warnings)
    try:
        watermarks = committed_watermarks(project, full_refresh)
        unreadable: list[Diagnostic] = []
    except StateFileError as exc:  # a broken or locked state file matters to incremental datasets only
        watermarks, unreadable = {}, list(exc.diagnostics)
    compiled = compile_project(project, overrides, environ, watermarks, describe=describe)
    if compiled.incremental:
        errors += unreadable
    found: list[Diagnostic] = []
    warned: list[Diagnostic] = []
    if connect and not errors and not compiled.errors and compiled.dag is not None:
        found, warned, fetched = check_connectivity(compiled.dag)
        if fetched and any(w.code == "PZ0406" for w in compiled.warnings):
            # tier 4 bound loosely what tier 5 has just fetched: bind it now, in this same command
            compiled = compile_project(project, overrides, environ, watermarks, fetched, describe=describe)
    errors += compiled.errors + found
    warnings += compiled.warnings + warned
    return Validation(project, errors, warnings, compiled)


def committed_watermarks(project: Project, full_refresh: bool = False) -> dict[tuple[str, str], Watermark]:
    """The committed watermark of every incremental dataset (none for a full refresh)."""
    if full_refresh:
        return {}
    return RunState(project.state_dir).watermarks()


def plan(
    project_dir: Path | None,
    select: Sequence[str] = (),
    exclude: Sequence[str] = (),
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    full_refresh: bool = False,
) -> tuple[Plan, list[Diagnostic]]:
    """(plan, warnings); raises PzValidationError with every error."""
    the_plan, _described, warnings = described_plan(
        project_dir, select, exclude, overrides, environ, full_refresh
    )
    return the_plan, warnings


def described_plan(
    project_dir: Path | None,
    select: Sequence[str] = (),
    exclude: Sequence[str] = (),
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    full_refresh: bool = False,
    describe: bool = False,
) -> tuple[Plan, Described | None, list[Diagnostic]]:
    """(plan, with `describe` the described tables lineage and `pz docs` read, warnings); raises
    PzValidationError with every error."""
    checked = validate(project_dir, overrides, environ, full_refresh=full_refresh, describe=describe)
    if checked.errors or checked.compiled is None or checked.compiled.dag is None:
        raise PzValidationError([*checked.errors, *checked.warnings])
    the_plan, diags = build_plan(checked.compiled.dag, select, exclude)
    errors = [d for d in diags if d.is_error]
    if errors:
        raise PzValidationError([*errors, *checked.warnings])
    return the_plan, checked.compiled.described, [*checked.warnings, *diags]


def run(
    project_dir: Path | None,
    *,
    select: Sequence[str] = (),
    exclude: Sequence[str] = (),
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    threads: int | None = None,
    fail_fast: bool | None = None,
    full_refresh: bool = False,
    subscribers: Sequence[Subscriber] = (),
    command: RunCommand = RunCommand.RUN,
    executor: str | None = None,
    staging: str | None = None,
) -> RunOutcome:
    """`executor`/`staging`: --executor and --staging (else PZ_EXECUTOR, PZ_STAGING_URL; else local)."""
    from pipelinez.engine.run.executor_choice import choose_executor
    from pipelinez.engine.run.session import execute
    from pipelinez.engine.state.run_results import RunArgs

    root = find_project_root(project_dir or Path.cwd())
    choice = choose_executor(executor, staging, environ, root / ".pz")
    the_plan, warnings = plan(root, select, exclude, overrides, environ, full_refresh)
    args = RunArgs(
        tuple(select),
        tuple(exclude),
        dict(overrides or {}),
        threads,
        fail_fast,
        full_refresh,
        choice.kind,
        choice.staging,
    )
    incremental = sorted(f"{s}.{d}" for s, d in _incremental_loads(the_plan))
    notes = [_full_refresh_note(incremental)] if full_refresh and incremental else []
    with executing(choice, the_plan) as (the_plan, provider, executor_notes):
        return execute(
            the_plan,
            command=command,
            args=args,
            warnings=warnings,
            subscribers=subscribers,
            threads=threads,
            fail_fast=fail_fast,
            notes=[*notes, *executor_notes],
            provider=provider,
        )


@contextlib.contextmanager
def executing(
    choice: ExecutorChoice, the_plan: Plan
) -> Iterator[tuple[Plan, BackendProvider | None, list[str]]]:
    """The plan as the chosen executor runs it, its backend provider (None: local threads) and notes. Ray:
    the cluster is joined (or started) and checked before the run, and left (or stopped) after it."""
    from pipelinez.engine.staging.shared_staging import staging_root

    if not choice.is_ray:
        yield the_plan, None, []
        return
    from pipelinez.engine.distributed.ray_backend import adapt_plan, connect

    assert choice.staging is not None
    root = staging_root(choice.staging, the_plan.dag.staging)
    cluster = connect(choice, the_plan.dag.project.engine.memory_limit, the_plan.dag.redactor, root)
    try:
        adapted, notes = adapt_plan(the_plan)
        yield adapted, cluster, notes
    finally:
        cluster.close()


def retry(
    project_dir: Path | None,
    *,
    full_refresh: bool = False,
    dry_run: bool = False,
    environ: Mapping[str, str] | None = None,
    subscribers: Sequence[Subscriber] = (),
    executor: str | None = None,
    staging: str | None = None,
) -> RetryOutcome:
    """Finish the last run (the retry article): refusals PZ0502/PZ0503/PZ0504/PZ0526, then the project is
    validated with the last run's vars, the retry selected by node id, and run (or only shown: `dry_run`).
    Everything is decided under the project lock, which the retry's run keeps until it ends."""
    from pipelinez.engine.retry.checkpoints import checkpoints_from
    from pipelinez.engine.retry.retry_command import (
        NOTHING,
        NOTHING_CHANGED,
        RetryOutcome,
        last_run,
        project_changed,
    )
    from pipelinez.engine.retry.retry_select import select_retry
    from pipelinez.engine.run.executor_choice import ExecutorChoice, choose_executor
    from pipelinez.engine.run.session import Resumption, execute
    from pipelinez.engine.staging.shared_staging import SharedStagingStore, staging_root
    from pipelinez.engine.staging.staging_store import LocalStagingStore
    from pipelinez.engine.state.lock import ProjectLock
    from pipelinez.engine.state.runs import runs_dir

    root = find_project_root(project_dir or Path.cwd())
    state_dir = root / ".pz"
    lock = ProjectLock(state_dir).__enter__()
    local = LocalStagingStore(runs_dir(state_dir))
    handed = False
    try:
        last = last_run(state_dir)
        if last.status == RunStatus.SUCCESS:
            return RetryOutcome(last.run_id, message=NOTHING)
        # a retry runs where the run it finishes ran, unless told otherwise
        ran_on = ExecutorChoice(last.args.executor, last.args.staging)
        shared = ran_on.staging if ran_on.is_ray else None
        if shared is None and not full_refresh:
            # open and copy the failed run's staging while the project is validated
            local.prepare(last.run_id, copy=not dry_run)
        the_plan, warnings = plan(root, (), (), last.args.vars, environ, last.args.full_refresh)
        dag = the_plan.dag
        # a Ray run's staged tables: its manifests, on its folder or bucket (engine.staging signs in)
        store: StagingStore = (
            local if shared is None else SharedStagingStore(staging_root(shared, dag.staging))
        )
        choice = choose_executor(executor, staging, environ, state_dir, default=ran_on)
        selection = select_retry(last, dag, store, full_refresh)
        local.close_readers()
        notes = tuple(selection.notes())
        if selection.nothing:
            if selection.changed or selection.removed:  # a retry only finishes what that run would have done
                refusal = project_changed(last.run_id, selection.changed, selection.removed)
                return RetryOutcome(last.run_id, notes, NOTHING_CHANGED, selection, refusal=refusal)
            return RetryOutcome(last.run_id, notes, NOTHING, selection)
        if dry_run:
            return RetryOutcome(last.run_id, notes, None, selection, dry_run=True, warnings=tuple(warnings))
        retry_plan, args, refresh_notes = _retry_run_plan(
            root, last, dag, selection, choice, environ, full_refresh
        )
        notes = (*notes, *refresh_notes)
        with executing(choice, retry_plan) as (retry_plan, provider, executor_notes):
            handed = True
            outcome = execute(
                retry_plan,
                command=RunCommand.RETRY,
                args=args,
                warnings=warnings,
                subscribers=subscribers,
                threads=last.args.threads,
                fail_fast=last.args.fail_fast,
                retry_of=last.run_id,
                resume=Resumption(notes, selection.reuse, tuple(selection.carried)),
                checkpoints=None if full_refresh else checkpoints_from(last, retry_plan),
                lock=lock,
                notes=executor_notes,
                provider=provider,
            )
        return RetryOutcome(last.run_id, notes, None, selection, outcome)
    finally:
        local.close()  # a staging copy the run did not take is deleted, under the lock
        if not handed:
            lock.__exit__(None, None, None)


def _retry_run_plan(
    root: Path,
    last: RunResults,
    dag: CompiledDag,
    selection: RetrySelection,
    choice: ExecutorChoice,
    environ: Mapping[str, str] | None,
    full_refresh: bool,
) -> tuple[Plan, RunArgs, tuple[str, ...]]:
    """What the retry of `last` runs: its plan (validated by `plan` already), the run's args, and the note
    naming the incremental datasets it reads from their start (none, or one)."""
    run_dag = dag
    if full_refresh and not last.args.full_refresh:
        # ids were matched as the failed run compiled; the retry itself reads every incremental dataset
        # from its start (watermarks ignored), so it runs the full-refresh compile of the same nodes
        run_dag = plan(root, (), (), last.args.vars, environ, full_refresh=True)[0].dag
    retry_plan = plan_named(run_dag, selection.run, last.selection)
    args = dataclasses.replace(
        last.args,
        full_refresh=last.args.full_refresh or full_refresh,
        executor=choice.kind,
        staging=choice.staging,
    )
    incremental = sorted(f"{s}.{d}" for s, d in _incremental_loads(retry_plan))
    if args.full_refresh and incremental:
        return retry_plan, args, (_full_refresh_note(incremental),)
    return retry_plan, args, ()


def _full_refresh_note(incremental: Sequence[str]) -> str:
    return (
        "--full-refresh: committed watermarks are ignored for this run; incremental dataset(s) "
        f"{', '.join(incremental)} are read from their start"
    )


def _incremental_loads(the_plan: Plan) -> list[tuple[str, str]]:
    return [
        (p.node.source, p.node.dataset)
        for p in the_plan.nodes
        if isinstance(p.node, SourceLoadNode) and p.node.work.request.bounds.incremental
    ]


def history(project_dir: Path | None, limit: int | None = None) -> list[RunSummary]:
    from pipelinez.engine.state.runs import history as run_history

    return run_history(find_project_root(project_dir or Path.cwd()) / ".pz", limit)


@dataclass(frozen=True)
class Cleaned:
    """What `pz clean` did: the runs whose staging was deleted, and in words what stayed and why."""

    removed: list[str]
    kept: list[str]


def clean(project_dir: Path | None, environ: Mapping[str, str] | None = None) -> Cleaned:
    """Delete every staging database, and what Ray runs staged (an s3:// staging with the project's
    engine.staging credentials); refused (PZ0511) while a run holds the project lock. When engine.staging
    cannot be rendered (a broken project.yml, an unset secret variable), what runs staged on an object store
    is kept (never deleted anonymously, nor at another endpoint) for a later pz clean that can render it."""
    from pipelinez.engine.staging.shared_staging import remove_staged
    from pipelinez.engine.state.lock import ProjectLock
    from pipelinez.engine.state.runs import clean as clean_runs

    root = find_project_root(project_dir or Path.cwd())
    state_dir = root / ".pz"
    with ProjectLock(state_dir):
        settings = _staging_settings(root, environ)
        kept: list[str] = []
        removed = clean_runs(state_dir, None if settings is None else remove_staged(settings), kept)
        if settings is None and kept:
            kept.append(
                "engine.staging in project.yml cannot be rendered (run pz validate): fix it, then run "
                "pz clean again to delete what Ray runs staged on the object store"
            )
        return Cleaned(removed, kept)


def _staging_settings(root: Path, environ: Mapping[str, str] | None) -> JsonObject | None:
    """engine.staging as this invocation renders it ({} when the project has none); None when the project
    cannot say (a broken file, an unset variable): then only what runs staged on folders is deleted."""
    project, _ = load_project(root, partial=True)
    if project is None:
        return None
    if not project.engine.staging:
        return {}
    values, found = resolve_values(project, {}, environ)
    settings, problems = resolve_staging(project, Templater(values, project.macro_files))
    return None if any(d.is_error for d in [*found, *problems]) else settings
