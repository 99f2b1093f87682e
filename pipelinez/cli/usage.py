"""Command-line usage errors as PZ0513 diagnostics, and the commands that are not built yet.

Click prints its own "Usage: … Error: …" text for a malformed command line; pz turns every such error into
one PZ0513 diagnostic with the command line as its place (JSON under `--log-format json`, wherever the flag
stands), exit 2.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from pipelinez.core.diagnostics import Diagnostic

EXIT_REFUSED = 2
COMMAND_LINE = "command line"

# Commands the reference names that this version does not ship: `pz <name>` says so (PZ0524) instead of
# "No such command". A real command registered under the same name wins; to ship one, delete its entry.
NOT_BUILT: dict[str, str] = {}


def log_format_of(argv: Sequence[str]) -> str:
    """The --log-format the user asked for, wherever it stands on the command line (text by default)."""
    fmt = "text"
    args = list(argv)
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--log-format" and i + 1 < len(args):
            fmt = args[i + 1]
        elif arg.startswith("--log-format="):
            fmt = arg.split("=", 1)[1]
    return "json" if fmt == "json" else "text"


_PLAIN_WORDS = (
    (re.compile(r"is not in the range x>=(\d+)"), r"must be \1 or more"),
    (re.compile(r"is not in the range x<=(\d+)"), r"must be \1 or less"),
    (re.compile(r"is not a valid integer( range)?"), "is not a whole number"),
)


def usage_diagnostic(
    exc: click.ClickException, argv: Sequence[str] = (), commands: Sequence[str] = ()
) -> Diagnostic:
    from pipelinez.core.diagnostics import error

    ctx = getattr(exc, "ctx", None)
    command = ctx.command_path if ctx is not None else "pz"
    if ctx is None:  # errors click raises before it knows the command: name it from the command line
        command = next((f"pz {a}" for a in argv if a in commands), command)
    message = " ".join(exc.format_message().split()).rstrip(".")
    for pattern, plain in _PLAIN_WORDS:
        message = pattern.sub(plain, message)
    if message[1:2].islower():
        message = message[:1].lower() + message[1:]
    return error(
        "PZ0513",
        f"{command}: {message}",
        file=COMMAND_LINE,
        next_step=f"see `{command} --help`",
    )


def emit(diags: Sequence[Diagnostic], log_format: str) -> None:
    """Print diagnostics the way every other pz refusal prints them."""
    from pipelinez.cli.render import diagnostics_report

    if log_format == "json":
        from pipelinez.cli.common import utc_now

        for d in diags:
            click.echo(json.dumps({"event": d.severity, "ts": utc_now(), **d.to_dict()}))
        return
    for line in diagnostics_report(diags):
        click.echo(line)


def _not_built(name: str) -> click.Command:
    def callback(**_kwargs: Any) -> None:
        from pipelinez.core.diagnostics import error

        ctx = click.get_current_context()
        settings = ctx.obj
        emit(
            [
                error(
                    "PZ0524",
                    NOT_BUILT[name],
                    file=COMMAND_LINE,
                    next_step="run `pz run` to run the project again; `pz --help` lists the commands "
                    "this version has",
                )
            ],
            getattr(settings, "log_format", "text"),
        )
        sys.exit(EXIT_REFUSED)

    return click.Command(
        name,
        callback=callback,
        hidden=True,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        add_help_option=False,
    )


class PzGroup(click.Group):
    """The `pz` group: usage errors become PZ0513 diagnostics; not-built commands say so."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = self.find_command(ctx, cmd_name)
        if command is None and cmd_name in NOT_BUILT:
            return _not_built(cmd_name)
        return command

    def find_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The registered command of that name (a subclass may import it here)."""
        return super().get_command(ctx, cmd_name)

    def command_names(self) -> list[str]:
        return list(self.commands)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        try:
            rv = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except click.ClickException as exc:
            ctx = getattr(exc, "ctx", None)
            if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:  # bare `pz`: its help
                click.echo(ctx.get_help())
                sys.exit(0)
            emit([usage_diagnostic(exc, argv, self.command_names())], log_format_of(argv))
            sys.exit(EXIT_REFUSED)
        except click.exceptions.Abort:
            sys.exit(1)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)
