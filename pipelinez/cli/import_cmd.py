"""`pz import dbt DBT_PROJECT_DIR [--out DIR] [--target T]` (registered by cli/main.py)."""

from __future__ import annotations

from pathlib import Path

import click

from pipelinez.cli.main import Settings, guarded


@click.group(name="import")
def import_group() -> None:
    """Write a pz project from another tool's project."""


@import_group.command(name="dbt")
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
def import_dbt(settings: Settings, project_dir: Path, out: Path | None, target: str | None) -> None:
    """Import a dbt project: seeds, sources, models, tests, macros; writes import-report.md."""
    from pipelinez.api import import_dbt as run_import

    result = run_import(project_dir, out=out, target=target)
    settings.emit_diagnostics(result.warnings)
    click.echo(result.summary)
