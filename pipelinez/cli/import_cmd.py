"""`pz import dbt DBT_PROJECT_DIR [--out DIR] [--target T]`.

cli/main.py registers it with `cli.add_command(import_group(guarded))`: the command takes the shared error
handling (`cli.common.guarded`) as an argument.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from pipelinez.cli.common import Settings

Command = Callable[..., Any]


def import_group(guarded: Callable[[Command], Command]) -> click.Group:
    """The `pz import` group with its `dbt` command."""

    @click.group(name="import")
    def group() -> None:
        """Write a pz project from another tool's project."""

    @group.command(name="dbt")
    @click.argument("project_dir", type=click.Path(path_type=Path, file_okay=False))
    @click.option(
        "--out",
        type=click.Path(path_type=Path, file_okay=False),
        default=None,
        help="Folder to write (default: <DBT_PROJECT_DIR>-pz beside it).",
    )
    @click.option("--target", default=None, help="profiles.yml target (default: the profile's target).")
    @click.pass_obj
    @guarded
    def dbt(settings: Settings, project_dir: Path, out: Path | None, target: str | None) -> None:
        """Import a dbt project: seeds, sources, models, tests, macros; writes import-report.md."""
        from pipelinez.api import import_dbt

        result = import_dbt(project_dir, out=out, target=target)
        settings.emit_diagnostics(result.warnings)
        click.echo(result.summary)

    return group
