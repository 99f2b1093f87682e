"""models/ → pipelines/: config() blocks to settings, materializations to folder config, sidecars with
descriptions and tests, package calls to pz helpers or compiled SQL, incremental models to watermark reads."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelinez.core.diagnostics import error, warning
from pipelinez.core.json_types import JsonObject
from pipelinez.importers.dbt import compiled, incremental
from pipelinez.importers.dbt.context import NAME, SINK, Context
from pipelinez.importers.dbt.jinja_text import Unresolved, extract_configs, rewrite, unresolved
from pipelinez.importers.dbt.profiles import env_calls
from pipelinez.importers.dbt.project import effective_config, folder_keys, level_config, merge_config
from pipelinez.importers.dbt.schema_files import columns_of, description, tests_of
from pipelinez.importers.dbt.tests_map import column_test, model_test
from pipelinez.importers.dbt.yamlio import dump_yaml, mapping, read_text


@dataclass
class ModelPlan:
    """One model as read: where it goes, its SQL without config() blocks, its merged config."""

    name: str
    rel: str  # the dbt file, relative to the dbt project
    out: str  # the pipeline file, relative to the pz project
    text: str
    cfg: JsonObject
    folder_cfg: JsonObject  # what the folders alone configure
    materialized: str
    props: JsonObject  # from the properties files
    schema: str
    identifier: str
    original: str


_PROPERTIES = {"name", "description", "columns", "tests", "data_tests", "config", "docs", "meta", "_file"}
_PZ_MATERIALIZED = {"table": "table", "view": "view", "ephemeral": "ephemeral", "incremental": "table"}


def model_files(ctx: Context) -> list[tuple[Path, Path]]:
    """(model-path folder, file) of every model file, .sql and .py."""
    found = []
    for folder in ctx.project.model_paths:
        base = ctx.project.root / folder
        for path in sorted(base.rglob("*")) if base.is_dir() else []:
            if path.suffix in (".sql", ".py") and not _hidden(path.relative_to(base)):
                found.append((base, path))
    return found


def _hidden(rel: Path) -> bool:
    return any(part.startswith(".") for part in rel.parts)


def folder_config(ctx: Context, folders: set[tuple[str, ...]]) -> JsonObject:
    """project.yml `pipelines:`: "." carries the project-level materialization and the warehouse sink."""
    tree = ctx.project.models_tree
    root = level_config(tree)
    config: JsonObject = {".": _pz_folder(root, default="view")}
    config["."]["sink"] = SINK
    for parts in folder_keys(tree):
        if parts not in folders:
            continue
        entry = _pz_folder(effective_config(tree, list(parts)) | {}, default=None, own=_own(tree, parts))
        if entry:
            config["/".join(parts)] = entry
    return config


def _own(tree: JsonObject, parts: tuple[str, ...]) -> JsonObject:
    node = tree
    for part in parts:
        node = mapping(node.get(part))
    return level_config(node)


def _pz_folder(cfg: JsonObject, default: str | None, own: JsonObject | None = None) -> JsonObject:
    own = cfg if own is None else own
    entry: JsonObject = {}
    materialized = own.get("materialized", default)
    if materialized in _PZ_MATERIALIZED:
        entry["materialized"] = _PZ_MATERIALIZED[str(materialized)]
    if own.get("tags"):
        tags = [own["tags"]] if isinstance(own["tags"], str) else list(own["tags"])
        entry["tags"] = tags
    return entry


def import_models(ctx: Context) -> None:
    files = model_files(ctx)
    folders = {path.relative_to(base).parent.parts for base, path in files}
    folders = {f[:i] for f in folders for i in range(1, len(f) + 1)}
    ctx.files["__folders__"] = dump_yaml(folder_config(ctx, folders))
    plans = []
    for base, path in files:
        rel = path.relative_to(ctx.project.root).as_posix()
        if path.suffix == ".py":
            ctx.report.skipped.append(f"Python model {rel}")
            continue
        if not NAME.match(path.stem):
            ctx.errors.append(error("PZ0147", f"model '{path.stem}' is not a pz name", file=rel))
            continue
        plans.append(_plan(ctx, base, path, rel))
    for plan in plans:
        if plan is not None:
            ctx.relations[ctx.relation(plan.schema, plan.identifier)] = "{{ ref('" + plan.name + "') }}"
    ctx.in_warehouse = set(ctx.pipelines) | {
        p.name for p in plans if p is not None and p.materialized != "ephemeral"
    }
    for plan in plans:
        if plan is not None:
            for read in incremental.sources_read(plan.text):
                ctx.source_readers.setdefault(read, set()).add(plan.name)
            for ref in incremental.refs(plan.text):
                ctx.ref_readers.setdefault(ref, set()).add(plan.name)
    for plan in plans:
        if plan is not None:
            _write(ctx, plan)


def _plan(ctx: Context, base: Path, path: Path, rel: str) -> ModelPlan | None:
    name = path.stem
    parts = list(path.relative_to(base).parent.parts)
    props = ctx.props.models.get(name, {})
    text, file_config, problems = extract_configs(read_text(path))
    for line, reason in problems:
        ctx.errors.append(
            error("PZ0146", f"model '{name}': config() cannot be read: {reason}", file=rel, line=line)
        )
    folder_cfg = effective_config(ctx.project.models_tree, parts)
    cfg = merge_config(
        effective_config(ctx.project.models_tree, [*parts, name]), mapping(props.get("config"))
    )
    cfg = merge_config(cfg, file_config)
    if cfg.get("enabled", True) is False:
        ctx.report.skipped.append(f"disabled model {rel}")
        return None
    materialized = str(cfg.get("materialized") or "view")
    if materialized not in _PZ_MATERIALIZED:
        ctx.report.needs_person.append(f"model {name}: materialization `{materialized}` imported as a table")
        materialized = "table"
    schema = ctx.namer.schema(cfg.get("schema"), "model", name)
    for key in sorted(
        set(cfg) - {"materialized", "schema", "alias", "tags", "enabled", "unique_key", "docs"}
    ):
        ctx.report.skipped.append(f"model {name}: config `{key}` is not imported")
    for key in sorted(set(props) - _PROPERTIES):
        ctx.report.skipped.append(f"model {name}: property `{key}` ({props['_file']}) is not imported")
    return ModelPlan(
        name=name,
        rel=rel,
        out="pipelines/" + path.relative_to(base).as_posix(),
        text=text,
        cfg=cfg,
        folder_cfg=folder_cfg,
        materialized=materialized,
        props=props,
        schema=schema,
        identifier=str(cfg.get("alias") or name),
        original=path.relative_to(ctx.project.root).as_posix(),
    )


def _write(ctx: Context, plan: ModelPlan) -> None:
    name, rel, text = plan.name, plan.rel, rewrite(plan.text)
    if name in ctx.pipelines:
        message = f"model '{name}' becomes a pipeline another model or seed of that name already is"
        ctx.errors.append(error("PZ0147", message, file=rel))
        return
    strategy: JsonObject = {}
    if plan.materialized == "incremental":
        text, strategy = _incremental(ctx, plan, text)
    missing = unresolved(text, ctx.macro_names)
    if missing:
        fallback = _compiled_fallback(ctx, plan, missing)
        if fallback is None:
            return
        text = fallback
    for var, default in env_calls(plan.text):
        ctx.env.setdefault(var, {} if default is not None else {"required": True})
    ctx.files[plan.out] = tidy(text)
    ctx.pipelines.add(name)
    sidecar = _sidecar(ctx, plan)
    if sidecar:
        ctx.files[plan.out[:-4] + ".yml"] = dump_yaml(sidecar)
    if plan.materialized == "view":
        strategy = _view_strategy(ctx, name, text)
    if plan.materialized != "ephemeral":
        output: JsonObject = {}
        table = ctx.table_name(plan.schema, plan.identifier, name)
        if table:
            output["table"] = table
        ctx.outputs[name] = {**output, **strategy}
    ctx.report.converted.append(f"model {name} ({plan.materialized}) → {plan.out}")


def _compiled_fallback(ctx: Context, plan: ModelPlan, missing: list[Unresolved]) -> str | None:
    """dbt's compiled SQL of the model, or None (and PZ0144 per call) when there is none."""
    path = compiled.compiled_path(ctx.project.root, ctx.project.target_path, ctx.project.name, plan.original)
    relations = {k: v for k, v in ctx.relations.items() if v != "{{ ref('" + plan.name + "') }}"}
    fallback = compiled.read_compiled(path, relations)
    if fallback is None:
        missing_file = path.relative_to(ctx.project.root)
        for item in missing:
            message = (
                f"model '{plan.name}' calls {item.macro}, which pz cannot render; {missing_file} is missing"
            )
            ctx.errors.append(
                error("PZ0144", message, file=plan.rel, line=item.line, next_step="run dbt compile first")
            )
        return None
    calls = ", ".join(sorted({m.macro for m in missing}))
    ctx.report.approximated.append(f"model {plan.name}: rendered from dbt's compiled SQL (it calls {calls})")
    if compiled.mentions(fallback, ctx.relation(plan.schema, plan.identifier)):
        ctx.report.needs_person.append(
            f"model {plan.name}: its compiled SQL reads the model's own table (dbt compiled an incremental "
            "run); compile against an empty target, or write the filter as a watermark() read"
        )
    return fallback


def _view_strategy(ctx: Context, name: str, text: str) -> JsonObject:
    """A view model is a view in staging; in the warehouse a view too when everything it reads lives there
    (dbt_syntax.md item 5: `strategy: view` reads only the sink's own tables and views), else a table."""
    outside = sorted(set(incremental.refs(text)) - ctx.in_warehouse)
    reads_source = bool(incremental.sources_read(text))
    if not outside and not reads_source and incremental.refs(text):
        return {"strategy": "view"}
    why = "source()" if reads_source else ", ".join(outside) or "no ref()"
    ctx.report.approximated.append(
        f"model {name}: a view in dbt; a view in staging and a table in the warehouse, since it reads {why},"
        " which the warehouse does not hold"
    )
    return {}


def tidy(text: str) -> str:
    """The SQL without the blank lines left where config() blocks were: no leading ones, at most one in a
    row."""
    return re.sub(r"\n[ \t]*\n([ \t]*\n)+", "\n\n", text.lstrip("\n").rstrip()) + "\n"


def _incremental(ctx: Context, plan: ModelPlan, text: str) -> tuple[str, JsonObject]:
    others = {
        read: sorted(names - {plan.name}) for read, names in ctx.source_readers.items() if names - {plan.name}
    }
    readers = sorted(ctx.ref_readers.get(plan.name, set()) - {plan.name})
    result = incremental.convert(text, ctx.cursor_types, others, readers)
    keys = plan.cfg.get("unique_key")
    keys = [keys] if isinstance(keys, str) else list(keys or [])
    if result.watermark is None:
        ctx.errors.append(
            warning(
                "PZ0145",
                f"incremental model '{plan.name}' is imported as a full rebuild: {result.reason}",
                file=plan.rel,
            )
        )
        ctx.report.needs_person.append(
            f"model {plan.name}: incremental imported as a full rebuild ({result.reason})"
        )
        return result.text, {}
    ctx.report.converted.append(
        f"model {plan.name}: is_incremental() filter → watermark('{result.watermark[0]}', "
        f"'{result.watermark[1]}')"
    )
    if keys:
        return result.text, {"strategy": "merge", "keys": keys}
    return result.text, {"strategy": "append", "duplicates": "accept"}


def _sidecar(ctx: Context, plan: ModelPlan) -> JsonObject:
    props, cfg, folder_cfg = plan.props, plan.cfg, plan.folder_cfg
    sidecar: JsonObject = {}
    if description(props):
        sidecar["description"] = description(props)
    mine = _PZ_MATERIALIZED[plan.materialized]
    if mine != _PZ_MATERIALIZED.get(str(folder_cfg.get("materialized") or "view")):
        sidecar["materialized"] = mine
    tags = [t for t in cfg.get("tags", []) if t not in folder_cfg.get("tags", [])]
    if tags:
        sidecar["tags"] = tags
    where = f"{props.get('_file', plan.rel)}: model {plan.name}"
    columns: JsonObject = {}
    data_tests: list[Any] = []
    for column in columns_of(props):
        col = str(column["name"])
        entry: JsonObject = {}
        if description(column):
            entry["description"] = description(column)
        spelled = []
        for test in tests_of(column):
            own, model_level = column_test(test, col, where, ctx.report.skipped)
            if own is not None:
                spelled.append(own)
            if model_level is not None:
                data_tests.append(model_level)
        if spelled:
            entry["tests"] = spelled
        if entry:
            columns[col] = entry
    for test in tests_of(props):
        converted = model_test(test, where, ctx.report.skipped)
        if converted is not None:
            data_tests.append(converted)
    if plan.materialized == "ephemeral" and (columns or data_tests):
        ctx.report.skipped.append(f"{where}: tests of an ephemeral model (pz checks need a table)")
        columns = {k: {"description": v["description"]} for k, v in columns.items() if "description" in v}
        data_tests = []
    if columns:
        sidecar["columns"] = columns
    if data_tests:
        sidecar["data_tests"] = data_tests
    return sidecar
