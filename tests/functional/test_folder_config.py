"""Folder config (project.yml `pipelines:`) and `materialized: view` in staging, through the pz CLI."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from tests.conftest import pz, write_project

BASE = {
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          orders: { format: csv, path: orders.csv, columns: { id: bigint, amount: bigint } }
    """,
    "sinks/lake.yml": "connector: localfiles\nconnection: { root: out }\n",
    "sinks/other.yml": "connector: localfiles\nconnection: { root: out2 }\n",
    "data/orders.csv": "id,amount\n1,150\n2,275\n",
    "pipelines/staging/stg_orders.sql": "SELECT * FROM {{ source('files', 'orders') }}\n",
    "pipelines/marts/m1.sql": "SELECT id FROM {{ ref('stg_orders') }}\n",
    "pipelines/marts/finance/rev.sql": "SELECT amount FROM {{ ref('stg_orders') }}\n",
    "pipelines/marts/finance/own.sql": (
        "INSERT INTO {{ sink('other', 'own') }}\nSELECT amount FROM {{ ref('stg_orders') }}\n"
    ),
    # a sidecar's own materialized wins over its folder's (marts/finance: view in FOLDERS)
    "pipelines/marts/finance/own.yml": (
        "tags: [mine]\nmaterialized: table\nchecks:\n  - not_null: { columns: [amount] }\n"
    ),
}

FOLDERS = """
    name: shop
    pipelines:
      .:
        tags: [all]
      marts:
        sink: lake
        tags: [marts]
        materialized: view
      marts/finance:
        tags: [finance]
        materialized: view
      staging:
        materialized: ephemeral
      nowhere:
        tags: [x]
"""


def _plan(project: Path, *args: str) -> dict[str, dict[str, object]]:
    result = pz(project, "plan", "--format", "json", *args)
    assert result.exit_code == 0, result.output
    start = result.output.index("{")
    return {n["name"]: n for n in json.loads(result.output[start:])["nodes"]}


def test_folder_defaults_nested_folders_and_sidecar_overrides(project_dir: Path) -> None:
    checked = "checks:\n  - not_null: {{ columns: [{}] }}\n"  # checked, so not streamed: kept in staging
    sidecars = {
        "pipelines/marts/m1.yml": checked.format("id"),
        "pipelines/marts/finance/rev.yml": checked.format("amount"),
    }
    write_project(project_dir, {**BASE, "project.yml": FOLDERS, **sidecars})
    result = pz(project_dir, "run")
    assert result.exit_code == 0, result.output
    # PZ0130: a folder key that names no folder is a warning, the run goes on
    out = result.output
    assert "warning: PZ0130 project.yml:14:3: project.yml pipelines: 'nowhere' names no folder" in out
    # stg_orders is ephemeral (staging/), so it is no node; m1 (marts) and rev (marts/finance) are views,
    # own (marts/finance, its sidecar says table) a table
    names = {n["name"]: n for n in result.run_results()["nodes"]}
    assert "stg_orders" not in names
    assert "ok m1 a view in staging (materialized: view)" in out
    assert "ok rev a view in staging (materialized: view)" in out
    assert "ok own 2 rows" in out
    # the folder sink: output <pipeline name> of `lake`; own keeps its own INSERT INTO sink('other', ...)
    assert sorted(p.name for p in (project_dir / "out").iterdir()) == ["m1.parquet", "rev.parquet"]
    assert sorted(p.name for p in (project_dir / "out2").iterdir()) == ["own.parquet"]
    assert duckdb.sql(f"SELECT sum(amount) FROM '{project_dir}/out/rev.parquet'").fetchall() == [(425,)]
    # tags: the union of every folder's and the sidecar's
    finance = pz(project_dir, "plan", "-s", "tag:finance")
    assert finance.exit_code == 0, finance.output
    assert " rev " in finance.output and " own " in finance.output and " m1 " not in finance.output
    mine = pz(project_dir, "plan", "-s", "tag:mine")
    assert " own " in mine.output and " rev " not in mine.output
    everything = pz(project_dir, "plan", "-s", "tag:all")
    assert " m1 " in everything.output and " own " in everything.output


def test_a_view_in_staging_has_checks_and_readers(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "project.yml": "name: shop\n",
            "pipelines/staging/stg_orders.yml": """
                materialized: view
                checks:
                  - not_null: { columns: [id] }
                  - expression: { sql: "amount < 200", name: small }
                    severity: warn
            """,
            "pipelines/marts/m1.sql": (
                "INSERT INTO {{ sink('lake', 'm1') }}\nSELECT id FROM {{ ref('stg_orders') }}\n"
            ),
            "pipelines/marts/finance/rev.sql": (
                "INSERT INTO {{ sink('lake', 'rev') }}\nSELECT amount FROM {{ ref('stg_orders') }}\n"
            ),
        },
    )
    result = pz(project_dir, "run")
    assert result.exit_code == 0, result.output
    assert "ok stg_orders a view in staging (materialized: view)" in result.output
    assert result.node("chk_stg_orders__not_null_id")["status"] == "success"
    assert result.node("chk_stg_orders__expression_small")["status"] == "warn"  # 275 >= 200: it ran on rows
    runs = sorted((project_dir / ".pz" / "runs").iterdir())
    con = duckdb.connect(str(runs[-1] / "staging.duckdb"), read_only=True)
    kind = con.sql("SELECT table_type FROM information_schema.tables WHERE table_name = 'stg_orders'")
    assert kind.fetchall() == [("VIEW",)]
    con.close()
    assert duckdb.sql(f"SELECT count(*) FROM '{project_dir}/out/rev.parquet'").fetchall() == [(2,)]


def test_folder_sink_problems_are_coded(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "project.yml": """
                name: shop
                pipelines:
                  marts:
                    sink: lakee
                  staging:
                    materialized: ephemeral
                    sink: lake
            """,
        },
    )
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    assert (
        "PZ0131 project.yml:4:11: project.yml pipelines: 'marts' sets sink: 'lakee', which has no "
        "sinks/lakee.yml (did you mean 'lake'?)"
    ) in result.output
    said = "PZ0131 project.yml:7:11: project.yml pipelines: 'staging' is ephemeral and sets sink"
    assert said in result.output
