"""`pz run` (and its alias `pz build`), `pz test` and `pz retry`: the commands that execute nodes."""

from __future__ import annotations

import json
import sys

import click

from pipelinez.cli.common import (
    Settings,
    guarded,
    parse_vars,
    report_run_error,
    reporter,
    select_options,
    utc_now,
)
from pipelinez.core.diagnostics import PzError, error


@click.command()
@select_options
@click.option("--all", "all_nodes", is_flag=True, help="Run every node (the default without --select).")
@click.option("--fail-fast", is_flag=True, default=None, help="Cancel everything on the first failure.")
@click.option("--full-refresh", is_flag=True, help="Ignore committed state (watermarks) for this run.")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="Nodes to run at once.")
@click.option(
    "--executor",
    type=click.Choice(["local", "ray"]),
    default=None,
    help="Where nodes run: local threads (default) or a Ray cluster (RAY_ADDRESS). Env: PZ_EXECUTOR.",
)
@click.option(
    "--staging",
    "staging",
    default=None,
    metavar="URL",
    help="Staging every node can reach: a shared folder or s3://bucket/prefix (endpoint and credentials: "
    "engine.staging in project.yml). ray: where tasks stage (default .pz/staging); local: each source load "
    "is also published there, for a retry on another worker (default: none). Env: PZ_STAGING_URL, then "
    "engine.staging.url.",
)
@click.pass_obj
@guarded
def run(
    settings: Settings,
    select: tuple[str, ...],
    exclude: tuple[str, ...],
    variables: tuple[str, ...],
    all_nodes: bool,
    fail_fast: bool | None,
    full_refresh: bool,
    threads: int | None,
    executor: str | None,
    staging: str | None,
) -> None:
    """Validate, then run the selected nodes (all by default)."""
    if all_nodes and select:
        raise PzError(
            [
                error(
                    "PZ0513",
                    "--all and --select contradict each other",
                    next_step="use --all for every node, or --select for some",
                    file="command line",
                )
            ]
        )
    from pipelinez.api import Project

    overrides = parse_vars(variables)
    project = Project(settings.project, compile_cache=False)  # one compile per process: nothing to reuse
    outcome = project.run(
        select=select,
        exclude=exclude,
        vars=overrides,
        threads=threads,
        fail_fast=fail_fast,
        full_refresh=full_refresh,
        on_event=reporter(settings),
        executor=executor,
        staging=staging,
    )
    if outcome.status == "error" and outcome.results.error:
        report_run_error(settings, outcome.run_id, outcome.results.error, outcome.log_file)
    sys.exit(outcome.exit_code)


build = click.Command(
    "build",
    callback=run.callback,
    params=run.params,
    help="Alias of `pz run` (dbt's spelling): the same flags, the same run.",
    short_help="Alias of `pz run`.",
)


@click.command()
@select_options
@click.pass_obj
@guarded
def test(
    settings: Settings, select: tuple[str, ...], exclude: tuple[str, ...], variables: tuple[str, ...]
) -> None:
    """Run the selected checks (all by default) on fresh inputs; write nothing to sinks or state."""
    from pipelinez.api import Project
    from pipelinez.cli.render_inspect import test_lines

    outcome = Project(settings.project).test(select=select, exclude=exclude, vars=parse_vars(variables))
    settings.emit_diagnostics(outcome.warnings)
    if settings.log_format == "json":
        for node in outcome.nodes:
            click.echo(json.dumps({"event": "test_node", "ts": utc_now(), **node.to_dict()}, default=str))
    else:
        for line in test_lines(outcome, settings.quiet):
            click.echo(line)
    sys.exit(outcome.exit_code)


@click.command()
@click.option(
    "--full-refresh", is_flag=True, help="No reuse, no carried-forward writes, every watermark ignored."
)
@click.option(
    "--dry-run", is_flag=True, help="Print what would be reused, carried forward and run; change nothing."
)
@click.option(
    "--executor",
    type=click.Choice(["local", "ray"]),
    default=None,
    help="Where nodes run: local threads or a Ray cluster (default: where the run it finishes ran).",
)
@click.option(
    "--staging",
    "staging",
    default=None,
    metavar="URL",
    help="Staging folder or s3://bucket/prefix (ray: where tasks stage; local: a shared staging the source "
    "loads are published to; default: the one of the run it finishes). Env: PZ_STAGING_URL.",
)
@click.pass_obj
@guarded
def retry(
    settings: Settings, full_refresh: bool, dry_run: bool, executor: str | None, staging: str | None
) -> None:
    """Finish the latest run: reuse what it staged, carry forward what it committed, run the rest."""
    from pipelinez.api import Project
    from pipelinez.cli.render import retry_lines

    on_event = reporter(settings)
    outcome = Project(settings.project).retry(
        dry_run=dry_run, full_refresh=full_refresh, on_event=on_event, executor=executor, staging=staging
    )
    if outcome.run is None:
        if settings.log_format == "json":
            for note in outcome.notes:
                click.echo(json.dumps({"event": "note", "ts": utc_now(), "run_id": None, "message": note}))
            steps = outcome.selection.steps() if outcome.dry_run and outcome.selection else []
            click.echo(
                json.dumps(
                    {
                        "event": "retry_dry_run" if outcome.dry_run else "nothing_to_retry",
                        "ts": utc_now(),
                        "retry_of": outcome.retry_of,
                        "message": outcome.message,
                        "steps": [{"action": a, "name": n, "detail": d} for a, n, d in steps],
                    }
                )
            )
        else:
            settings.emit_diagnostics(outcome.warnings)
            for line in retry_lines(outcome):
                click.echo(line)
        if outcome.refusal is not None:  # PZ0534: nothing it can finish, the project changed
            settings.emit_diagnostics([outcome.refusal])
        sys.exit(outcome.exit_code)
    run = outcome.run
    if run.status == "error" and run.results.error:
        report_run_error(settings, run.run_id, run.results.error, run.log_file)
    sys.exit(run.exit_code)
