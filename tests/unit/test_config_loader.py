"""Loading a project: discovery, every diagnostic of every file, and the Project dataclasses."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from textwrap import dedent

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelinez.config.loader import find_project_root, load_project
from pipelinez.config.model import (
    BreakerSpec,
    CheckSpec,
    DatasetSpec,
    EngineSpec,
    EnvSpec,
    OutputSpec,
    Project,
    RetrySpec,
    VarSpec,
)
from pipelinez.core.diagnostics import Diagnostic, Place, PzConfigError

PROJECT = """\
name: shop                    # required
vars:                         # typed variables: {{ var('min_date') }}
  min_date: { type: date, default: "2024-01-01" }   # types: string, int, ..., timestamp
env:                          # every environment variable the project reads must be declared here
  PG_PASSWORD: { required: true, secret: true }     # secret: never printed anywhere (plan, errors, events)
  WAREHOUSE_HOST: { default: localhost }
connectors:                   # optional pins of connector package versions (one version per connector)
  postgres: ">=1.0,<2"
engine:
  threads: 4                  # nodes run at once (default: CPU count)
  fail_fast: false            # true = any node failure cancels the whole run
  force_universal: false      # force the universal data-plane tier everywhere (see 10)
  retry: { max_attempts: 3, base_delay: 1s, max_delay: 30s }   # the engine default, shown here
  breaker: { failure_threshold: 5, cool_down: 30s }            # optional; PZ0120 when malformed
retention: { keep_last: 10 }  # run staging databases kept after each run
"""

SOURCE = """\
# sources/pg_prod.yml
connector: postgres
connection:                   # validated against the connector's JSON Schema (tier 3)
  host: "{{ env('WAREHOUSE_HOST') }}"
  port: 5432
  database: shop
  user: pz
  password: "{{ env('PG_PASSWORD') }}"
max_concurrency: 4            # extractions from this instance at once
retry: { max_attempts: 5 }    # instance-level retry policy (fields cascade, nearest wins)
engine: { force_universal: false }
datasets:
  customers:
    table: public.customers
    columns:                  # the contract: name -> type
      id: bigint
      name: varchar
      updated_at: timestamp
  orders:
    table: public.orders
    sync: { mode: incremental, cursor: updated_at, start: "2024-01-01" }   # YAML route (see 11)
    partitions: { column: id, count: 8 }   # parallel splits, each resumable on retry
    retry: { base_delay: 2s }              # dataset-level: overrides the instance per field
    checks:
      - not_null: { columns: [id] }
"""

SINK = """\
# sinks/warehouse.yml
connector: postgres
connection: { host: localhost, database: dw }
max_concurrency: 2
retry: { max_attempts: 4 }
outputs:                      # options per output
  orders_enriched:
    table: analytics.orders_enriched
    strategy: merge           # replace (default) | merge | append
    keys: [order_id]          # required for merge
    on_delete: { column: is_deleted }   # merge only
    retry: { max_attempts: 6 }
  events_log:
    strategy: append
    duplicates: accept        # append only
  plain:
"""

PIPELINE = """\
INSERT INTO {{ sink('warehouse', 'orders_enriched') }}
SELECT o.id AS order_id, o.amount, c.name AS customer
FROM {{ source('pg_prod', 'orders') }} AS o
JOIN {{ source('pg_prod', 'customers') }} AS c ON c.id = o.customer_id
WHERE o.updated_at > {{ watermark('pg_prod', 'orders') }}
"""

SIDECAR = """\
description: Orders joined to their customer.
materialized: table           # table (default) | ephemeral
tags: [nightly]
checks:
  - not_null: { columns: [order_id, customer] }
  - unique: { columns: [order_id] }
  - accepted_values: { column: status, values: [open, shipped, returned] }
  - row_count: { min: 1, max: 100000000 }
  - expression: { sql: "amount >= 0", name: non_negative_amount }
  - relationships: { column: customer_id, to: customers, field: id }   # `to` is a pipeline or source('x','y')
  - freshness: { column: updated_at, max_age: 1d }
    severity: warn            # error (default) | warn
  - expression: { sql: "amount < 1e9" }
  - row_count: { max: 5 }
    name: small
"""


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(dedent(content), encoding="utf-8")
    return root


def reference(root: Path, **extra: str | bytes) -> Path:
    files: dict[str, str | bytes] = {
        "project.yml": PROJECT,
        "sources/pg_prod.yml": SOURCE,
        "sinks/warehouse.yml": SINK,
        "pipelines/marts/orders_enriched.sql": PIPELINE,
        "pipelines/marts/orders_enriched.yml": SIDECAR,
        "pipelines/scratch.sql": "SELECT 1\n",
    }
    files.update({k.replace("__", "/"): v for k, v in extra.items()})
    return write(root, files)


def load_ok(root: Path) -> Project:
    project, diagnostics = load_project(root)
    assert diagnostics == []
    assert project is not None
    return project


def codes(diagnostics: list[Diagnostic]) -> list[tuple[str, str]]:
    return [(d.code, d.place.render()) for d in diagnostics]


# --- the reference project -----------------------------------------------------------------------


def test_reference_project_loads_into_the_expected_dataclasses(tmp_path: Path) -> None:
    project = load_ok(reference(tmp_path))
    assert project.root == tmp_path.resolve()
    assert project.name == "shop"
    assert project.vars == {"min_date": VarSpec("min_date", "date", "2024-01-01", Place("project.yml", 3, 3))}
    assert project.env == {
        "PG_PASSWORD": EnvSpec("PG_PASSWORD", True, True, None, Place("project.yml", 5, 3)),
        "WAREHOUSE_HOST": EnvSpec("WAREHOUSE_HOST", False, False, "localhost", Place("project.yml", 6, 3)),
    }
    assert project.connector_pins == {"postgres": ">=1.0,<2"}
    assert project.engine == EngineSpec(4, False, False, RetrySpec(3, 1.0, 30.0), BreakerSpec(5, 30.0))
    assert project.keep_last == 10
    assert project.state_dir == tmp_path.resolve() / ".pz"


def test_reference_source(tmp_path: Path) -> None:
    source = load_ok(reference(tmp_path)).sources["pg_prod"]
    assert (source.kind, source.name, source.file, source.connector) == (
        "source",
        "pg_prod",
        "sources/pg_prod.yml",
        "postgres",
    )
    assert source.connection == {
        "host": "{{ env('WAREHOUSE_HOST') }}",  # raw: rendered by the compile layer
        "port": 5432,
        "database": "shop",
        "user": "pz",
        "password": "{{ env('PG_PASSWORD') }}",
    }
    assert source.max_concurrency == 4
    assert source.retry == RetrySpec(5, None, None)
    assert source.force_universal is False
    assert source.place == Place("sources/pg_prod.yml", 2, 1)
    assert list(source.datasets) == ["customers", "orders"]
    assert source.datasets["customers"] == DatasetSpec(
        "customers",
        {"table": "public.customers"},
        {"id": "bigint", "name": "varchar", "updated_at": "timestamp"},
        None,
        RetrySpec(),
        (),
        Place("sources/pg_prod.yml", 13, 3),
    )
    orders = source.datasets["orders"]
    assert orders.options == {"table": "public.orders", "partitions": {"column": "id", "count": 8}}
    assert orders.columns is None
    assert orders.sync == {"mode": "incremental", "cursor": "updated_at", "start": "2024-01-01"}
    assert orders.retry == RetrySpec(None, 2.0, None)
    assert orders.checks == (
        CheckSpec(
            "not_null", {"columns": ["id"]}, "error", "not_null_id", Place("sources/pg_prod.yml", 25, 9)
        ),
    )
    assert orders.place == Place("sources/pg_prod.yml", 19, 3)


def test_reference_sink(tmp_path: Path) -> None:
    sink = load_ok(reference(tmp_path)).sinks["warehouse"]
    assert (sink.kind, sink.name, sink.connector, sink.max_concurrency) == (
        "sink",
        "warehouse",
        "postgres",
        2,
    )
    assert sink.connection == {"host": "localhost", "database": "dw"}
    assert sink.retry == RetrySpec(4, None, None)
    assert sink.force_universal is None
    assert sink.outputs["orders_enriched"] == OutputSpec(
        "orders_enriched",
        {"table": "analytics.orders_enriched"},
        "merge",
        ("order_id",),
        "is_deleted",
        None,
        False,
        RetrySpec(6, None, None),
        Place("sinks/warehouse.yml", 7, 3),
    )
    assert sink.outputs["events_log"] == OutputSpec(
        "events_log",
        {},
        "append",
        (),
        None,
        "accept",
        False,
        RetrySpec(),
        Place("sinks/warehouse.yml", 13, 3),
    )
    plain = sink.outputs["plain"]
    assert (plain.strategy, plain.options, plain.keys, plain.declared) == ("replace", {}, (), True)


def test_reference_pipelines_sidecars_and_check_names(tmp_path: Path) -> None:
    pipelines = load_ok(reference(tmp_path)).pipelines
    assert list(pipelines) == ["orders_enriched", "scratch"]
    scratch = pipelines["scratch"]
    assert (scratch.file, scratch.text, scratch.sidecar, scratch.materialized, scratch.tags) == (
        "pipelines/scratch.sql",
        "SELECT 1\n",
        None,
        "table",
        (),
    )
    enriched = pipelines["orders_enriched"]
    assert enriched.file == "pipelines/marts/orders_enriched.sql"
    assert enriched.text == PIPELINE
    sidecar = enriched.sidecar
    assert sidecar is not None
    assert sidecar.file == "pipelines/marts/orders_enriched.yml"
    assert sidecar.description == "Orders joined to their customer."
    assert (sidecar.materialized, sidecar.tags) == ("table", ("nightly",))
    assert [(c.type, c.name, c.severity, c.place.line) for c in sidecar.checks] == [
        ("not_null", "not_null_order_id_customer", "error", 5),
        ("unique", "unique_order_id", "error", 6),
        ("accepted_values", "accepted_values_status", "error", 7),
        ("row_count", "row_count", "error", 8),
        ("expression", "expression_non_negative_amount", "error", 9),
        ("relationships", "relationships_customer_id", "error", 10),
        ("freshness", "freshness_updated_at", "warn", 11),
        ("expression", "expression_8", "error", 13),
        ("row_count", "small", "error", 14),
    ]
    assert sidecar.checks[2].options == {"column": "status", "values": ["open", "shipped", "returned"]}
    assert sidecar.checks[6].options == {"column": "updated_at", "max_age": "1d"}
    assert sidecar.checks[0].place == Place("pipelines/marts/orders_enriched.yml", 5, 5)


def test_positions_of_every_file_are_kept_for_later_tiers(tmp_path: Path) -> None:
    project = load_ok(reference(tmp_path))
    assert sorted(project.positions) == [
        "pipelines/marts/orders_enriched.yml",
        "project.yml",
        "sinks/warehouse.yml",
        "sources/pg_prod.yml",
    ]
    assert project.locate("sources/pg_prod.yml", ("connection", "port")) == Place("sources/pg_prod.yml", 5, 3)
    assert project.locate("sources/pg_prod.yml", ("connection", "nope")) == Place("sources/pg_prod.yml", 3, 1)
    assert project.locate("sources/unknown.yml", ("x",)) == Place("sources/unknown.yml")


def test_defaults_of_a_minimal_project(tmp_path: Path) -> None:
    project = load_ok(
        write(
            tmp_path,
            {
                "project.yml": "name: tiny\nengine: { breaker: {} }\n",
                "sources/files.yaml": "connector: localfiles\ndatasets:\n  raw:\n",
            },
        )
    )
    assert project.vars == {} and project.env == {} and project.connector_pins == {}
    assert project.engine == EngineSpec(None, False, False, RetrySpec(), BreakerSpec())
    assert project.keep_last == 10
    source = project.sources["files"]
    assert (source.connection, source.max_concurrency, source.force_universal) == ({}, None, None)
    assert source.datasets["raw"].options == {} and source.datasets["raw"].checks == ()
    assert project.sinks == {} and project.pipelines == {}


def test_env_defaults_are_strings_and_durations_become_seconds(tmp_path: Path) -> None:
    project = load_ok(
        write(
            tmp_path,
            {
                "project.yml": """\
            name: x
            env:
              PORT: { default: 5432 }
              DEBUG: { default: false }
            engine:
              retry: { base_delay: 500ms, max_delay: 2m }
              breaker: { cool_down: 1h }
            """,
            },
        )
    )
    assert project.env["PORT"].default == "5432"
    assert project.env["DEBUG"].default == "false"
    assert project.engine.retry == RetrySpec(None, 0.5, 120.0)
    assert project.engine.breaker == BreakerSpec(5, 3600.0)


# --- finding the root ------------------------------------------------------------------------------


def test_find_project_root_walks_upwards(tmp_path: Path) -> None:
    root = reference(tmp_path / "shop")
    assert find_project_root(root / "pipelines" / "marts") == root.resolve()
    assert find_project_root(root / "pipelines" / "scratch.sql") == root.resolve()
    assert find_project_root(root) == root.resolve()


def test_find_project_root_without_project_is_pz0105(tmp_path: Path) -> None:
    with pytest.raises(PzConfigError) as caught:
        find_project_root(tmp_path / "nowhere")
    assert [d.code for d in caught.value.diagnostics] == ["PZ0105"]
    assert caught.value.exit_code == 2


def test_load_project_without_project_yml_is_pz0105(tmp_path: Path) -> None:
    write(tmp_path, {"project.yaml": "name: x\n"})
    project, diagnostics = load_project(tmp_path)
    assert project is None
    assert [d.code for d in diagnostics] == ["PZ0105"]
    assert "project.yml" in diagnostics[0].message


# --- diagnostics across files ----------------------------------------------------------------------


def test_every_problem_of_every_file_is_collected_with_relative_paths(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "project.yml": "name: shop\nengine:\n  thread: 4\n",
            "sources/pg.yml": "connector: pg\nretry: { max_attempts: 0 }\n",
            "sources/my-files.yml": "connector: localfiles\n",
            "sinks/wh.yml": "connector: pg\noutputs:\n  o:\n    input: x\n",
            "sinks/broken.yml": "connector: [\n",
            "pipelines/a/dup.sql": "select 1",
            "pipelines/b/dup.sql": "select 2",
            "pipelines/2fast.sql": "select 3",
            "pipelines/bad.sql": b"select '\xff'",
            "pipelines/lonely.yml": "description: no sql\n",
            "pipelines/p.sql": "select 4",
            "pipelines/p.yml": "checks:\n  - unique: { column: [a] }\n",
        },
    )
    project, diagnostics = load_project(tmp_path)
    assert project is None
    assert codes(diagnostics) == [
        ("PZ0107", "pipelines/2fast.sql"),
        ("PZ0204", "pipelines/b/dup.sql"),
        ("PZ0108", "pipelines/bad.sql:1:9"),
        ("PZ0109", "pipelines/lonely.yml"),
        ("PZ0113", "pipelines/p.yml:2:5"),
        ("PZ0113", "pipelines/p.yml:2:15"),
        ("PZ0102", "project.yml:3:3"),
        ("PZ0101", "sinks/broken.yml:2:1"),
        ("PZ0112", "sinks/wh.yml:4:5"),
        ("PZ0107", "sources/my-files.yml"),
        ("PZ0121", "sources/pg.yml:2:24"),
    ]
    dup = diagnostics[1]
    assert "pipelines/a/dup.sql" in dup.message and "pipelines/b/dup.sql" in dup.message


def test_duplicate_instance_files_and_sidecars_are_pz0204(tmp_path: Path) -> None:
    reference(
        tmp_path,
        **{
            "sources__pg_prod.yaml": "connector: postgres\n",
            "pipelines__scratch.yml": "tags: [a]\n",
            "pipelines__scratch.yaml": "tags: [b]\n",
        },
    )
    project, diagnostics = load_project(tmp_path)
    assert project is None
    assert codes(diagnostics) == [("PZ0204", "pipelines/scratch.yml"), ("PZ0204", "sources/pg_prod.yml")]


def test_duplicate_check_names_are_pz0204_at_the_second_check(tmp_path: Path) -> None:
    reference(tmp_path)
    write(
        tmp_path, {"pipelines/scratch.yml": "checks:\n  - row_count: { min: 1 }\n  - row_count: { max: 9 }\n"}
    )
    project, diagnostics = load_project(tmp_path)
    assert project is None
    assert codes(diagnostics) == [("PZ0204", "pipelines/scratch.yml:3:5")]
    assert "row_count" in diagnostics[0].message and "name:" in diagnostics[0].next_step


def test_hidden_files_and_the_state_folder_are_ignored(tmp_path: Path) -> None:
    reference(
        tmp_path,
        **{
            ".pz__runs__x__junk.yml": "{{{",
            "sources__.draft.yml": "{{{",
            "pipelines__.hidden.sql": "select",
            "pipelines__.git__x.sql": "select",
            "pipelines__.cache__y.yml": "{{{",
            "pipelines__notes.md": "# notes",
            "sources__README.md": "hello",
        },
    )
    assert sorted(load_ok(tmp_path).pipelines) == ["orders_enriched", "scratch"]


def test_a_sidecar_next_to_a_pipeline_in_another_folder_is_an_orphan(tmp_path: Path) -> None:
    reference(tmp_path)
    write(tmp_path, {"pipelines/other/scratch.yml": "tags: [x]\n"})
    project, diagnostics = load_project(tmp_path)
    assert project is None
    assert codes(diagnostics) == [("PZ0109", "pipelines/other/scratch.yml")]
    assert "pipelines/other/scratch.sql" in diagnostics[0].message


def test_empty_sidecar_is_pz0101(tmp_path: Path) -> None:
    reference(tmp_path)
    write(tmp_path, {"pipelines/scratch.yml": ""})
    project, diagnostics = load_project(tmp_path)
    assert project is None and codes(diagnostics) == [("PZ0101", "pipelines/scratch.yml:1:1")]


# --- arbitrary input never raises ------------------------------------------------------------------


_FILES = ["project.yml", "sources/pg.yml", "sinks/wh.yml", "pipelines/p.yml"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(_FILES), text=st.text())
def test_any_text_in_any_project_file_yields_diagnostics_never_raises(which: str, text: str) -> None:
    root = Path(tempfile.mkdtemp())
    try:
        reference(root)
        write(root, {"pipelines/p.sql": "select 1", which: text})
        project, diagnostics = load_project(root)
        assert (project is None) == any(d.is_error for d in diagnostics)
        assert all(d.place.file for d in diagnostics)
    finally:
        shutil.rmtree(root)


_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.sampled_from(["1s", "replace", "not_null", "columns", "incremental", "{{ var('x') }}"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "name",
                    "engine",
                    "retry",
                    "breaker",
                    "checks",
                    "datasets",
                    "outputs",
                    "connector",
                    "not_null",
                    "columns",
                    "max_attempts",
                    "cool_down",
                    "sync",
                    "mode",
                    "input",
                    "x",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    which=st.sampled_from(_FILES),
    data=st.dictionaries(
        st.text(max_size=6)
        | st.sampled_from(
            ["name", "engine", "connector", "datasets", "outputs", "checks", "retry", "vars", "env"]
        ),
        _values,
        max_size=5,
    ),
)
def test_any_mapping_shape_yields_diagnostics_never_raises(which: str, data: dict) -> None:
    import json

    root = Path(tempfile.mkdtemp())
    try:
        write(root, {"project.yml": "name: x\n", "pipelines/p.sql": "select 1", which: json.dumps(data)})
        project, diagnostics = load_project(root)
        assert (project is None) == any(d.is_error for d in diagnostics)
    finally:
        shutil.rmtree(root)


def test_empty_collections_are_allowed(tmp_path: Path) -> None:
    project = load_ok(
        write(
            tmp_path,
            {
                "project.yml": "name: x\nvars:\nenv:\nconnectors:\nengine:\nretention:\n",
                "sources/s.yml": "connector: x\nconnection:\ndatasets:\n  t: { columns: ~, checks: ~ }\n",
                "sinks/k.yml": "connector: duckdb\noutputs:\n",
                "pipelines/p.sql": "select 1",
                "pipelines/p.yml": "description: x\ntags:\nchecks:\n",
            },
        )
    )
    assert project.vars == {} and project.engine == EngineSpec() and project.keep_last == 10
    dataset = project.sources["s"].datasets["t"]
    assert (dataset.columns, dataset.checks, dataset.options) == (None, (), {})
    assert project.sinks["k"].outputs == {}
    sidecar = project.pipelines["p"].sidecar
    assert sidecar is not None and (sidecar.tags, sidecar.checks) == ((), ())
