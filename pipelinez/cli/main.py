"""The `pz` command line: the group and its global flags, and the wiring of every command. Each command
lives in the module of its concern (`commands_*.py`), parses flags, calls one `pipelinez.api` method,
renders and exits; `common.py` holds what they share.

Exit codes: 0 everything ran (warnings allowed); 1 a node failed; 2 refused before any node ran.
"""

from __future__ import annotations

from pathlib import Path

import click

from pipelinez import __version__
from pipelinez.cli import (
    commands_docs,
    commands_inspect,
    commands_project,
    commands_run,
    commands_state,
    interrupts,
)
from pipelinez.cli.common import EXIT_FAILED, Settings, guarded
from pipelinez.cli.common import _secret_free as _secret_free  # tests mask a crash log through it
from pipelinez.cli.import_cmd import import_group
from pipelinez.cli.usage import PzGroup


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


COMMANDS: tuple[click.Command, ...] = (
    commands_project.init,
    commands_inspect.validate,
    commands_inspect.plan,
    commands_inspect.ls,
    commands_inspect.compile_,
    commands_inspect.show,
    commands_run.run,
    commands_run.build,
    commands_run.test,
    commands_run.retry,
    commands_project.runs,
    commands_project.clean,
    commands_project.restore,
    commands_project.schema,
    commands_inspect.lineage,
    commands_docs.docs,
    commands_state.state,
)
for _command in COMMANDS:
    cli.add_command(_command)
cli.add_command(import_group(guarded))  # `pz import dbt`: takes the shared error handling


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
