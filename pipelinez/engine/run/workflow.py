"""The facade's private helper for what changes state: a run, a retry, `pz clean` and the run history, called
by `pipelinez.api.Project` only (which holds the compile cache they compile through), and how the facade's
`on_event` callback hears a run (`Forward`, PZ0535 `EventCallbackError`). Decides; never prints.

Refusals before any node runs raise PzValidationError (every diagnostic of every tier that ran) or
PzConfigError; the CLI renders them and exits 2. Every use of the project lock is a `with` block.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelinez.compile.dag import CompiledDag
from pipelinez.compile.nodes import SourceLoadNode
from pipelinez.compile.staging import resolve_staging
from pipelinez.compile.templating import Templater
from pipelinez.compile.values import resolve_values
from pipelinez.config.loader import find_project_root, load_project
from pipelinez.core.diagnostics import Diagnostic, PzError, error
from pipelinez.core.json_types import JsonObject
from pipelinez.core.state.local import LocalBackend
from pipelinez.core.vocabulary import RunCommand, RunStatus
from pipelinez.engine.events import Event, Subscriber
from pipelinez.engine.run.compile_cache import CompileCache
from pipelinez.engine.run.prepare import checked_dag, plan
from pipelinez.engine.state.shared import backend_at, hydrate

if TYPE_CHECKING:  # what runs, retries and cleans imports when it is called: `pz validate` never needs it
    from pipelinez.engine.distributed.ray_cluster import RayJoin
    from pipelinez.engine.retry.retry_command import RetryOutcome
    from pipelinez.engine.retry.retry_select import RetrySelection
    from pipelinez.engine.run.backend import BackendProvider
    from pipelinez.engine.run.executor_choice import ExecutorChoice
    from pipelinez.engine.run.session import RunOutcome
    from pipelinez.engine.staging.shared_staging import StagingRoot
    from pipelinez.engine.staging.staging_store import LocalStagingStore, StagingStore
    from pipelinez.engine.state.lock import ProjectLock
    from pipelinez.engine.state.run_results import RunArgs, RunResults
    from pipelinez.engine.state.runs import RunSummary
from pipelinez.plan.planner import Plan, plan_named

OnEvent = Callable[[JsonObject], None]


class EventCallbackError(PzError):
    """PZ0535: the `on_event` callback raised. It was not called again after that; the run went on to its
    end and was recorded: `outcome` is what `run` (or `retry`) would have returned. The callback's own
    exception is `__cause__`."""

    def __init__(self, diagnostics: Sequence[Diagnostic], outcome: Any):
        super().__init__(diagnostics)
        self.outcome = outcome


class Forward:
    """`on_event` as a subscriber of the run's events: each event a deep copy (the callback may keep or
    change it; other subscribers don't see it). The first exception it raises is kept, and it is not called
    again, so a broken callback can stop neither the run nor its records."""

    def __init__(self, on_event: OnEvent | None):
        self.on_event = on_event
        self.failed: tuple[str, Exception] | None = None

    def subscribers(self) -> list[Callable[[Event, JsonObject], None]]:
        return [self] if self.on_event is not None else []

    def __call__(self, _event: Event, data: JsonObject) -> None:
        if self.on_event is None or self.failed is not None:
            return
        try:
            self.on_event(copy.deepcopy(data))
        except Exception as exc:
            self.failed = (str(data.get("event")), exc)

    def check(self, call: str, run_id: str | None, status: str | None, outcome: Any) -> None:
        """Raise EventCallbackError when the callback raised during the call."""
        if self.failed is None:
            return
        event, exc = self.failed
        ran = f"run {run_id} went on and ended {status}" if run_id else "nothing ran"
        raise EventCallbackError(
            [
                error(
                    "PZ0535",
                    f"on_event raised {type(exc).__name__}: {exc} on the '{event}' event and was not called "
                    f"again; the {ran} (events.jsonl holds every event)",
                    file=f"{call}()",
                    next_step="fix the callback (an exception in it is the caller's, pz only reports it)",
                )
            ],
            outcome,
        ) from exc


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
    compiles: CompileCache | None = None,
) -> RunOutcome:
    """`executor`/`staging`: --executor and --staging (else PZ_EXECUTOR, PZ_STAGING_URL, then project.yml's
    engine.staging.url for the staging; else local, with no shared staging). `compiles`: the facade's
    compile cache."""
    from pipelinez.engine.run.executor_choice import choose_executor, with_project_staging
    from pipelinez.engine.run.session import execute
    from pipelinez.engine.state.run_results import RunArgs

    root = find_project_root(project_dir or Path.cwd())
    choice = choose_executor(executor, staging, environ, root / ".pz")
    join = _begin_join(choice)  # Ray's workers start while the project is validated and planned
    try:
        # every refusal of the project before the lock is taken (and what compiling imports, loaded)
        stamp = LocalBackend(root / ".pz").stamp()  # the local state file as the plan reads it
        the_plan, warnings = plan(root, select, exclude, overrides, environ, full_refresh, compiles)
        choice = with_project_staging(choice, the_plan.dag.staging)
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
        with _project_lock(root, overrides, environ) as lock:
            if not full_refresh and _watermarks_moved(lock, the_plan, stamp):
                # another run committed since the plan read the watermarks: compiled again under the lock, so
                # the read windows start from the committed ones and no other run commits before this one
                the_plan, warnings = plan(root, select, exclude, overrides, environ, full_refresh, compiles)
            incremental = sorted(f"{s}.{d}" for s, d in _incremental_loads(the_plan))
            notes = [_full_refresh_note(incremental)] if full_refresh and incremental else []
            with executing(choice, the_plan, join) as (the_plan, provider, executor_notes, shared):
                return execute(
                    the_plan,
                    command=command,
                    args=args,
                    warnings=warnings,
                    subscribers=subscribers,
                    threads=threads,
                    fail_fast=fail_fast,
                    lock=lock,
                    notes=[*notes, *executor_notes],
                    provider=provider,
                    shared=shared,
                )
    finally:
        if join is not None:
            join.close()  # a refused run leaves the cluster it joined


def _begin_join(choice: ExecutorChoice) -> RayJoin | None:
    """A Ray run joining the cluster at RAY_ADDRESS: joined in a thread from now on (`begin_join`)."""
    if not choice.is_ray:
        return None
    from pipelinez.engine.distributed.ray_cluster import begin_join

    return begin_join(choice)


@contextlib.contextmanager
def _project_lock(
    root: Path, overrides: Mapping[str, str] | None, environ: Mapping[str, str] | None
) -> Iterator[ProjectLock]:
    """The project lock of a run: the local flock, and the lease of a shared `state:` backend rendered with
    the run's --var."""
    from pipelinez.engine.state.lock import ProjectLock

    backend = backend_at(root, environ, overrides)  # the plan reported a block that cannot be rendered
    with contextlib.closing(backend), ProjectLock(root / ".pz", backend) as lock:
        yield lock


@contextlib.contextmanager
def executing(
    choice: ExecutorChoice, the_plan: Plan, join: RayJoin | None = None
) -> Iterator[tuple[Plan, BackendProvider | None, list[str], StagingRoot | None]]:
    """The plan as the chosen executor runs it, its backend provider (None: local threads), notes, and the
    local executor's shared staging (None: none, or Ray). Ray: the cluster is joined (or started) and
    checked before the run, and left (or stopped) after it. A shared staging is checked (written and read
    back) before the run: PZ0711 or PZ0531 naming the location when it cannot be used. `join`: the Ray
    connection `_begin_join` opened while the project was planned."""
    if not choice.is_ray:
        if choice.staging is None:  # local threads, no shared staging: nothing more to import
            yield the_plan, None, [], None
            return
        from pipelinez.engine.staging.shared_staging import staging_root

        shared = staging_root(choice.staging, the_plan.dag.staging)
        shared.check("local")
        note = f"source loads are also staged on the shared staging {shared.location}"
        yield the_plan, None, [note], shared
        return
    from pipelinez.engine.distributed.ray_backend import adapt_plan, connect
    from pipelinez.engine.staging.shared_staging import staging_root

    assert choice.staging is not None
    root = staging_root(choice.staging, the_plan.dag.staging)
    engine = the_plan.dag.project.engine
    cluster = connect(choice, engine.memory_limit, the_plan.dag.redactor, root, join)
    try:
        adapted, notes = adapt_plan(the_plan)
        yield adapted, cluster, notes, None
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
    compiles: CompileCache | None = None,
) -> RetryOutcome:
    """Finish the last run ("Retry without starting over"): refusals PZ0502/PZ0503/PZ0504/PZ0526, then the
    project is validated with the last run's vars, the retry selected by node id, and run (or only shown:
    `dry_run`). Everything is decided, and the retry run, under the project lock. `compiles`: the facade's
    compile cache (a `--full-refresh` of a project without committed watermarks compiles once)."""
    from pipelinez.engine.retry.retry_command import NOTHING, RetryOutcome, last_run
    from pipelinez.engine.run.executor_choice import ExecutorChoice
    from pipelinez.engine.staging.staging_store import LocalStagingStore
    from pipelinez.engine.state.lock import ProjectLock
    from pipelinez.engine.state.runs import runs_dir

    root = find_project_root(project_dir or Path.cwd())
    state_dir = root / ".pz"
    # the state block as the last run rendered it (its --var), when that run is here; else as declared
    backend = backend_at(root, environ, _last_vars(state_dir))
    with contextlib.closing(backend), ProjectLock(state_dir, backend) as lock:
        hydrate(backend, state_dir)  # the last run may have run on another machine
        last = last_run(state_dir)
        if last.status == RunStatus.SUCCESS:
            return RetryOutcome(last.run_id, message=NOTHING)
        local = LocalStagingStore(runs_dir(state_dir))
        try:
            # a retry runs where the run it finishes ran, unless told otherwise
            ran_on = ExecutorChoice(last.args.executor, last.args.staging)
            if not ran_on.is_ray and not full_refresh:
                # open and copy the failed run's staging while the project is validated
                local.prepare(last.run_id, copy=not dry_run)
            decided = _Retry(root, last, ran_on, local, environ, compiles, full_refresh)
            return decided.finish(dry_run, executor, staging, subscribers, lock)
        finally:
            local.close()  # a staging copy the run did not take is deleted, under the lock


def _last_vars(state_dir: Path) -> dict[str, str]:
    """The --var of the newest run recorded in `.pz/runs` ({} when there is none, or it is unreadable)."""
    from pipelinez.engine.state.run_results import read_results
    from pipelinez.engine.state.runs import run_ids, runs_dir

    ids = run_ids(state_dir)
    last = read_results(runs_dir(state_dir) / ids[-1] / "run_results.json") if ids else None
    return dict(last.args.vars) if last is not None else {}


class _Retry:
    """One retry of `last`, decided under the project lock: the validated project, the selection, the
    retry's plan."""

    def __init__(
        self,
        root: Path,
        last: RunResults,
        ran_on: ExecutorChoice,
        local: LocalStagingStore,
        environ: Mapping[str, str] | None,
        compiles: CompileCache | None,
        full_refresh: bool,
    ):
        self.root, self.last, self.ran_on, self.local = root, last, ran_on, local
        self.environ, self.compiles, self.full_refresh = environ, compiles, full_refresh

    def finish(
        self,
        dry_run: bool,
        executor: str | None,
        staging: str | None,
        subscribers: Sequence[Subscriber],
        lock: ProjectLock,
    ) -> RetryOutcome:
        from pipelinez.engine.retry.checkpoints import checkpoints_from
        from pipelinez.engine.retry.retry_command import (
            NOTHING,
            NOTHING_CHANGED,
            RetryOutcome,
            project_changed,
        )
        from pipelinez.engine.retry.retry_select import select_retry
        from pipelinez.engine.run.executor_choice import choose_executor, with_project_staging
        from pipelinez.engine.run.session import Resumption, execute
        from pipelinez.engine.staging.shared_staging import SharedStagingStore, staging_root

        last, environ = self.last, self.environ
        dag, warnings = checked_dag(self.root, last.args.vars, environ, last.args.full_refresh, self.compiles)
        store: StagingStore = self.local
        if self._reads_shared():
            # its staged tables' manifests, on its folder or bucket (engine.staging signs in)
            assert self.ran_on.staging is not None
            store = SharedStagingStore(staging_root(self.ran_on.staging, dag.staging))
        choice = choose_executor(executor, staging, environ, self.root / ".pz", default=self.ran_on)
        choice = with_project_staging(choice, dag.staging)
        selection = select_retry(last, dag, store, self.full_refresh)
        self.local.close_readers()
        notes = tuple(selection.notes())
        if selection.nothing:
            if selection.changed or selection.removed:  # a retry only finishes what that run would have done
                refusal = project_changed(last.run_id, selection.changed, selection.removed)
                return RetryOutcome(last.run_id, notes, NOTHING_CHANGED, selection, refusal=refusal)
            return RetryOutcome(last.run_id, notes, NOTHING, selection)
        if dry_run:
            return RetryOutcome(last.run_id, notes, None, selection, dry_run=True, warnings=tuple(warnings))
        retry_plan, args, refresh_notes = self._run_plan(dag, selection, choice)
        notes = (*notes, *refresh_notes)
        with executing(choice, retry_plan) as (retry_plan, provider, executor_notes, shared):
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
                checkpoints=None if self.full_refresh else checkpoints_from(last, retry_plan),
                lock=lock,
                notes=executor_notes,
                provider=provider,
                shared=shared,
            )
        return RetryOutcome(last.run_id, notes, None, selection, outcome)

    def _reads_shared(self) -> bool:
        """Whether the retry reuses the shared staging: always for a Ray run; for a local run that
        published there, when its staging.duckdb is not on this machine (another worker ran it)."""
        if self.ran_on.staging is None:
            return False
        return self.ran_on.is_ray or not self.local.path(self.last.run_id).is_file()

    def _run_plan(
        self, dag: CompiledDag, selection: RetrySelection, choice: ExecutorChoice
    ) -> tuple[Plan, RunArgs, tuple[str, ...]]:
        """What the retry runs: its plan (of a project validated already), the run's args, and the note
        naming the incremental datasets it reads from their start (none, or one)."""
        last = self.last
        run_dag = dag
        if self.full_refresh and not last.args.full_refresh:
            # ids were matched as the failed run compiled; the retry itself reads every incremental dataset
            # from its start (watermarks ignored), so it runs the full-refresh compile of the same nodes
            # (the same compile, from the cache, when no watermark is committed)
            run_dag = checked_dag(self.root, last.args.vars, self.environ, True, self.compiles)[0]
        retry_plan = plan_named(run_dag, selection.run, last.selection)
        args = dataclasses.replace(
            last.args,
            full_refresh=last.args.full_refresh or self.full_refresh,
            executor=choice.kind,
            staging=choice.staging,
        )
        incremental = sorted(f"{s}.{d}" for s, d in _incremental_loads(retry_plan))
        if args.full_refresh and incremental:
            return retry_plan, args, (_full_refresh_note(incremental),)
        return retry_plan, args, ()


def _watermarks_moved(lock: ProjectLock, the_plan: Plan, stamp: tuple[tuple[int, int, int], ...]) -> bool:
    """Whether the watermarks committed now (read under `lock`, through its backend) differ from those the
    plan's incremental loads compiled their bounds from. `stamp`: the local state file's before the plan
    (unchanged: nothing was committed since, and the file is not read again)."""
    loads = [
        p.node
        for p in the_plan.nodes
        if isinstance(p.node, SourceLoadNode) and p.node.work.request.bounds.incremental
    ]
    backend = lock.backend
    if not loads or backend is None:
        return False
    if isinstance(backend, LocalBackend) and backend.stamp() == stamp:
        return False
    marks = backend.watermarks()
    for node in loads:
        mark = marks.get((node.source, node.dataset))
        if (mark.value if mark is not None else None) != node.work.request.bounds.committed:
            return True
    return False


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

    root = find_project_root(project_dir or Path.cwd())
    backend = backend_at(root)
    try:
        hydrate(backend, root / ".pz")
    finally:
        backend.close()
    return run_history(root / ".pz", limit)


@dataclass(frozen=True)
class Cleaned:
    """What `pz clean` did: the runs whose staging was deleted, and in words what stayed and why."""

    removed: list[str]
    kept: list[str]


def clean(project_dir: Path | None, environ: Mapping[str, str] | None = None) -> Cleaned:
    """Delete every staging database, and what Ray runs staged (an s3:// staging with the project's
    engine.staging credentials); refused (PZ0511) while a run holds the project lock. When engine.staging
    cannot be rendered (a broken project.yml, an unset secret variable), what runs staged on an object store
    is kept (never deleted anonymously, nor at another endpoint) for a later pz clean that can render it.
    With a shared state backend, every run of it is copied into .pz/runs first: what other workers' runs
    staged on a shared staging is deleted too; the run history stays."""
    from pipelinez.engine.staging.shared_staging import remove_staged
    from pipelinez.engine.state.lock import ProjectLock
    from pipelinez.engine.state.runs import clean as clean_runs

    root = find_project_root(project_dir or Path.cwd())
    state_dir = root / ".pz"
    backend = backend_at(root, environ)
    with contextlib.closing(backend), ProjectLock(state_dir, backend):
        hydrate(backend, state_dir)  # runs other workers made: what they staged on a shared staging goes too
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
