"""The `pz` command line: the group and its global flags, and the wiring of every command. Each command
lives in the module of its concern (`commands_*.py`), parses flags, calls one `pipelinez.api` method,
renders and exits; `common.py` holds what they share.

Exit codes: 0 everything ran (warnings allowed); 1 a node failed; 2 refused before any node ran.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from pipelinez import __version__
from pipelinez.cli import interrupts
from pipelinez.cli.lazy_group import LazyPzGroup

EXIT_FAILED = 1  # as cli.common.EXIT_FAILED, which this module does not import before a command runs

# Each command: (its module in pipelinez.cli, its name there). The module is imported when the command is
# looked up (`lazy_group`), so `pz --version` and one command's run import only what they use. A new command
# is one line here; `cli.add_command(command)` also works, but imports the command's module with this one
# (tests/functional/test_startup_budget.py counts the modules `pz --version` imports).
COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("commands_project", "init"),
    "validate": ("commands_inspect", "validate"),
    "plan": ("commands_inspect", "plan"),
    "ls": ("commands_inspect", "ls"),
    "compile": ("commands_inspect", "compile_"),
    "show": ("commands_inspect", "show"),
    "run": ("commands_run", "run"),
    "build": ("commands_run", "build"),
    "test": ("commands_run", "test"),
    "retry": ("commands_run", "retry"),
    "runs": ("commands_project", "runs"),
    "clean": ("commands_project", "clean"),
    "restore": ("commands_project", "restore"),
    "schema": ("commands_project", "schema"),
    "lineage": ("commands_inspect", "lineage"),
    "docs": ("commands_docs", "docs"),
    "state": ("commands_state", "state"),
}


def _loader(module: str, attr: str) -> Callable[[], click.Command]:
    def load() -> click.Command:
        command = getattr(importlib.import_module(f"pipelinez.cli.{module}"), attr)
        assert isinstance(command, click.Command)
        return command

    return load


def _import_group() -> click.Command:
    """`pz import dbt`: takes the shared error handling."""
    from pipelinez.cli.common import guarded
    from pipelinez.cli.import_cmd import import_group

    return import_group(guarded)


_LAZY: dict[str, Callable[[], click.Command]] = {name: _loader(*where) for name, where in COMMANDS.items()}
_LAZY["import"] = _import_group


@click.group(name="pz", cls=LazyPzGroup, lazy=_LAZY, context_settings={"help_option_names": ["-h", "--help"]})
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
    from pipelinez.cli.common import Settings

    ctx.obj = Settings(project, log_format, not no_color, quiet)


def __getattr__(name: str) -> Any:
    if name == "_secret_free":  # tests mask a crash log through it
        from pipelinez.cli.common import _secret_free

        return _secret_free
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
