"""`pz state show` and `pz state migrate --to <backend>`: where the project's state lives
(docs/deploying.md)."""

from __future__ import annotations

import json

import click

from pipelinez.cli.common import Settings, guarded
from pipelinez.cli.render import runs_lines
from pipelinez.cli.usage import PzGroup
from pipelinez.engine.events import utc_now


@click.group(cls=PzGroup)
def state() -> None:
    """Where pz remembers things between runs: watermarks, run history, the project lock."""


@state.command("show")
@click.option("--runs", "last_runs", type=click.IntRange(min=1), default=5, show_default=True)
@click.pass_obj
@guarded
def state_show(settings: Settings, last_runs: int) -> None:
    """Where state lives, the committed watermarks, the last runs and the lock holder."""
    from pipelinez.api import Project

    report = Project(settings.project).state(runs=last_runs)
    if settings.log_format == "json":
        data = {
            "event": "state",
            "ts": utc_now(),
            "backend": report.backend,
            "where": report.where,
            "watermarks": [w.__dict__ for w in report.watermarks],
            "runs": [r.run_id for r in report.runs],
            "lock": report.lock,
        }
        click.echo(json.dumps(data))
        return
    click.echo(f"state: {report.where}")
    click.echo(f"lock: {report.lock or 'free'}")
    click.echo("watermarks:" if report.watermarks else "watermarks: none committed")
    for w in report.watermarks:
        click.echo(f"  {w.source}.{w.dataset}: {w.column} = {w.value} (run {w.run_id})")
    click.echo("runs:")
    for line in runs_lines(report.runs):
        click.echo(f"  {line}")


@state.command("migrate")
@click.option(
    "--to", "to", required=True, metavar="BACKEND", help="The backend state: names (postgres, s3, azureblob)."
)
@click.pass_obj
@guarded
def state_migrate(settings: Settings, to: str) -> None:
    """Copy the local .pz/ state (watermarks, run history) into the shared backend; idempotent."""
    from pipelinez.api import Project

    done = Project(settings.project).migrate_state(to)
    if settings.log_format == "json":
        data = {
            "event": "state_migrate",
            "ts": utc_now(),
            "backend": done.backend,
            "watermarks": done.watermarks,
            "runs": done.runs,
        }
        click.echo(json.dumps(data))
        return
    click.echo(
        f"migrated to {done.where}: {done.watermarks} watermark(s), {len(done.runs)} run(s) "
        f"({done.present} already there)"
    )
