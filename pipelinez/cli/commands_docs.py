"""`pz docs generate` and `pz docs serve`: the static site of the project."""

from __future__ import annotations

import json
from pathlib import Path

import click

from pipelinez.cli import interrupts
from pipelinez.cli.common import Settings, guarded, parse_vars, utc_now, var_options
from pipelinez.cli.usage import PzGroup


@click.group(cls=PzGroup)
def docs() -> None:
    """A static site of the project: graph, column docs and lineage, run timeline, check history."""


_OUT_HELP = "Folder of the site (default: .pz/target/docs in the project)."


@docs.command("generate")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None, help=_OUT_HELP)
@click.option(
    "--runs", "last_runs", type=click.IntRange(min=1), default=20, show_default=True, help="Runs shown."
)
@var_options
@click.pass_obj
@guarded
def docs_generate(settings: Settings, out: Path | None, last_runs: int, variables: tuple[str, ...]) -> None:
    """Write the site: one index.html plus its script and style; opens without a server or network."""
    from pipelinez.api import Project

    site = Project(settings.project).docs(out, vars=parse_vars(variables), runs=last_runs)
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
@var_options
@click.pass_obj
@guarded
def docs_serve(
    settings: Settings, out: Path | None, port: int, last_runs: int, variables: tuple[str, ...]
) -> None:
    """Generate the site, then serve it on 127.0.0.1 until Ctrl-C."""
    from pipelinez.api import Project

    project = Project(settings.project)
    site = project.docs(out, vars=parse_vars(variables), runs=last_runs)
    settings.emit_diagnostics(site.warnings)
    server = project.docs_server(site.folder, port=port)
    click.echo(f"serving {site.folder} at {server.url} (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        interrupts.reported()
    finally:
        server.shutdown()
