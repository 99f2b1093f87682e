"""The `pz` command line. Each command parses flags, calls one facade function, renders, and exits.

Exit codes: 0 everything ran (warnings allowed); 1 a node failed; 2 refused before any node ran.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import traceback
from collections.abc import Callable, Sequence
from functools import wraps
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from pipelinez import __version__
from pipelinez.cli import interrupts
from pipelinez.cli.usage import PzGroup, emit
from pipelinez.core.diagnostics import Diagnostic, PzError, error, warning
from pipelinez.core.json_types import JsonObject
from pipelinez.core.oserrors import os_error, os_reason
from pipelinez.core.vocabulary import NodeError
from pipelinez.engine.events import utc_now

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2

F = TypeVar("F", bound=Callable[..., Any])


class Settings:
    def __init__(self, project: Path | None, log_format: str, color: bool, quiet: bool):
        self.project = project
        self.log_format = log_format
        self.color = color
        self.quiet = quiet

    def emit_diagnostics(self, diags: Sequence[Diagnostic]) -> None:
        emit(diags, self.log_format)


def _parse_vars(pairs: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        if "=" not in pair:
            raise PzError(
                [
                    error(
                        "PZ0513",
                        f"--var '{pair}' is not of the form name=value",
                        next_step="write --var min_date=2025-01-01",
                        file="command line",
                    )
                ]
            )
        key, _, value = pair.partition("=")
        out[key.strip()] = value
    return out


def _silence_stdout() -> None:
    """After the reader of stdout went away (`pz run | head`), stop Python complaining at exit."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _secret_free(root: Path, text: str) -> str:
    """Mask the values of the project's secret env variables in a crash log."""
    from pipelinez.api import redact_secrets

    return redact_secrets(root, text)


def _crash_log_places(settings: Settings) -> list[Path]:
    import tempfile

    places = []
    root = settings.project or Path.cwd()
    try:
        if (root / "project.yml").is_file():
            places.append(root / ".pz" / "pz-crash.log")
    except OSError:
        pass
    return [*places, Path.home() / ".pz-crash.log", Path(tempfile.gettempdir()) / "pz-crash.log"]


def _crash_report(settings: Settings) -> str:
    """Append the traceback to the first crash log place that takes it; the one message a user sees.

    Appended, never overwritten: an earlier crash's text (or anything else in the file) stays. This path
    must never fail itself: every place may be unwritable, and then the message says so.
    """
    text = traceback.format_exc()
    root = settings.project or Path.cwd()
    try:
        text = _secret_free(root, text)
    except Exception:  # masking needs the project: without it, keep only the exception's type
        text = "".join(traceback.format_exception_only(sys.exc_info()[0], None))
    header = f"--- {utc_now()} pz {__version__}\n"
    tried = []
    for log in _crash_log_places(settings):
        try:
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("a", encoding="utf-8") as handle:
                handle.write(header + text + ("" if text.endswith("\n") else "\n"))
        except OSError as exc:
            tried.append(f"{log} ({os_reason(exc)})")
            continue
        return f"pz hit an internal error; please report it with {log}"
    return (
        "pz hit an internal error, and no crash log could be written to "
        + ", ".join(tried)
        + "; please report it with the command you ran"
    )


def _report_crash(settings: Settings) -> None:
    """The PZ0512 line: plain text on stderr, or one JSON `error` event under --log-format json."""
    message = _crash_report(settings)
    if settings.log_format == "json":
        settings.emit_diagnostics([error("PZ0512", message, file="pz")])
    else:
        click.echo(f"error: PZ0512 {message}", err=True)


def guarded(fn: F) -> F:
    """User errors become rendered diagnostics and exit 2; bugs become one line and a log file."""

    @click.option(
        "-p",
        "--project",
        "command_project",
        default=None,
        type=click.Path(path_type=Path, file_okay=False),
        help="Project folder (also accepted before the command).",
    )
    @click.option(
        "--log-format",
        "command_log_format",
        type=click.Choice(["text", "json"]),
        default=None,
        help="text or json (also accepted before the command).",
    )
    @click.option("--no-color", "command_no_color", is_flag=True, help="No colors.")
    @click.option("--quiet", "command_quiet", is_flag=True, help="Print failures and warnings only.")
    @wraps(fn)
    def wrapper(
        *args: Any,
        command_project: Path | None = None,
        command_log_format: str | None = None,
        command_no_color: bool = False,
        command_quiet: bool = False,
        **kwargs: Any,
    ) -> Any:
        settings: Settings = click.get_current_context().obj
        if command_project is not None:
            settings.project = command_project
        if command_log_format is not None:
            settings.log_format = command_log_format
        settings.color = settings.color and not command_no_color
        settings.quiet = settings.quiet or command_quiet
        try:
            return fn(*args, **kwargs)
        except KeyboardInterrupt:
            _report_interrupt(settings)
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except Exception as exc:
            if interrupts.tripped():  # what a signal became inside DuckDB or an import: still an interrupt
                _report_interrupt(settings)
            _report_failure(settings, exc)

    return wrapper  # type: ignore[return-value]


def _report_failure(settings: Settings, exc: Exception) -> None:
    if isinstance(exc, PzError):
        settings.emit_diagnostics(exc.diagnostics)
        sys.exit(exc.exit_code)
    if isinstance(exc, BrokenPipeError):
        _silence_stdout()
        sys.exit(EXIT_FAILED)
    if isinstance(exc, OSError):  # the file system said no: a user/OS error, never a pz bug
        settings.emit_diagnostics([os_error(exc)])
        sys.exit(EXIT_REFUSED)
    _report_crash(settings)
    sys.exit(EXIT_REFUSED)


def _report_interrupt(settings: Settings) -> NoReturn:
    from pipelinez.core.codes import lookup

    by = " by SIGTERM" if interrupts.received() == "SIGTERM" else ""
    message = f"run interrupted{by}: nodes that had not finished are recorded as cancelled"
    next_step = lookup("PZ0514").next_step
    if settings.log_format == "json":
        settings.emit_diagnostics([error("PZ0514", message, file="pz", next_step=next_step)])
    else:
        click.echo(f"error: PZ0514 {message}\n  next: {next_step}", err=True)
    interrupts.reported()
    sys.exit(EXIT_FAILED)


@click.group(name="pz", cls=PzGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pz")
@click.option(
    "-p",
    "--project",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Project folder (default: nearest folder upwards holding project.yml).",
)
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--no-color", is_flag=True, help="No colors.")
@click.option("--quiet", is_flag=True, help="Print failures and warnings only.")
@click.pass_context
def cli(ctx: click.Context, project: Path | None, log_format: str, no_color: bool, quiet: bool) -> None:
    """PipelineZ: move data from sources to sinks through SQL, validated before data moves."""
    ctx.obj = Settings(project, log_format, not no_color, quiet)


def _select_options(fn: F) -> F:
    fn = click.option("--exclude", multiple=True, help="Nodes to leave out (same syntax as --select).")(fn)
    fn = click.option(
        "-s",
        "--select",
        multiple=True,
        help="Nodes: names, source:<n>, sink:<n>, tag:<t>; +x ancestors, x+ descendants.",
    )(fn)
    fn = click.option("--var", "variables", multiple=True, metavar="NAME=VALUE", help="Override a var.")(fn)
    return fn


@cli.command()
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False), default=".")
@click.option("--force", is_flag=True, help="Write into a non-empty folder.")
@click.pass_obj
@guarded
def init(settings: Settings, directory: Path, force: bool) -> None:
    """Write a small runnable project (local files in, a DuckDB file and a Parquet folder out)."""
    from pipelinez.api import init_project

    written = init_project(directory, force=force)
    click.echo(f"wrote {len(written)} files to {directory}; run: pz run -p {directory}")


@cli.command()
@click.option("--connect", is_flag=True, help="Also run tier 5: connection, schema drift, sink permissions.")
@click.option("--var", "variables", multiple=True, metavar="NAME=VALUE")
@click.pass_obj
@guarded
def validate(settings: Settings, connect: bool, variables: tuple[str, ...]) -> None:
    """Run validation tiers 1-4 (5 with --connect); print every error and warning."""
    from pipelinez.api import Project

    overrides = _parse_vars(variables)
    report = Project(settings.project).validate(connect=connect, vars=overrides)  # errors: PzValidationError
    settings.emit_diagnostics(report.warnings)
    if settings.log_format == "text" and not settings.quiet:
        click.echo(f"ok: project is valid ({report.nodes} nodes)")


@cli.command()
@_select_options
@click.pass_obj
@guarded
def plan(
    settings: Settings, select: tuple[str, ...], exclude: tuple[str, ...], variables: tuple[str, ...]
) -> None:
    """Validate, then print the nodes in order with tier, strategy, retry policy and guarantees."""
    from pipelinez.api import Project
    from pipelinez.cli.render import plan_lines

    overrides = _parse_vars(variables)
    the_plan = Project(settings.project).plan(select=select, exclude=exclude, vars=overrides)
    settings.emit_diagnostics(the_plan.warnings)
    if settings.log_format == "json":
        for p in the_plan.nodes:
            data = {"event": "plan_node", "ts": utc_now(), **p.to_dict()}
            if p.breaker and the_plan.breaker:
                data["breaker"] = {"instance": p.breaker, **the_plan.breaker.to_dict()}
            click.echo(json.dumps(data))
        return
    for line in plan_lines(the_plan):
        click.echo(line)


def _reporter(settings: Settings) -> Callable[[JsonObject], None]:
    """What prints a run's events: JSON lines, the live display on a terminal, or the text lines."""
    from pipelinez.cli.render import JsonReporter, TextReporter

    if settings.log_format == "json":
        return JsonReporter()
    if sys.stdout.isatty():
        from pipelinez.cli.progress import ProgressReporter

        return ProgressReporter(quiet=settings.quiet, color=settings.color)
    return TextReporter(quiet=settings.quiet)


@cli.command()
@_select_options
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
    help="ray executor: staging every node can reach: a shared folder or s3://bucket/prefix (endpoint and "
    "credentials: engine.staging in project.yml); default .pz/staging. Env: PZ_STAGING_URL.",
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

    overrides = _parse_vars(variables)
    project = Project(settings.project)
    outcome = project.run(
        select=select,
        exclude=exclude,
        vars=overrides,
        threads=threads,
        fail_fast=fail_fast,
        full_refresh=full_refresh,
        on_event=_reporter(settings),
        executor=executor,
        staging=staging,
    )
    if outcome.status == "error" and outcome.results.error:
        _report_run_error(settings, outcome.run_id, outcome.results.error, outcome.log_file)
    sys.exit(outcome.exit_code)


def _report_run_error(settings: Settings, run_id: str, err: NodeError, log_file: Path | None) -> None:
    """A run that stopped at the orchestrator level: text on stderr, or one JSON `error` event."""
    from pipelinez.core.codes import lookup

    message, next_step = err.message, lookup(err.code).next_step
    if err.code == "PZ0512":
        where = f"with {log_file}" if log_file else "(no log file could be written)"
        message, next_step = f"{message}; please report it {where}", ""
    if settings.log_format == "json":
        settings.emit_diagnostics([error(err.code, message, node=f"run {run_id}", next_step=next_step)])
        return
    text = f"error: {err.code} run {run_id}: {message}"
    click.echo(f"{text}\n  next: {next_step}" if next_step else text, err=True)


@cli.command()
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
    help="ray executor: staging folder or s3://bucket/prefix (default: the one of the run it finishes). "
    "Env: PZ_STAGING_URL.",
)
@click.pass_obj
@guarded
def retry(
    settings: Settings, full_refresh: bool, dry_run: bool, executor: str | None, staging: str | None
) -> None:
    """Finish the latest run: reuse what it staged, carry forward what it committed, run the rest."""
    from pipelinez.api import Project
    from pipelinez.cli.render import retry_lines

    reporter = _reporter(settings)
    outcome = Project(settings.project).retry(
        dry_run=dry_run, full_refresh=full_refresh, on_event=reporter, executor=executor, staging=staging
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
        _report_run_error(settings, run.run_id, run.results.error, run.log_file)
    sys.exit(run.exit_code)


@cli.command()
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@click.pass_obj
@guarded
def runs(settings: Settings, limit: int) -> None:
    """Run history: id, start, duration, status, node counts, reused and carried-forward counts."""
    from pipelinez.api import Project
    from pipelinez.cli.render import runs_lines

    summaries = Project(settings.project).runs(limit=limit)
    if settings.log_format == "json":
        for s in summaries:
            click.echo(json.dumps(s.__dict__))
    else:
        for line in runs_lines(summaries):
            click.echo(line)
    problems = [
        warning(
            "PZ0523",
            f"run {s.run_id}: its record cannot be read: {s.problem}",
            file=f".pz/runs/{s.run_id}/run_results.json",
        )
        for s in summaries
        if s.problem
    ]
    if problems:
        settings.emit_diagnostics(problems)


@cli.command()
@click.pass_obj
@guarded
def clean(settings: Settings) -> None:
    """Delete the staging databases of every run (run history stays)."""
    from pipelinez.api import Project

    cleaned = Project(settings.project).clean()
    if settings.log_format == "json":
        line = {"event": "clean", "ts": utc_now(), "removed": cleaned.removed, "kept": cleaned.kept}
        click.echo(json.dumps(line))
        return
    for note in cleaned.kept:
        click.echo(f"note: {note}")
    click.echo(f"removed {len(cleaned.removed)} staging database(s)")


@cli.command()
@click.option("--index-url", default=None, metavar="URL", help="Package index to install from (pip's).")
@click.option(
    "--find-links", multiple=True, metavar="DIR|URL", help="Also look for packages here (pip's; repeatable)."
)
@click.option("--no-index", is_flag=True, help="Install only from --find-links (offline).")
@click.pass_obj
@guarded
def restore(settings: Settings, index_url: str | None, find_links: tuple[str, ...], no_index: bool) -> None:
    """Install the connector packages project.yml pins and write pz.lock."""
    from pipelinez.api import Project

    report = Project(settings.project).restore(index_url=index_url, find_links=find_links, no_index=no_index)
    if settings.log_format == "json":
        click.echo(
            json.dumps(
                {
                    "event": "restore",
                    "ts": utc_now(),
                    "installed": list(report.installed),
                    "notes": list(report.notes),
                    "connectors": [c.to_dict() for c in report.connectors],
                    "lock_file": str(report.lock_file),
                }
            )
        )
        return
    for note in report.notes:
        click.echo(f"note: {note}")
    for requirement in report.installed:
        click.echo(f"installed {requirement}")
    for c in report.connectors:
        pin = f" (pin {c.pin})" if c.pin else ""
        click.echo(f"ok {c.name} {c.version or '-'} {c.package or '-'} from {c.source}{pin}")
    click.echo(f"wrote {report.lock_file.name} ({len(report.connectors)} connector(s))")


@cli.command()
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("schemas"),
    show_default=True,
    help="Folder to write the JSON Schemas into.",
)
@click.pass_obj
@guarded
def schema(settings: Settings, out: Path) -> None:
    """Write the JSON Schemas of project.yml, sources, sinks and sidecars (for editor autocomplete)."""
    from pipelinez.api import write_schemas

    for path in write_schemas(out):
        click.echo(f"wrote {path}")


@cli.command()
@click.argument("column", metavar="PIPELINE.COLUMN")
@click.option("--var", "variables", multiple=True, metavar="NAME=VALUE", help="Override a var.")
@click.pass_obj
@guarded
def lineage(settings: Settings, column: str, variables: tuple[str, ...]) -> None:
    """The upstream columns a pipeline column is computed from, back to source datasets, and its sinks."""
    from pipelinez.api import Project
    from pipelinez.cli.render import lineage_lines

    report = Project(settings.project).lineage(column, vars=_parse_vars(variables))
    if settings.log_format == "json":
        click.echo(json.dumps({"event": "lineage", "ts": utc_now(), **dataclasses.asdict(report)}))
        return
    for line in lineage_lines(report):
        click.echo(line)


@cli.group(cls=PzGroup)
def docs() -> None:
    """A static site of the project: graph, column docs and lineage, run timeline, check history."""


_OUT_HELP = "Folder of the site (default: .pz/target/docs in the project)."


@docs.command("generate")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None, help=_OUT_HELP)
@click.option(
    "--runs", "last_runs", type=click.IntRange(min=1), default=20, show_default=True, help="Runs shown."
)
@click.option("--var", "variables", multiple=True, metavar="NAME=VALUE", help="Override a var.")
@click.pass_obj
@guarded
def docs_generate(settings: Settings, out: Path | None, last_runs: int, variables: tuple[str, ...]) -> None:
    """Write the site: one index.html plus its script and style; opens without a server or network."""
    from pipelinez.api import Project

    site = Project(settings.project).docs(out, vars=_parse_vars(variables), runs=last_runs)
    settings.emit_diagnostics(site.warnings)
    if settings.log_format == "json":
        data = {
            "event": "docs",
            "ts": utc_now(),
            "index": str(site.index),
            "nodes": site.nodes,
            "runs": site.runs,
        }
        click.echo(json.dumps(data))
        return
    click.echo(f"wrote {site.index} ({site.nodes} nodes, {site.runs} runs)")


@docs.command("serve")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None, help=_OUT_HELP)
@click.option("--port", type=click.IntRange(min=0, max=65535), default=8080, show_default=True)
@click.option(
    "--runs", "last_runs", type=click.IntRange(min=1), default=20, show_default=True, help="Runs shown."
)
@click.option("--var", "variables", multiple=True, metavar="NAME=VALUE", help="Override a var.")
@click.pass_obj
@guarded
def docs_serve(
    settings: Settings, out: Path | None, port: int, last_runs: int, variables: tuple[str, ...]
) -> None:
    """Generate the site, then serve it on 127.0.0.1 until Ctrl-C."""
    from pipelinez.api import Project

    project = Project(settings.project)
    site = project.docs(out, vars=_parse_vars(variables), runs=last_runs)
    settings.emit_diagnostics(site.warnings)
    server = project.docs_server(site.folder, port=port)
    click.echo(f"serving {site.folder} at {server.url} (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        interrupts.reported()
    finally:
        server.shutdown()


def main() -> None:
    interrupts.install()
    try:
        cli(prog_name="pz")
    except (SystemExit, KeyboardInterrupt) as exc:
        if not interrupts.tripped():
            raise
        if not interrupts.was_reported():  # interrupted outside a command (while click parsed the flags)
            click.echo("error: PZ0514 interrupted: nothing ran", err=True)
        code = exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else EXIT_FAILED
        interrupts.exit_now(code or EXIT_FAILED)


if __name__ == "__main__":
    main()
