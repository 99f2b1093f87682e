"""`pz import dbt` on small dbt projects shaped like dbt-labs/jaffle_shop_duckdb and dbt-labs/jaffle-shop
(tests/fixtures/dbt/). The imported files are checked as text here; the runs of imported projects that need
the dbt habits (folder config, dbt test spellings, macros, views) are in test_dbt_import_e2e.py. One run is
here already: jaffle_duckdb, bridged to today's pz syntax, compared with the tables `dbt build` made."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
from click.testing import CliRunner
from ruamel.yaml import YAML

from pipelinez.cli.main import cli
from tests.conftest import PzResult, pz

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dbt"


def pz_import(*args: str, env: dict[str, str] | None = None) -> PzResult:
    result = CliRunner().invoke(cli, ["import", "dbt", *args], env=env, catch_exceptions=False)
    return PzResult(result.exit_code, result.output, Path("."))


def imported(tmp_path: Path, fixture: str, *args: str) -> Path:
    out = tmp_path / f"{fixture}-pz"
    result = pz_import(str(FIXTURES / fixture), "--out", str(out), *args)
    assert result.exit_code == 0, result.output
    return out


def load(path: Path) -> Any:
    return YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))


def all_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def expected_types(fixture: str, name: str = "types.json") -> dict[str, list[list[str]]]:
    data: dict[str, list[list[str]]] = json.loads((FIXTURES / "expected" / fixture / name).read_text())
    return data


def compare_with_dbt(warehouse: Path, fixture: str, tables: list[str] | None = None) -> None:
    """Every table dbt built (tests/fixtures/dbt/expected/<fixture>) equals pz's: names and types of the
    columns in order, and the rows (EXCEPT ALL both ways)."""
    types = expected_types(fixture)
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        for table in tables or sorted(types):
            columns = types[table]
            described = con.sql(f'DESCRIBE main."{table}"').fetchall()
            assert [[c[0], c[1]] for c in described] == columns, table
            spec = "{" + ", ".join(f"'{n}': '{t}'" for n, t in columns) + "}"
            csv = FIXTURES / "expected" / fixture / f"{table}.csv"
            want = f"(SELECT * FROM read_csv('{csv}', header = true, columns = {spec}))"
            have = f'(SELECT * FROM main."{table}")'
            for first, second in ((want, have), (have, want)):
                query = f"SELECT count(*) FROM (SELECT * FROM {first} EXCEPT ALL SELECT * FROM {second})"
                missing = con.sql(query).fetchone()
                assert missing == (0,), f"{table}: {missing} rows differ"
    finally:
        con.close()


# --- jaffle_shop_duckdb shape ----------------------------------------------------------------------------


def test_jaffle_duckdb_imports_into_a_pz_project(tmp_path: Path) -> None:
    out = tmp_path / "shop"
    result = pz_import(str(FIXTURES / "jaffle_duckdb"), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "imported into" in result.output and "import-report.md" in result.output
    project = load(out / "project.yml")
    assert project["name"] == "jaffle_shop"
    assert project["pipelines"] == {
        ".": {"materialized": "table", "sink": "warehouse"},
        "staging": {"materialized": "view"},
    }
    sink = load(out / "sinks" / "warehouse.yml")
    assert sink["connector"] == "duckdb" and sink["connection"] == {"path": "jaffle_shop.duckdb"}
    # the staging views read the seeds, which the warehouse holds: views there too, as dbt makes them
    view = {"strategy": "view"}
    assert sink["outputs"] == {"stg_customers": view, "stg_orders": view, "stg_payments": view}
    for name in ("customers", "orders", "staging/stg_orders", "seeds/raw_orders"):
        assert (out / "pipelines" / f"{name}.sql").is_file()
    assert (out / "seeds" / "raw_orders.csv").read_bytes() == (
        FIXTURES / "jaffle_duckdb" / "seeds" / "raw_orders.csv"
    ).read_bytes()
    assert "{% docs orders_status %}" in (out / "docs" / "docs.md").read_text()
    orders = load(out / "pipelines" / "orders.yml")
    assert orders["columns"]["status"]["description"] == "{{ doc('orders_status') }}"
    assert orders["columns"]["customer_id"]["tests"] == [
        "not_null",
        {"relationships": {"to": "ref('customers')", "field": "customer_id"}},
    ]
    assert "materialized" not in orders  # the folder config says it
    stg = load(out / "pipelines" / "staging" / "stg_orders.yml")
    assert stg["columns"]["status"]["tests"][0]["accepted_values"]["values"][0] == "placed"


def test_seeds_are_typed_as_dbt_seed_types_them(tmp_path: Path) -> None:
    """INTEGER where DuckDB's CSV reader would say BIGINT, DOUBLE for decimals, TIMESTAMP for ISO times."""
    duck = load(imported(tmp_path, "jaffle_duckdb") / "sources" / "seeds.yml")["datasets"]
    for table, columns in expected_types("jaffle_duckdb").items():
        if table.startswith("raw_"):
            got = [[name, kind.upper()] for name, kind in duck[table]["columns"].items()]
            assert got == columns, table
    shop = load(imported(tmp_path, "jaffle_shop") / "sources" / "ecom.yml")["datasets"]
    for table, columns in expected_types("jaffle_shop", "seed_types.json").items():
        got = [[name, kind.upper()] for name, kind in shop[table]["columns"].items()]
        assert got == columns, table


def test_import_is_deterministic_and_idempotent(tmp_path: Path) -> None:
    first = imported(tmp_path / "a", "jaffle_shop")
    second = imported(tmp_path / "b", "jaffle_shop")
    files = all_files(first)
    assert files == all_files(second)
    (first / ".pz").mkdir()
    (first / ".pz" / "state").write_text("kept")
    (first / "jaffle_shop.duckdb").write_text("warehouse")
    (first / "pipelines" / "old.sql").write_text("SELECT 1\n")
    listing = (first / ".pz-import-files").read_text()
    (first / ".pz-import-files").write_text(listing + "pipelines/old.sql\n")
    again = pz_import(str(FIXTURES / "jaffle_shop"), "--out", str(first))
    assert again.exit_code == 0, again.output
    now = all_files(first)
    assert (first / ".pz" / "state").read_text() == "kept"
    assert (first / "jaffle_shop.duckdb").read_text() == "warehouse"
    assert not (first / "pipelines" / "old.sql").exists()  # the earlier import's file this one doesn't write
    assert {k: v for k, v in now.items() if k in files} == files


def test_refuses_a_non_empty_folder_that_is_no_earlier_import(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    result = pz_import(str(FIXTURES / "jaffle_duckdb"), "--out", str(out))
    assert result.exit_code == 2
    assert "PZ0143" in result.output and "no earlier import" in result.output
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


# --- jaffle-shop shape -----------------------------------------------------------------------------------


def test_jaffle_shop_conversions(tmp_path: Path) -> None:
    out = tmp_path / "shop"
    result = pz_import(str(FIXTURES / "jaffle_shop"), "--out", str(out))
    assert result.exit_code == 0, result.output
    # adapter.dispatch resolved for duckdb; generate_schema_name applied at import, not copied
    macro = (out / "macros" / "cents_to_dollars.sql").read_text()
    assert "{% macro cents_to_dollars(column_name) -%}" in macro and "::numeric(16, 2)" in macro
    assert "adapter.dispatch" not in macro and "postgres__" not in macro
    assert not (out / "macros" / "generate_schema_name.sql").exists()
    # package helpers pz ships → bare helpers; others → dbt's compiled SQL
    assert (
        "{{ generate_surrogate_key(['order_id', 'sku']) }}"
        in (out / "pipelines" / "staging" / "stg_order_items.sql").read_text()
    )
    assert (
        "{{ date_trunc('day', 'ordered_at') }}"
        in (out / "pipelines" / "staging" / "stg_orders.sql").read_text()
    )
    spine = (out / "pipelines" / "marts" / "date_spine.sql").read_text()
    assert spine.startswith("-- imported from dbt compiled SQL\n") and "dbt_utils" not in spine
    # config() block → settings; the file keeps only the query
    orders_sql = (out / "pipelines" / "marts" / "orders.sql").read_text()
    assert "config(" not in orders_sql and orders_sql.startswith("with")
    assert "{{ var('min_order_total') }}" in orders_sql
    orders = load(out / "pipelines" / "marts" / "orders.yml")
    assert orders["tags"] == ["finance"]
    assert orders["data_tests"] == [
        {"expression": {"sql": "count_order_items >= 1", "config": {"severity": "warn"}}}
    ]
    items = load(out / "pipelines" / "marts" / "order_items.yml")
    assert items["columns"]["order_id"]["tests"] == [
        {"relationships": {"to": "ref('orders')", "field": "order_id"}}
    ]
    stg_orders = load(out / "pipelines" / "staging" / "stg_orders.yml")
    assert stg_orders["data_tests"] == [{"expression": {"sql": "order_total - tax_paid = subtotal"}}]
    # incremental: a cursor comparison on one source → watermark() read merged on unique_key
    locations = (out / "pipelines" / "staging" / "stg_locations.sql").read_text()
    assert "where opened_at > {{ watermark('ecom', 'raw_stores') }}" in locations
    assert "is_incremental" not in locations and "this" not in locations
    assert load(out / "pipelines" / "staging" / "stg_locations.yml") == {"materialized": "table"}
    sink = load(out / "sinks" / "warehouse.yml")
    assert sink["outputs"] == {"stg_locations": {"strategy": "merge", "keys": ["location_id"]}}
    # an incremental model over a ref() → full rebuild and a coded warning naming the model
    assert "warning: PZ0145 models/marts/customer_order_log.sql" in result.output
    log = (out / "pipelines" / "marts" / "customer_order_log.sql").read_text()
    assert "is_incremental" not in log and "{{ this }}" not in log
    # sources: the tables seeds load → the seed files, typed; source tests → checks
    ecom = load(out / "sources" / "ecom.yml")
    assert ecom["connector"] == "localfiles"
    assert ecom["datasets"]["raw_orders"]["checks"] == [{"not_null": {"columns": ["id"]}}]
    assert not (out / "sources" / "seeds.yml").exists()  # every seed is read through `ecom`
    report = (out / "import-report.md").read_text()
    assert (
        "model stg_orders: a view in dbt; a view in staging and a table in the warehouse, since it reads"
        in report
    )
    project = load(out / "project.yml")
    assert project["vars"] == {"min_order_total": {"type": "bigint", "default": 0}}
    assert project["pipelines"]["marts"] == {"materialized": "table", "tags": ["marts"]}
    assert "{{ ref('orders') }}" in (out / "tests" / "assert_order_total_positive.sql").read_text()


def test_skipped_constructs_are_reported(tmp_path: Path) -> None:
    out = tmp_path / "shop"
    result = pz_import(str(FIXTURES / "jaffle_shop"), "--out", str(out))
    report = (out / "import-report.md").read_text()
    for line in (
        "unit test `test_order_items_join`",
        "semantic model `order_item`",
        "metric `revenue`",
        "saved query `revenue_metrics`",
        "Python model models/marts/order_scores.py",
        "snapshot snapshots/orders_snapshot.sql",
        "analysis analyses/order_counts.sql",
        "var `dbt_date:time_zone`",
        "property `time_spine`",
        "source freshness",
    ):
        assert line in report, line
    assert "## Needs a person (1)" in report
    assert "10 skipped" in result.output and "1 need a person" in result.output
    assert "warning: PZ0148 shop/import-report.md: 10 dbt constructs were not imported" in result.output
    assert not (out / "pipelines" / "marts" / "order_scores.py").exists()


def test_schema_names_follow_the_projects_generate_schema_name(tmp_path: Path) -> None:
    dev = load(imported(tmp_path / "dev", "jaffle_shop") / "sinks" / "warehouse.yml")
    assert "orders" not in dev["outputs"]  # dev: custom schemas go to the target schema (main)
    prod = load(imported(tmp_path / "prod", "jaffle_shop", "--target", "prod") / "sinks" / "warehouse.yml")
    assert prod["connection"] == {"path": "jaffle_prod.duckdb"}
    assert prod["outputs"]["orders"] == {"table": "main_finance.orders"}
    assert "customers" not in prod["outputs"]


def test_postgres_target_uses_env_for_the_password(tmp_path: Path) -> None:
    out = imported(tmp_path, "jaffle_shop", "--target", "pg")
    sink = load(out / "sinks" / "warehouse.yml")
    assert sink["connector"] == "postgres"
    assert sink["connection"] == {
        "host": "127.0.0.1",
        "port": 5432,
        "database": "jaffle",
        "user": "postgres",
        "password": "{{ env('DBT_PG_PASSWORD') }}",
    }
    assert sink["outputs"]["orders"] == {"table": "analytics.orders"}
    assert load(out / "project.yml")["env"] == {"DBT_PG_PASSWORD": {"secret": True, "required": True}}


def test_passwords_are_never_copied_and_env_vars_are_declared(tmp_path: Path) -> None:
    project = tmp_path / "dbt"
    shutil.copytree(FIXTURES / "jaffle_duckdb", project)
    (project / "profiles.yml").write_text(
        "jaffle_shop:\n  target: pg\n  outputs:\n    pg:\n      type: postgres\n      host: db\n"
        "      user: u\n      password: hunter2-secret\n      dbname: shop\n      schema: marts\n"
    )
    model = project / "models" / "customers.sql"
    model.write_text(model.read_text() + "-- {{ env_var('SHOP_REGION', 'eu') }} {{ env_var('SHOP_KEY') }}\n")
    (project / "dbt_project.yml").write_text(
        (project / "dbt_project.yml").read_text()
        + "data_tests:\n  +severity: warn\non-run-end: ['select 1']\n"
    )
    out = tmp_path / "out"
    result = pz_import(str(project), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert all(b"hunter2-secret" not in data for data in all_files(out).values())
    assert load(out / "sinks" / "warehouse.yml")["connection"]["password"] == "{{ env('PG_PASSWORD') }}"
    assert load(out / "project.yml")["env"] == {
        "PG_PASSWORD": {"required": True, "secret": True},
        "SHOP_KEY": {"required": True},
        "SHOP_REGION": None,
    }
    assert "{{ env('SHOP_REGION', 'eu') }}" in (out / "pipelines" / "customers.sql").read_text()
    report = (out / "import-report.md").read_text()
    assert "set the environment variable PG_PASSWORD" in report
    assert "- dbt_project.yml `data_tests`" in report and "- on-run-end hook in dbt_project.yml" in report


# --- coded errors ----------------------------------------------------------------------------------------


def test_package_call_without_compiled_sql_is_a_coded_error(tmp_path: Path) -> None:
    project = tmp_path / "dbt"
    shutil.copytree(FIXTURES / "jaffle_shop", project)
    shutil.rmtree(project / "target")
    out = tmp_path / "out"
    result = pz_import(str(project), "--out", str(out))
    assert result.exit_code == 2
    assert "error: PZ0144 models/marts/date_spine.sql:5:" in result.output
    assert "dbt_utils.date_spine" in result.output and "run dbt compile first" in result.output
    assert not out.exists()  # nothing half-written


def test_not_a_dbt_project(tmp_path: Path) -> None:
    result = pz_import(str(tmp_path), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2 and "PZ0140" in result.output and "no dbt_project.yml" in result.output


def test_unknown_target_and_unsupported_adapter(tmp_path: Path) -> None:
    result = pz_import(str(FIXTURES / "jaffle_shop"), "--out", str(tmp_path / "o"), "--target", "qa")
    assert result.exit_code == 2 and "PZ0141" in result.output and "targets: dev, pg, prod" in result.output
    project = tmp_path / "sf"
    shutil.copytree(FIXTURES / "jaffle_duckdb", project)
    (project / "profiles.yml").write_text(
        "jaffle_shop:\n  target: dev\n  outputs:\n    dev: { type: snowflake }\n"
    )
    result = pz_import(str(project), "--out", str(tmp_path / "o2"))
    assert result.exit_code == 2 and "PZ0142" in result.output and "snowflake" in result.output


def test_config_block_that_is_not_literal_is_a_coded_error(tmp_path: Path) -> None:
    project = tmp_path / "dbt"
    shutil.copytree(FIXTURES / "jaffle_duckdb", project)
    model = project / "models" / "customers.sql"
    model.write_text("\n{{ config(materialized=var('m')) }}\n" + model.read_text())
    result = pz_import(str(project), "--out", str(tmp_path / "o"))
    assert result.exit_code == 2
    assert "error: PZ0146 models/customers.sql:2: model 'customers': config() cannot be read" in result.output


# --- a run today: jaffle_duckdb bridged to the syntax pz has before the dbt habits are merged ---------------


def _bridge(out: Path) -> None:
    """Rewrite an imported project into today's syntax: folder config → sink clauses, dbt test spellings →
    checks, `materialized: view` → a table. test_dbt_import_e2e.py runs the import as written."""
    text = (out / "project.yml").read_text()
    folders = load(out / "project.yml")["pipelines"]
    (out / "project.yml").write_text(text[: text.index("pipelines:")])
    sink = load(out / "sinks" / "warehouse.yml")
    sink["outputs"] = {k: v for k, v in sink.get("outputs", {}).items() if v != {"strategy": "view"}}
    YAML().dump(sink, out / "sinks" / "warehouse.yml")
    for sql in sorted((out / "pipelines").rglob("*.sql")):
        sidecar = sql.with_suffix(".yml")
        spec = load(sidecar) if sidecar.exists() else {}
        folder = sql.parent.relative_to(out / "pipelines").as_posix()
        materialized = spec.get("materialized") or folders.get(folder, {}).get("materialized")
        if materialized != "ephemeral":
            sql.write_text(f"INSERT INTO {{{{ sink('warehouse', '{sql.stem}') }}}}\n" + sql.read_text())
        if not spec:
            continue
        checks = []
        for column, entry in spec.get("columns", {}).items():
            for test in entry.pop("tests", []):
                name, args = (test, {}) if isinstance(test, str) else next(iter(test.items()))
                if name in ("unique", "not_null"):
                    checks.append({name: {"columns": [column]}})
                elif name == "accepted_values":
                    checks.append({name: {"column": column, "values": args["values"]}})
                else:
                    checks.append({name: {"column": column, "to": args["to"][5:-2], "field": args["field"]}})
        spec["columns"] = {k: v for k, v in spec.get("columns", {}).items() if v}
        spec.pop("materialized", None)
        if checks:
            spec["checks"] = checks
        buffer = YAML()
        with sidecar.open("w") as handle:
            buffer.dump({k: v for k, v in spec.items() if v}, handle)


def test_jaffle_duckdb_runs_and_matches_dbt_build(tmp_path: Path) -> None:
    out = imported(tmp_path, "jaffle_duckdb")
    _bridge(out)
    run = pz(out, "run")
    assert run.exit_code == 0, run.output
    checks = [n for n in run.run_results()["nodes"] if n["name"].startswith("chk_")]
    assert len(checks) == 16 and all(n["status"] == "success" for n in checks)
    compare_with_dbt(out / "jaffle_shop.duckdb", "jaffle_duckdb")


def test_a_re_import_removes_only_files_under_out(tmp_path: Path) -> None:
    """The list of files an earlier import wrote lives in --out, where anyone may edit it: a re-import
    removes what it no longer writes only when that is a file under --out."""
    out = imported(tmp_path, "jaffle_duckdb")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    listing = out / ".pz-import-files"
    listing.write_text(listing.read_text() + "../victim.txt\n" + f"{victim}\n")
    result = pz_import(str(FIXTURES / "jaffle_duckdb"), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "keep me\n"


def test_a_file_that_is_not_utf8_is_a_coded_error(tmp_path: Path) -> None:
    project = tmp_path / "dbt"
    shutil.copytree(FIXTURES / "jaffle_duckdb", project)
    model = next((project / "models").rglob("*.sql"))
    model.write_bytes("select 'caf\xe9' as name\n".encode("latin-1"))
    result = pz_import(str(project), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2, result.output
    assert "PZ0140" in result.output and model.name in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()
