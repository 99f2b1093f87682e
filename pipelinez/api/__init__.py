"""The Python API: `from pipelinez import Project`. What the `pz` command calls, and what tests and
orchestrators (Airflow, Dagster, Prefect tasks) script against instead of shelling out.

Nothing here prints or exits. Results are typed values; user errors are raised as one `PzError` carrying
every diagnostic (`PzValidationError` for validation, `PzConfigError` when there is no project, the project
lock's error when another run holds it, `PzUsageError` for arguments of the wrong type or value). A run
reports its events to `on_event` as the same dicts that `events.jsonl` records; a callback that raises is
not called again, the run goes on to its end and is recorded, and then `EventCallbackError` (PZ0535) is
raised with the run's outcome. Called in the main thread, a run or retry stops on SIGTERM as on Ctrl-C
(recorded as interrupted, PZ0514); then the caller's SIGTERM handler runs, or `SystemExit(143)` is raised.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelinez.api.functions import import_dbt, init_project, redact_secrets, write_schemas
from pipelinez.api.results import PlanNode, RunPlan, ValidationReport
from pipelinez.compile.policy import BreakerPolicy, RetryPolicy
from pipelinez.compile.work import engine_retry as engine_retry_policy
from pipelinez.config.loader import find_project_root
from pipelinez.config.model import RetrySpec
from pipelinez.core.arguments import Arguments
from pipelinez.core.diagnostics import (
    Diagnostic,
    PzConfigError,
    PzError,
    PzUsageError,
    PzValidationError,
)
from pipelinez.core.vocabulary import NodeStatus, RunStatus
from pipelinez.engine.run import prepare, validate_cache
from pipelinez.engine.run.compile_cache import COMPILES
from pipelinez.engine.run.folder_key import walk_once

if TYPE_CHECKING:
    from pipelinez.docs_site.lineage_report import ColumnLineageReport, LineageStep
    from pipelinez.docs_site.site import DocsServer, DocsSite
    from pipelinez.engine.inspect.listing import Compiled, Listing
    from pipelinez.engine.inspect.preview import ChecksOutcome, Preview
    from pipelinez.engine.packages.restore import LockedConnector, RestoreReport
    from pipelinez.engine.retry.retry_command import RetryOutcome, RetryRefused
    from pipelinez.engine.retry.retry_select import RetrySelection
    from pipelinez.engine.run import workflow
    from pipelinez.engine.run.session import RunOutcome
    from pipelinez.engine.run.workflow import EventCallbackError, OnEvent
    from pipelinez.engine.state.run_results import NodeResult, RunResults
    from pipelinez.engine.state.runs import RunSummary
    from pipelinez.engine.state.state_command import Migrated, StateReport

# the result types of running, retrying and restoring, imported on first use: `pz validate` and `pz plan`
# never load the engine that runs (nor its events: `Project.run` and `retry` import the workflow)
_LAZY = {
    "EventCallbackError": "pipelinez.engine.run.workflow",
    "OnEvent": "pipelinez.engine.run.workflow",
    "DocsServer": "pipelinez.docs_site.site",
    "DocsSite": "pipelinez.docs_site.site",
    "ColumnLineageReport": "pipelinez.docs_site.lineage_report",
    "LineageStep": "pipelinez.docs_site.lineage_report",
    "LockedConnector": "pipelinez.engine.packages.restore",
    "PipOptions": "pipelinez.engine.packages.restore",
    "RestoreReport": "pipelinez.engine.packages.restore",
    "RetryOutcome": "pipelinez.engine.retry.retry_command",
    "RetryRefused": "pipelinez.engine.retry.retry_command",
    "RetrySelection": "pipelinez.engine.retry.retry_select",
    "NodeResult": "pipelinez.engine.state.run_results",
    "RunResults": "pipelinez.engine.state.run_results",
    "RunSummary": "pipelinez.engine.state.runs",
    "RunOutcome": "pipelinez.engine.run.session",
}


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pipelinez.api' has no attribute {name!r}")


__all__ = [
    "BreakerPolicy",
    "ColumnLineageReport",
    "Diagnostic",
    "DocsServer",
    "DocsSite",
    "EventCallbackError",
    "LineageStep",
    "LockedConnector",
    "NodeResult",
    "NodeStatus",
    "OnEvent",
    "PlanNode",
    "Project",
    "PzConfigError",
    "PzError",
    "PzUsageError",
    "PzValidationError",
    "RestoreReport",
    "RetryOutcome",
    "RetryPolicy",
    "RetryRefused",
    "RetrySelection",
    "RunOutcome",
    "RunPlan",
    "RunResults",
    "RunStatus",
    "RunSummary",
    "ValidationReport",
    "import_dbt",
    "init_project",
    "redact_secrets",
    "write_schemas",
]

PathLike = str | os.PathLike[str]
EXECUTORS = ("local", "ray")


def _check_selection(
    call: str, select: Sequence[str], exclude: Sequence[str], vars: Mapping[str, str] | None
) -> None:
    """PzUsageError (PZ0513) for a selection or vars of the wrong type, as every selecting method checks."""
    given = Arguments(call)
    given.names("select", select)
    given.names("exclude", exclude)
    given.variables("vars", vars)
    given.check()


def _check_execution(
    given: Arguments, on_event: OnEvent | None, executor: str | None, staging: str | None
) -> None:
    """The arguments `run` and `retry` share (`on_event`, `executor`, `staging`), then every check."""
    given.callback("on_event", on_event)
    given.text("executor", executor, EXECUTORS)
    given.text("staging", staging)
    given.check()


class Project:
    """A pz project folder (the nearest folder upwards from `path` holding project.yml; default: the
    working directory). `environ` replaces os.environ for `env()` values, e.g. in tests.

    Compiles are cached by content (see `engine.run.compile_cache`): a `plan()` then a `run()` compile
    once, and so does the same project re-opened in the same process until a file, a var, a declared
    environment variable, a committed watermark or an installed connector changes. `compile_cache=False`:
    this object compiles without that cache, for a process that compiles the project once (the CLI's
    `pz run`), which then neither keys the folder (a walk of every file, the installed versions) before
    nor after its compile."""

    def __init__(
        self,
        path: PathLike | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        compile_cache: bool = True,
    ):
        given = Arguments("Project")
        given.flag("compile_cache", compile_cache)
        given.check()
        self.root = find_project_root(Path(path) if path is not None else Path.cwd())
        self.environ = environ
        self._compiles = COMPILES if compile_cache else None

    def __repr__(self) -> str:
        return f"Project({str(self.root)!r})"

    def validate(self, *, connect: bool = False, vars: Mapping[str, str] | None = None) -> ValidationReport:
        """Tiers 1-4 (and 5, connecting to every source and sink, with `connect`). Raises
        PzValidationError with every error and warning when the project is not valid."""
        given = Arguments("Project.validate")
        given.flag("connect", connect)
        given.variables("vars", vars)
        given.check()
        with walk_once():  # the stored validation and the compile cache: one walk before, one after
            key = None if connect else validate_cache.files_key(self.root, vars)
            replayed = validate_cache.replay(self.root, key, self.environ)
            if replayed is not None:  # an unchanged project: validated by an earlier process
                return ValidationReport(replayed.nodes, replayed.warnings)
            seen = validate_cache.before(key, vars)
            checked = prepare.validate(  # no content-hash ids: nothing runs (a plan or run gives them)
                self.root, vars, self.environ, connect=connect, compiles=self._compiles, ids=False
            )
            if checked.errors:
                raise PzValidationError([*checked.errors, *checked.warnings])
            compiled = checked.compiled
            dag = compiled.dag if compiled else None
            report = ValidationReport(len(dag.nodes) if dag else 0, tuple(checked.warnings))
            if compiled is not None and checked.project is not None and not compiled.told:
                result = validate_cache.Replayed(report.nodes, report.warnings)
                incremental = bool(compiled.incremental)
                validate_cache.store(checked.project, seen, self.environ, incremental, result)
        return report

    def plan(
        self,
        *,
        select: Sequence[str] = (),
        exclude: Sequence[str] = (),
        vars: Mapping[str, str] | None = None,
    ) -> RunPlan:
        """Validate, then the selected nodes in run order (selection syntax as `pz plan --select`)."""
        _check_selection("Project.plan", select, exclude, vars)
        the_plan, warnings = prepare.plan(
            self.root, select, exclude, vars, self.environ, compiles=self._compiles
        )
        engine_retry = engine_retry_policy(the_plan.dag.project)
        return RunPlan(
            tuple(
                PlanNode.of(p, the_plan.breaker is not None, the_plan.descriptions.get(p.node.name))
                for p in the_plan.nodes
            ),
            tuple(the_plan.selection),
            tuple(warnings),
            engine_retry if the_plan.dag.project.engine.retry != RetrySpec() else None,
            the_plan.breaker,
        )

    def run(
        self,
        *,
        select: Sequence[str] = (),
        exclude: Sequence[str] = (),
        vars: Mapping[str, str] | None = None,
        full_refresh: bool = False,
        fail_fast: bool | None = None,
        threads: int | None = None,
        on_event: OnEvent | None = None,
        executor: str | None = None,
        staging: str | None = None,
    ) -> RunOutcome:
        """Validate, then run the selected nodes. A failed node does not raise: read `status`, `nodes` and
        `exit_code` of the outcome. Raises PzValidationError before any node runs. `executor`: "local" (the
        default) or "ray" (see docs/scale-out.md), with `staging` the ray executor's staging (a folder or
        s3://bucket/prefix), or the local executor's shared staging (docs/deploying.md); None reads
        PZ_EXECUTOR and PZ_STAGING_URL, then project.yml's engine.staging.url. PzConfigError (PZ0707-PZ0711,
        PZ0531) when the executor or the staging can't be
        used; PzUsageError (PZ0513) for arguments of the wrong type or value; EventCallbackError (PZ0535)
        after the run when `on_event` raised."""
        given = Arguments("Project.run")
        given.names("select", select)
        given.names("exclude", exclude)
        given.variables("vars", vars)
        given.flag("full_refresh", full_refresh)
        given.flag("fail_fast", fail_fast, optional=True)
        given.count("threads", threads)
        _check_execution(given, on_event, executor, staging)
        from pipelinez.core.stop_signals import sigterm_stops_the_run
        from pipelinez.engine.run import workflow  # the engine that runs: not for validate or plan

        forward = workflow.Forward(on_event)
        with sigterm_stops_the_run():
            outcome = workflow.run(
                self.root,
                select=select,
                exclude=exclude,
                overrides=vars,
                environ=self.environ,
                threads=threads,
                fail_fast=fail_fast,
                full_refresh=full_refresh,
                subscribers=forward.subscribers(),
                executor=executor,
                staging=staging,
                compiles=self._compiles,
            )
        forward.check("Project.run", outcome.run_id, outcome.status, outcome)
        return outcome

    def retry(
        self,
        *,
        dry_run: bool = False,
        full_refresh: bool = False,
        on_event: OnEvent | None = None,
        executor: str | None = None,
        staging: str | None = None,
    ) -> RetryOutcome:
        """Finish the latest run without starting over (`pz retry`). Raises RetryRefused (PZ0502, PZ0503,
        PZ0504, PZ0526) when that run can only be redone, PzValidationError when the project is not valid.
        Otherwise `run` holds the retry's outcome, or `message` says there was nothing to retry (with `notes`
        saying why), or, with `dry_run`, `selection.steps()` says what would be reused, carried forward and
        run, and nothing ran or changed. `executor`/`staging`: as for `run`; by default the retry runs on the
        executor (and staging) of the run it finishes. PzUsageError and EventCallbackError as for `run`."""
        given = Arguments("Project.retry")
        given.flag("dry_run", dry_run)
        given.flag("full_refresh", full_refresh)
        _check_execution(given, on_event, executor, staging)
        from pipelinez.core.stop_signals import sigterm_stops_the_run
        from pipelinez.engine.run import workflow

        forward = workflow.Forward(on_event)
        with sigterm_stops_the_run():
            outcome = workflow.retry(
                self.root,
                full_refresh=full_refresh,
                dry_run=dry_run,
                environ=self.environ,
                subscribers=forward.subscribers(),
                executor=executor,
                staging=staging,
                compiles=self._compiles,
            )
        ran = outcome.run
        forward.check("Project.retry", ran.run_id if ran else None, ran.status if ran else None, outcome)
        return outcome

    def runs(self, *, limit: int | None = None) -> list[RunSummary]:
        """Run history, newest first."""
        given = Arguments("Project.runs")
        given.count("limit", limit)
        given.check()
        from pipelinez.engine.run import workflow

        return workflow.history(self.root, limit)

    def lineage(self, column: str, *, vars: Mapping[str, str] | None = None) -> ColumnLineageReport:
        """Where `column` ("<pipeline>.<column>") comes from: every upstream column, pipeline by pipeline,
        back to the source datasets' columns, and the sink outputs it is written to (`pz lineage`). Raises
        PzValidationError when the project is not valid, PzError PZ0539 when there is no such column."""
        from pipelinez.docs_site.lineage_report import column_lineage

        given = Arguments("Project.lineage")
        given.text("column", column, optional=False)
        given.variables("vars", vars)
        given.check()
        return column_lineage(self.root, column, vars, self.environ)

    def docs(
        self, out: PathLike | None = None, *, vars: Mapping[str, str] | None = None, runs: int = 20
    ) -> DocsSite:
        """Write the static docs site (`pz docs generate`) into `out` (default .pz/target/docs): the graph,
        each node's panel, column lineage, the last `runs` runs' timelines and each check's history.
        Raises PzValidationError when the project is not valid, PzConfigError PZ0540 when `out` holds
        files pz docs did not write."""
        from pipelinez.docs_site.site import generate

        given = Arguments("Project.docs")
        given.path("out", out)
        given.variables("vars", vars)
        given.count("runs", runs, optional=False)
        given.check()
        folder = Path(out) if out is not None else self.root / ".pz" / "target" / "docs"
        return generate(self.root, folder, vars, self.environ, runs)

    def docs_server(self, folder: PathLike, *, port: int = 8080) -> DocsServer:
        """A server of a generated site on 127.0.0.1:`port` (`pz docs serve`); call `serve_forever()`."""
        from pipelinez.docs_site.site import server

        given = Arguments("Project.docs_server")
        given.path("folder", folder, optional=False)
        given.port("port", port)
        given.check()
        return server(Path(folder), port)

    def restore(
        self,
        *,
        index_url: str | None = None,
        find_links: Sequence[str] = (),
        no_index: bool = False,
    ) -> RestoreReport:
        """Install the connector packages project.yml pins (`connectors:`) into the running environment and
        write pz.lock; with a pz.lock, exactly the versions it records. Raises RestoreError (PZ07xx) with
        every problem when a pin cannot be satisfied."""
        from pipelinez.engine.packages.restore import PipOptions, restore

        return restore(self.root, PipOptions(index_url, tuple(find_links), no_index))

    def clean(self) -> workflow.Cleaned:
        """Delete every run's staging database (history stays): `removed`, the ids of the runs cleaned;
        `kept`, in words, what a Ray run staged on an object store that stays, and why."""
        from pipelinez.engine.run import workflow

        return workflow.clean(self.root, self.environ)

    def state(self, *, runs: int = 5) -> StateReport:
        """Where the project's state lives (`state:` in project.yml, else .pz/), its committed watermarks,
        the last `runs` runs and the lock holder (`pz state show`)."""
        from pipelinez.engine.state.state_command import show

        given = Arguments("Project.state")
        given.count("runs", runs)
        given.check()
        return show(self.root, self.environ, runs)

    def migrate_state(self, to: str) -> Migrated:
        """Copy the local .pz/ state (watermarks the backend lacks, runs it lacks) into the shared backend
        project.yml's `state:` names, which must be `to` (`pz state migrate --to`); idempotent."""
        from pipelinez.engine.state.state_command import migrate

        given = Arguments("Project.migrate_state")
        given.text("to", to, optional=False)
        given.check()
        return migrate(self.root, to, self.environ)

    # --- pz ls, compile, show, test (issue 24): the logic lives in engine.listing and engine.preview ---

    def ls(
        self,
        *,
        select: Sequence[str] = (),
        exclude: Sequence[str] = (),
        resource_types: Sequence[str] = (),
        vars: Mapping[str, str] | None = None,
    ) -> Listing:
        """The nodes the selection matches (`pz ls`), without the ancestors a run adds back; only those of
        `resource_types` (source, pipeline, check, sink) when given. PzValidationError when the project is
        not valid or a selector can't be read; a selector matching nothing is a warning (PZ0250)."""
        from pipelinez.engine.inspect.listing import list_nodes

        given = Arguments("Project.ls")
        given.names("select", select)
        given.names("exclude", exclude)
        given.names("resource_types", resource_types)
        given.variables("vars", vars)
        given.check()
        return list_nodes(self.root, select, exclude, resource_types, vars, self.environ)

    def compile(
        self,
        *,
        select: Sequence[str] = (),
        exclude: Sequence[str] = (),
        vars: Mapping[str, str] | None = None,
    ) -> Compiled:
        """The rendered SQL of each selected pipeline (`pz compile`), refs resolved, secrets masked."""
        from pipelinez.engine.inspect.listing import compile_sql

        _check_selection("Project.compile", select, exclude, vars)
        return compile_sql(self.root, select, exclude, vars, self.environ)

    def show(self, pipeline: str, *, limit: int = 10, vars: Mapping[str, str] | None = None) -> Preview:
        """The first `limit` rows of `pipeline` (`pz show`): its inputs loaded fresh into a throwaway staging
        database, its query run; nothing written to sinks or state. PzError PZ0253 when it names no pipeline;
        a failed input is in `failed`, with no rows."""
        from pipelinez.engine.inspect.preview import show

        given = Arguments("Project.show")
        given.text("pipeline", pipeline, optional=False)
        given.count("limit", limit, optional=False)
        given.variables("vars", vars)
        given.check()
        return show(self.root, pipeline, limit, vars, self.environ)

    def test(
        self,
        *,
        select: Sequence[str] = (),
        exclude: Sequence[str] = (),
        vars: Mapping[str, str] | None = None,
    ) -> ChecksOutcome:
        """Run the selected checks (every check by default) and what they need (`pz test`), on a throwaway
        staging database: nothing written to sinks, no watermark committed, no run recorded. `exit_code` is
        1 when a check of severity error failed (or something it needs did)."""
        from pipelinez.engine.inspect.preview import run_checks

        _check_selection("Project.test", select, exclude, vars)
        return run_checks(self.root, select, exclude, vars, self.environ)
