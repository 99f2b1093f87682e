"""The commands that read the project and change nothing: `pz validate`, `pz plan`, `pz ls`, `pz compile`,
`pz show` (runs a pipeline on a throwaway staging database) and `pz lineage`."""

from __future__ import annotations

import dataclasses
import gc
import json
from typing import TYPE_CHECKING

import click

from pipelinez.cli import interrupts
from pipelinez.cli.common import (
    Settings,
    echo_json,
    guarded,
    parse_vars,
    select_options,
    utc_now,
    var_options,
)

if TYPE_CHECKING:
    from pipelinez.api import ValidationReport
    from pipelinez.engine.run.validate_cache import Replayed


@click.command()
@click.option("--connect", is_flag=True, help="Also run tier 5: connection, schema drift, sink permissions.")
@var_options
@click.pass_obj
@guarded
def validate(settings: Settings, connect: bool, variables: tuple[str, ...]) -> None:
    """Run validation tiers 1-4 (5 with --connect); print every error and warning."""
    from pipelinez.engine.run.validate_cache import replay_project, walk_once

    if interrupts.in_pz_process():  # the compile's objects are never collected: the process ends with them
        gc.disable()  # (paused while they piled up, the collector would look at each once when back on)

    overrides = parse_vars(variables)
    report: ValidationReport | Replayed | None = None
    with walk_once():  # the replay here and the facade's keys below share one walk of the folder
        if not connect:  # an unchanged project, from .pz/target/, before importing what a compile needs
            report = replay_project(settings.project, overrides)
        if report is None:
            from pipelinez.api import Project

            report = Project(settings.project).validate(connect=connect, vars=overrides)  # PzValidationError
    settings.emit_diagnostics(report.warnings)
    if settings.log_format == "text" and not settings.quiet:
        click.echo(f"ok: project is valid ({report.nodes} nodes)")


@click.command()
@select_options
@click.pass_obj
@guarded
def plan(
    settings: Settings, select: tuple[str, ...], exclude: tuple[str, ...], variables: tuple[str, ...]
) -> None:
    """Validate, then print the nodes in order with tier, strategy, retry policy and guarantees."""
    from pipelinez.api import Project
    from pipelinez.cli.render import plan_lines

    overrides = parse_vars(variables)
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


_RESOURCE_TYPES = ["source", "pipeline", "check", "sink"]


@click.command("ls")
@select_options
@click.option(
    "--resource-type",
    "resource_types",
    multiple=True,
    type=click.Choice(_RESOURCE_TYPES),
    help="Only nodes of this kind (repeatable).",
)
@click.option(
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: one object a line.",
)
@click.pass_obj
@guarded
def ls(
    settings: Settings,
    select: tuple[str, ...],
    exclude: tuple[str, ...],
    variables: tuple[str, ...],
    resource_types: tuple[str, ...],
    output: str,
) -> None:
    """List the nodes the selection matches, one per line (no ancestors added back, unlike a run)."""
    from pipelinez.api import Project

    listing = Project(settings.project).ls(
        select=select, exclude=exclude, resource_types=resource_types, vars=parse_vars(variables)
    )
    settings.emit_diagnostics(listing.warnings)
    as_json = output == "json" or settings.log_format == "json"
    for node in listing.nodes:
        click.echo(json.dumps(node.to_dict()) if as_json else node.name)


@click.command("compile")
@select_options
@click.pass_obj
@guarded
def compile_(
    settings: Settings, select: tuple[str, ...], exclude: tuple[str, ...], variables: tuple[str, ...]
) -> None:
    """Print the rendered SQL of each selected pipeline (all by default): refs resolved, secrets masked."""
    from pipelinez.api import Project

    result = Project(settings.project).compile(select=select, exclude=exclude, vars=parse_vars(variables))
    settings.emit_diagnostics(result.warnings)
    for i, p in enumerate(result.pipelines):
        if settings.log_format == "json":
            echo_json("compiled", name=p.name, path=p.path, sql=p.sql)
            continue
        if i:
            click.echo("")
        click.echo(f"-- {p.name} ({p.path})")
        click.echo(p.sql.strip())


@click.command()
@click.argument("pipeline")
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True, help="Rows to show.")
@var_options
@click.pass_obj
@guarded
def show(settings: Settings, pipeline: str, limit: int, variables: tuple[str, ...]) -> None:
    """Load a pipeline's inputs into a throwaway staging database, run it, print its first rows.

    Nothing is written to sinks or to state; no run is recorded."""
    from pipelinez.api import Project
    from pipelinez.cli.render_inspect import failed_lines, print_table

    preview = Project(settings.project).show(pipeline, limit=limit, vars=parse_vars(variables))
    settings.emit_diagnostics(preview.warnings)
    if preview.failed:
        for line in failed_lines(preview.failed):
            click.echo(line, err=True)
        raise SystemExit(1)
    if settings.log_format == "json":
        rows = [dict(zip(preview.columns, row, strict=True)) for row in preview.rows]
        echo_json("show", pipeline=pipeline, columns=list(preview.columns), rows=rows)
        return
    print_table(preview.pipeline, preview.columns, preview.rows, color=settings.color)


@click.command()
@click.argument("column", metavar="PIPELINE.COLUMN")
@var_options
@click.pass_obj
@guarded
def lineage(settings: Settings, column: str, variables: tuple[str, ...]) -> None:
    """The upstream columns a pipeline column is computed from, back to source datasets, and its sinks."""
    from pipelinez.api import Project
    from pipelinez.cli.render import lineage_lines

    report = Project(settings.project).lineage(column, vars=parse_vars(variables))
    if settings.log_format == "json":
        click.echo(json.dumps({"event": "lineage", "ts": utc_now(), **dataclasses.asdict(report)}))
        return
    for line in lineage_lines(report):
        click.echo(line)
