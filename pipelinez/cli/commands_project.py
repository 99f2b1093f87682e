"""The commands that set up and look after a project: `pz init`, `pz runs`, `pz clean`, `pz restore`,
`pz schema`."""

from __future__ import annotations

import json
from pathlib import Path

import click

from pipelinez.cli.common import Settings, guarded, utc_now
from pipelinez.core.diagnostics import warning


@click.command()
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False), default=".")
@click.option("--force", is_flag=True, help="Write into a non-empty folder.")
@click.pass_obj
@guarded
def init(settings: Settings, directory: Path, force: bool) -> None:
    """Write a small runnable project (local files in, a DuckDB file and a Parquet folder out)."""
    from pipelinez.api import init_project

    written = init_project(directory, force=force)
    click.echo(f"wrote {len(written)} files to {directory}; run: pz run -p {directory}")


@click.command()
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


@click.command()
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


@click.command()
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


@click.command()
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
