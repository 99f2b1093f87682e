"""What every `pz` command shares: the settings of the group, `guarded` (a user error becomes rendered
diagnostics and exit 2, a bug one line and a crash log), the --var/--vars and --select/--exclude options,
and the run reporters.

Exit codes: 0 everything ran (warnings allowed); 1 a node failed; 2 refused before any node ran.
"""

from __future__ import annotations

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
from pipelinez.cli.usage import emit
from pipelinez.core.diagnostics import Diagnostic, PzError, error
from pipelinez.core.json_types import JsonObject
from pipelinez.core.oserrors import os_error, os_reason
from pipelinez.core.vocabulary import NodeError

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2

F = TypeVar("F", bound=Callable[..., Any])


def utc_now() -> str:
    """`engine.events.utc_now`, imported when a command first prints a JSON line, not for `pz --help`."""
    from pipelinez.engine.events import utc_now as now

    return now()


class Settings:
    def __init__(self, project: Path | None, log_format: str, color: bool, quiet: bool):
        self.project = project
        self.log_format = log_format
        self.color = color
        self.quiet = quiet

    def emit_diagnostics(self, diags: Sequence[Diagnostic]) -> None:
        emit(diags, self.log_format)


def _parse_var_pairs(pairs: Sequence[str]) -> dict[str, str]:
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
        signals_before = interrupts.count()
        runs_before = len(interrupts.runs_recorded())
        try:
            return fn(*args, **kwargs)
        except KeyboardInterrupt:
            _report_interrupt(settings, interrupts.runs_recorded()[runs_before:])
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except Exception as exc:
            if interrupts.count() > signals_before:  # a signal of this command, become an error inside
                # DuckDB or an import: still an interrupt
                _report_interrupt(settings, interrupts.runs_recorded()[runs_before:])
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


def interrupt_text(signal_name: str, runs: Sequence[str]) -> tuple[str, str]:
    """PZ0514's message and next step for a command a stop signal ended: `runs` are the runs the command
    had begun recording (run_results.json written), whose unfinished nodes are now recorded as cancelled;
    with none, no node ran and there is nothing for `pz retry` to finish."""
    from pipelinez.core.codes import lookup

    by = " by SIGTERM" if signal_name == "SIGTERM" else ""
    if runs:
        cancelled = f"nodes that had not finished are recorded as cancelled (run {runs[-1]})"
        return f"run interrupted{by}: {cancelled}", lookup("PZ0514").next_step
    return (
        f"interrupted{by} before a run was recorded: no node ran",
        "run the command again when ready",
    )


def _report_interrupt(settings: Settings, runs: Sequence[str]) -> NoReturn:
    message, next_step = interrupt_text(interrupts.received(), runs)
    if settings.log_format == "json":
        settings.emit_diagnostics([error("PZ0514", message, file="pz", next_step=next_step)])
    else:
        click.echo(f"error: PZ0514 {message}\n  next: {next_step}", err=True)
    interrupts.reported()
    sys.exit(EXIT_FAILED)


_VARS_KEY = "pz.vars"


def _keep_vars_text(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    """--vars is read inside the command (under `guarded`), so a malformed mapping is a coded error."""
    if value is not None:
        ctx.meta[_VARS_KEY] = value


def _vars_error(text: str, why: str) -> PzError:
    return PzError(
        [
            error(
                "PZ0513",
                f"--vars '{text}' {why}",
                next_step="""write --vars '{"min_date": "2025-01-01"}' (a YAML or JSON mapping)""",
                file="command line",
            )
        ]
    )


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse_vars_text(text: str) -> dict[str, str]:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        data = YAML(typ="safe", pure=True).load(text)
    except YAMLError as exc:
        problem = getattr(exc, "problem", None) or "it is not valid YAML"
        raise _vars_error(text, f"can't be read: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise _vars_error(text, "is not a mapping of names to values")
    nested = [str(k) for k, v in data.items() if isinstance(v, dict | list) or v is None]
    if nested:
        raise _vars_error(text, f"gives '{nested[0]}' no single value (a list, mapping or null)")
    return {str(k): _scalar(v) for k, v in data.items()}


def parse_vars(pairs: Sequence[str]) -> dict[str, str]:
    """--vars (a YAML or JSON mapping) merged with --var name=value; --var wins."""
    text = click.get_current_context().meta.get(_VARS_KEY)
    merged = _parse_vars_text(text) if text is not None else {}
    return {**merged, **_parse_var_pairs(pairs)}


def var_options(fn: F) -> F:
    fn = click.option(
        "--vars",
        "vars_text",
        default=None,
        metavar="YAML",
        expose_value=False,
        callback=_keep_vars_text,
        help="""Override vars with a YAML or JSON mapping, e.g. '{"k": "v"}' (--var wins).""",
    )(fn)
    return click.option("--var", "variables", multiple=True, metavar="NAME=VALUE", help="Override a var.")(fn)


class SelectorOption(click.Option):
    """--select/--exclude as dbt: `-s a b` takes every value up to the next flag (space = union)."""

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        super().add_to_parser(parser, ctx)
        for name in self.opts:
            option = parser._long_opt.get(name) or parser._short_opt.get(name)
            if option is not None and not getattr(option, "_pz_greedy", False):
                option.process = _greedy(option.process)
                option._pz_greedy = True


def _greedy(process: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
    def take_all(value: Any, state: Any) -> None:
        values = [value]
        while state.rargs and not state.rargs[0].startswith("-"):
            values.append(state.rargs.pop(0))
        process(" ".join(values), state)

    return take_all


def select_options(fn: F) -> F:
    fn = click.option(
        "--exclude",
        multiple=True,
        cls=SelectorOption,
        help="Nodes to leave out (same syntax as --select).",
    )(fn)
    fn = click.option(
        "-s",
        "--select",
        multiple=True,
        cls=SelectorOption,
        help="Nodes: names, stg_*, path:DIR, FOLDER, source:s[.d], sink:s[.o], tag:t, resource_type:KIND, "
        "+x, x+, N+x, x+N, @x, a,b (both); several values after one flag are a union.",
    )(fn)
    return var_options(fn)


def reporter(settings: Settings) -> Callable[[JsonObject], None]:
    """What prints a run's events: JSON lines, the live display on a terminal, or the text lines."""
    from pipelinez.cli.render import JsonReporter, TextReporter

    if settings.log_format == "json":
        return JsonReporter()
    if sys.stdout.isatty():
        from pipelinez.cli.progress import ProgressReporter

        return ProgressReporter(quiet=settings.quiet, color=settings.color)
    return TextReporter(quiet=settings.quiet)


def report_run_error(settings: Settings, run_id: str, err: NodeError, log_file: Path | None) -> None:
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


def echo_json(event: str, **fields: Any) -> None:
    click.echo(json.dumps({"event": event, "ts": utc_now(), **fields}, default=str))
