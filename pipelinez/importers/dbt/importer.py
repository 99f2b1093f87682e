"""`pz import dbt`: the steps in order, then one deterministic write."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelinez.core.diagnostics import Diagnostic, PzError, warning
from pipelinez.core.json_types import JsonObject
from pipelinez.importers.dbt.context import NAME, SINK, Context
from pipelinez.importers.dbt.jinja_text import rewrite, unresolved
from pipelinez.importers.dbt.macros import read_macros
from pipelinez.importers.dbt.models import import_models
from pipelinez.importers.dbt.naming import SchemaNamer
from pipelinez.importers.dbt.profiles import default_environ, read_target
from pipelinez.importers.dbt.project import read_project
from pipelinez.importers.dbt.report import Report
from pipelinez.importers.dbt.schema_files import read_properties
from pipelinez.importers.dbt.seeds_sources import import_seeds, import_sources, write_seed_source
from pipelinez.importers.dbt.writer import check_out, write_files
from pipelinez.importers.dbt.yamlio import dump_yaml, read_text


@dataclass(frozen=True)
class ImportResult:
    out: Path
    files: list[str]
    report: Report
    warnings: list[Diagnostic]
    summary: str


def import_dbt(
    source: Path, out: Path | None = None, target: str | None = None, environ: dict[str, str] | None = None
) -> ImportResult:
    """Import the dbt project at `source` into `out` (default: `<source>-pz` beside it). Raises PzError
    with every error found (nothing is written then); warnings come back in the result."""
    root = source.resolve()
    out = (out or root.parent / f"{root.name}-pz").resolve()
    project = read_project(root)
    check_out(out)
    active = read_target(root, project.profile, target, environ or default_environ())
    props = read_properties(root, [*project.model_paths, *project.seed_paths])
    macros = read_macros(root, project.macro_paths, active.type)
    report = Report()
    ctx = Context(
        project, active, props, SchemaNamer(active, macros.schema_macro), report, frozenset(macros.names)
    )
    data: dict[str, bytes] = {}
    ctx.env.update(active.env)
    seeds = import_seeds(ctx, data)
    import_sources(ctx, seeds)
    write_seed_source(ctx)
    import_models(ctx)
    _macros(ctx, macros.files, macros.notes)
    _singular_tests(ctx)
    _docs(ctx, data)
    _skipped_folders(ctx)
    report.approximated += active.notes + ctx.namer.failures
    errors = [d for d in ctx.errors if d.is_error]
    if errors:
        raise PzError(errors)
    folders = ctx.files.pop("__folders__")
    ctx.files["project.yml"] = _project_yml(ctx, folders)
    ctx.files[f"sinks/{SINK}.yml"] = _sink(ctx)
    ctx.files["import-report.md"] = report.markdown(project.name, active.name)
    data.update({rel: text.encode("utf-8") for rel, text in ctx.files.items()})
    write_files(out, data)
    report.diagnostics = [d for d in ctx.errors if not d.is_error]
    if report.skipped:
        message = f"{len(report.skipped)} dbt constructs were not imported; the report lists each one"
        report.diagnostics.append(warning("PZ0148", message, file=f"{out.name}/import-report.md"))
    return ImportResult(out, sorted(data), report, report.diagnostics, report.summary(str(out)))


def _project_yml(ctx: Context, folders: str) -> str:
    data: JsonObject = {"name": ctx.project.name if NAME.match(ctx.project.name) else "imported"}
    variables = _vars(ctx)
    if variables:
        data["vars"] = variables
    if ctx.env:
        data["env"] = {k: ctx.env[k] or None for k in sorted(ctx.env)}
    text = dump_yaml(data)
    return text + "pipelines:\n" + "".join("  " + line + "\n" for line in folders.splitlines())


def _var_type(value: Any) -> str | None:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "bigint"
    if isinstance(value, float):
        return "decimal"
    if isinstance(value, dt.datetime):
        return "timestamp"
    if isinstance(value, dt.date):
        return "date"
    if isinstance(value, str):
        return "string"
    return None


def _vars(ctx: Context) -> JsonObject:
    found: JsonObject = {}
    for name, value in sorted(ctx.project.vars.items()):
        kind = _var_type(value)
        if not NAME.match(str(name)) or kind is None:
            ctx.report.skipped.append(f"var `{name}` (not a pz name, or a list/mapping value)")
            continue
        default = value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value
        default = default.isoformat() if isinstance(default, dt.date) else default
        found[str(name)] = {"type": kind, "default": default}
        ctx.report.converted.append(f"var {name} → vars.{name} ({kind})")
    return found


def _sink(ctx: Context) -> str:
    spec: JsonObject = {"connector": ctx.target.type, "connection": dict(ctx.target.connection)}
    if any(ctx.outputs.values()):
        spec["outputs"] = {name: ctx.outputs[name] for name in sorted(ctx.outputs) if ctx.outputs[name]}
    ctx.report.converted.append(f"target {ctx.target.name} ({ctx.target.type}) → sinks/{SINK}.yml")
    return dump_yaml(spec)


def _macros(ctx: Context, files: dict[str, str], notes: list[str]) -> None:
    for rel, text in sorted(files.items()):
        text = rewrite(text)
        for item in unresolved(text, ctx.macro_names):
            ctx.report.needs_person.append(
                f"{rel}:{item.line}: macro code calls {item.macro}, which pz has no equivalent for"
            )
        ctx.files[rel] = text
        ctx.report.converted.append(f"macros → {rel}")
    ctx.report.approximated += notes


def _singular_tests(ctx: Context) -> None:
    for folder in ctx.project.test_paths:
        base = ctx.project.root / folder
        for path in sorted(base.rglob("*.sql")) if base.is_dir() else []:
            rel = path.relative_to(ctx.project.root).as_posix()
            text = rewrite(read_text(path))
            missing = unresolved(text, ctx.macro_names)
            if missing:
                calls = ", ".join(m.macro for m in missing)
                ctx.report.skipped.append(f"singular test {rel} (calls {calls})")
                continue
            ctx.files["tests/" + path.relative_to(base).as_posix()] = text
            ctx.report.converted.append(f"singular test {rel} → tests/{path.relative_to(base).as_posix()}")
        for path in sorted(base.rglob("*.yml")) if base.is_dir() else []:
            ctx.report.skipped.append(
                f"generic test definitions or properties in {path.relative_to(ctx.project.root)}"
            )


def _docs(ctx: Context, data: dict[str, bytes]) -> None:
    for folder in ctx.project.docs_paths or ctx.project.model_paths:
        base = ctx.project.root / folder
        for path in sorted(base.rglob("*.md")) if base.is_dir() else []:
            text = read_text(path)
            if "{% docs" in text or "{%- docs" in text:
                ctx.files["docs/" + path.relative_to(base).as_posix()] = text
                ctx.report.converted.append(f"doc blocks {path.relative_to(ctx.project.root)} → docs/")


def _skipped_folders(ctx: Context) -> None:
    for label, folders in (
        ("snapshot", ctx.project.snapshot_paths),
        ("analysis", ctx.project.analysis_paths),
    ):
        for folder in folders:
            base = ctx.project.root / folder
            for path in sorted(base.rglob("*.sql")) if base.is_dir() else []:
                ctx.report.skipped.append(f"{label} {path.relative_to(ctx.project.root)}")
    ctx.report.skipped += ctx.props.skipped
    ctx.report.skipped += [f"{hook} hook in dbt_project.yml" for hook in ctx.project.hooks]
    ctx.report.skipped += [f"dbt_project.yml `{key}`" for key in ctx.project.unused_keys]
    ctx.report.skipped += [
        f"models: config of package `{name}` in dbt_project.yml" for name in ctx.project.other_trees
    ]
