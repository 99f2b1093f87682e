"""Tier 4 at scale: pipelines bound against typed empty tables of their inputs, never re-expanded views.

The diamond test guards against the exponential case (each pipeline reading the two before it made
validation of 30 pipelines take minutes); its timeout is a hang guard, not a timing claim.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from tests.conftest import pz, pz_subprocess, write_project

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_diamond_project", ROOT / "benchmarks/gen_diamond_project.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_diamond_heavy_dag_of_300_pipelines_validates_with_every_pipeline_bound(tmp_path: Path) -> None:
    gen = _generator()
    gen.generate(tmp_path, 300, spread=1, checks_every=10, dbt=False)  # p_i reads p_(i-1) and p_(i-2)
    project = tmp_path / "pz"
    clean = pz_subprocess(project, "validate", timeout=120)
    assert clean.exit_code == 0, clean.output
    assert "ok: project is valid" in clean.output

    # the deepest pipelines are bound against the column types that flowed through all the others
    last = project / "pipelines/p_00299.sql"
    last.write_text(last.read_text().replace("a.grp,", "a.grp, a.amount + 'x' AS bad, b.gpr,"))
    middle = project / "pipelines/p_00150.yml"
    middle.write_text("checks:\n  - unique: { columns: [idd] }\n")
    broken = pz_subprocess(project, "validate", timeout=120)
    errors = [line for line in broken.lines if line.startswith("error: ")]
    assert broken.exit_code == 2, broken.output
    assert len(errors) == 2, broken.output
    assert errors[0].startswith("error: PZ0405 pipelines/p_00150.yml:2:") and "idd" in errors[0]
    assert errors[1].startswith("error: PZ0412 pipelines/p_00299.sql:2:") and '"gpr"' in errors[1]


BASE = {
    "project.yml": "name: shop\n",
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          orders:
            format: csv
            path: orders.csv
            columns: { id: bigint, customer: varchar, amount: double }
    """,
    "sinks/lake.yml": """
        connector: localfiles
        connection: { root: out }
    """,
}


def test_types_flow_from_table_to_table_and_errors_keep_their_place(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/a.sql": (
                "SELECT id, amount, DATE '2024-01-01' AS day FROM {{ source('files', 'orders') }}\n"
            ),
            "pipelines/b.sql": "-- b\nSELECT a.id, a.day FROM {{ ref('a') }} AS a; -- one statement\n",
            "pipelines/c.sql": (
                "INSERT INTO {{ sink('lake', 'c') }}\n"
                "SELECT b.id,\n"
                "       b.day + INTERVAL 1 DAY AS next_day,\n"
                "       b.day - 'x' AS broken\n"
                "FROM {{ ref('b') }} AS b\n"
            ),
        },
    )
    result = pz(project_dir, "validate")
    errors = [line for line in result.lines if line.startswith("error: ")]
    assert result.exit_code == 2, result.output
    assert len(errors) == 1, result.output
    assert errors[0].startswith("error: PZ0403 pipelines/c.sql:4:"), result.output


def test_a_broken_check_hides_no_error_downstream_and_each_check_is_named(project_dir: Path) -> None:
    checks = "".join(f"  - expression: {{ sql: 'id > {i}', name: e{i} }}\n" for i in range(60))
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/a.sql": "SELECT id, amount FROM {{ source('files', 'orders') }}\n",
            "pipelines/a.yml": "checks:\n" + checks + "  - unique: { columns: [custmer] }\n",
            "pipelines/b.sql": (
                "INSERT INTO {{ sink('lake', 'b') }}\nSELECT a.id, a.amuont FROM {{ ref('a') }} AS a\n"
            ),
        },
    )
    result = pz(project_dir, "validate")
    errors = [line for line in result.lines if line.startswith("error: ")]
    assert result.exit_code == 2, result.output
    assert len(errors) == 2, result.output
    assert errors[0].startswith("error: PZ0405 pipelines/a.yml:62:") and "custmer" in errors[0]
    assert errors[1].startswith("error: PZ0412 pipelines/b.sql:2:") and "amuont" in errors[1]


def test_a_pipeline_that_is_not_a_query_is_told_so(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/a.sql": "INSERT INTO {{ sink('lake', 'a') }}\nUPDATE t SET x = 1\n",
            "pipelines/b.sql": (
                "INSERT INTO {{ sink('lake', 'b') }}\nDESCRIBE {{ source('files', 'orders') }}\n"
            ),
        },
    )
    result = pz(project_dir, "validate")
    errors = [line for line in result.lines if line.startswith("error: ")]
    assert result.exit_code == 2, result.output
    assert errors[0].startswith("error: PZ0404 pipelines/a.sql") and "UPDATE statement" in errors[0]
    assert errors[1].startswith("error: PZ0401 pipelines/b.sql:2:"), result.output
