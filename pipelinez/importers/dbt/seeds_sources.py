"""seeds/ → a localfiles source `seeds` (typed as dbt types them) plus one pipeline per enabled seed that
writes it to the warehouse as `dbt seed` does; dbt sources → pz sources."""

from __future__ import annotations

from pathlib import Path

from pipelinez.core.diagnostics import error
from pipelinez.core.json_types import JsonObject
from pipelinez.importers.dbt.context import NAME, Context
from pipelinez.importers.dbt.project import effective_config, merge_config
from pipelinez.importers.dbt.schema_files import columns_of, description, tests_of
from pipelinez.importers.dbt.seeds import has_null_word, seed_columns
from pipelinez.importers.dbt.tests_map import source_check
from pipelinez.importers.dbt.yamlio import dump_yaml, mapping, read_text

SEED_SOURCE = "seeds"


_SEED_KEYS = {"schema", "alias", "enabled", "column_types", "delimiter", "docs", "tags", "quote_columns"}


def import_seeds(ctx: Context, data: dict[str, bytes]) -> dict[tuple[str, str], tuple[str, JsonObject]]:
    """Write the seed source and pipelines; (schema, identifier) → (seed name, its dataset) for sources."""
    by_relation: dict[tuple[str, str], tuple[str, JsonObject]] = {}
    for folder in ctx.project.seed_paths:
        base = ctx.project.root / folder
        for path in sorted(base.rglob("*.csv")) if base.is_dir() else []:
            rel = path.relative_to(base)
            if any(part.startswith(".") for part in rel.parts):
                continue
            where = path.relative_to(ctx.project.root).as_posix()
            if not NAME.match(path.stem):
                ctx.errors.append(error("PZ0147", f"seed '{path.stem}' is not a pz name", file=where))
                continue
            data[f"seeds/{rel.as_posix()}"] = path.read_bytes()
            relation, dataset = _seed(ctx, path, rel)
            by_relation[relation] = (path.stem, dataset)
    return by_relation


def _seed(ctx: Context, path: Path, rel: Path) -> tuple[tuple[str, str], JsonObject]:
    """One seed: its dataset (typed columns), and its pipeline into the warehouse when dbt loads it."""
    name = path.stem
    props = ctx.props.seeds.get(name, {})
    tree_config = effective_config(ctx.project.seeds_tree, [*rel.parent.parts, name])
    cfg = merge_config(tree_config, mapping(props.get("config")))
    for key in sorted(set(cfg) - _SEED_KEYS):
        ctx.report.skipped.append(f"seed {name}: config `{key}` is not imported")
    text = read_text(path)
    columns = seed_columns(text, str(cfg.get("delimiter") or ","))
    columns.update({str(c): str(kind).lower() for c, kind in mapping(cfg.get("column_types")).items()})
    docs = {str(c["name"]): description(c) for c in columns_of(props)}
    dataset: JsonObject = {"path": rel.as_posix()}
    if cfg.get("delimiter"):
        dataset["delimiter"] = cfg["delimiter"]
    if description(props):
        dataset["description"] = description(props)
    dataset["columns"] = {
        c: ({"type": t, "description": docs[c]} if docs.get(c) else t) for c, t in columns.items()
    }
    ctx.seed_datasets[name] = dataset
    ctx.cursor_types[(SEED_SOURCE, name)] = dict(columns)
    if has_null_word(text):
        ctx.report.approximated.append(f"seed {name}: dbt reads the word null as NULL, pz keeps the text")
    schema = ctx.namer.schema(cfg.get("schema"), "seed", name)
    identifier = str(cfg.get("alias") or name)
    if cfg.get("enabled", True) in (False, "false") or "{{" in str(cfg.get("enabled", "")):
        ctx.report.approximated.append(
            f"seed {name}: disabled (or enabled by a var) in dbt: read as a source, not written to the "
            "warehouse"
        )
        ctx.relations[ctx.relation(schema, identifier)] = "{{ source('seeds', '" + name + "') }}"
        ctx.disabled_seeds.add(name)
    else:
        _seed_pipeline(ctx, name, schema, identifier)
    return (schema.lower(), identifier.lower()), dataset


def write_seed_source(ctx: Context) -> None:
    """sources/seeds.yml, without the disabled seeds a source reads instead."""
    datasets = {k: v for k, v in ctx.seed_datasets.items() if k not in ctx.seeds_read_by_sources}
    if datasets:
        source = {"connector": "localfiles", "connection": {"root": "seeds"}, "datasets": datasets}
        ctx.files[f"sources/{SEED_SOURCE}.yml"] = dump_yaml(source)
        ctx.report.converted.append(
            f"{len(datasets)} seeds → source `seeds` (sources/seeds.yml), typed as dbt seed types them"
        )


def _seed_pipeline(ctx: Context, name: str, schema: str, identifier: str) -> None:
    ctx.files[f"pipelines/seeds/{name}.sql"] = f"SELECT * FROM {{{{ source('{SEED_SOURCE}', '{name}') }}}}\n"
    ctx.pipelines.add(name)
    output: JsonObject = {}
    table = ctx.table_name(schema, identifier, name)
    if table:
        output["table"] = table
    ctx.outputs[name] = output
    ctx.relations[ctx.relation(schema, identifier)] = "{{ ref('" + name + "') }}"


def import_sources(ctx: Context, seeds: dict[tuple[str, str], tuple[str, JsonObject]]) -> None:
    for rel, source in ctx.props.sources:
        name = str(source["name"])
        if not NAME.match(name) or name == SEED_SOURCE:
            ctx.errors.append(
                error("PZ0147", f"source '{name}' is not a pz name or clashes with `seeds`", file=rel)
            )
            continue
        schema = str(source.get("schema") or name)
        tables = [mapping(t) for t in source.get("tables") or [] if mapping(t).get("name")]
        keyed = {str(t["name"]): (str(t.get("identifier") or t["name"]), t) for t in tables}
        from_seeds = all((schema.lower(), ident.lower()) in seeds for ident, _ in keyed.values()) and keyed
        datasets: JsonObject = {}
        for table_name, (identifier, table) in keyed.items():
            dataset = _dataset(ctx, name, schema, identifier, table, seeds if from_seeds else None, rel)
            datasets[table_name] = dataset
            ctx.relations[ctx.relation(schema, identifier)] = (
                "{{ source('" + name + "', '" + table_name + "') }}"
            )
        spec = _connection(ctx, bool(from_seeds))
        if description(source):
            ctx.report.approximated.append(
                f"source {name}: its own description is not carried (pz sources have none)"
            )
        ctx.files[f"sources/{name}.yml"] = dump_yaml({**spec, "datasets": datasets})
        how = (
            "the seed files dbt loads into those tables" if from_seeds else f"the {ctx.target.type} warehouse"
        )
        ctx.report.converted.append(
            f"source {name} ({len(datasets)} tables) → sources/{name}.yml, read from {how}"
        )


def _connection(ctx: Context, from_seeds: bool) -> JsonObject:
    if from_seeds:
        return {"connector": "localfiles", "connection": {"root": "seeds"}}
    return {"connector": ctx.target.type, "connection": dict(ctx.target.connection)}


def _dataset(
    ctx: Context,
    source: str,
    schema: str,
    identifier: str,
    table: JsonObject,
    seeds: dict[tuple[str, str], tuple[str, JsonObject]] | None,
    rel: str,
) -> JsonObject:
    dataset: JsonObject
    if seeds is not None:
        seed_name, seed_dataset = seeds[(schema.lower(), identifier.lower())]
        if seed_name in ctx.disabled_seeds:
            ctx.seeds_read_by_sources.add(seed_name)
        dataset = {k: v for k, v in seed_dataset.items() if k != "description"}
        ctx.cursor_types[(source, str(table["name"]))] = ctx.cursor_types[(SEED_SOURCE, seed_name)]
    else:
        dataset = {"table": f"{schema}.{identifier}"}
        typed = {str(c["name"]): str(c["data_type"]).lower() for c in columns_of(table) if c.get("data_type")}
        if typed and len(typed) == len(columns_of(table)):
            dataset["columns"] = typed
            ctx.cursor_types[(source, str(table["name"]))] = typed
    if description(table):
        dataset["description"] = description(table)
    checks = []
    where = f"{rel}: source {source}.{table['name']}"
    for column in columns_of(table):
        for test in tests_of(column):
            check = source_check(test, str(column["name"]), where, ctx.report.skipped)
            if check is not None:
                checks.append(check)
    if checks:
        dataset["checks"] = checks
    if table.get("loaded_at_field") or table.get("freshness"):
        ctx.report.skipped.append(f"{where}: source freshness (dbt source freshness) is not imported")
    return dataset
