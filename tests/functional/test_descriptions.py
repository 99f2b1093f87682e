"""Descriptions (datasets, their columns, pipelines, their columns, outputs; `{{ doc() }}` rendered) in the
plan JSON, run_results.json and the docs site, with the dbt-style column tests beside them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import pz
from tests.functional.test_doc_blocks import described_project
from tests.functional.test_docs import document

COLUMN_TESTS = {
    "pipelines/p.yml": """
        description: "{{ doc('every_order') }} (see the source)"
        columns:
          id:
            description: "{{ doc('order_id') }}"
            tests:
              - not_null
              - unique: { config: { where: "id > 0", warn_if: ">5" } }
    """,
}

EXPECTED = {
    "src_files__orders": "Orders as the shop exports them,\n**one row** per order.",
    "p": "Every order. (see the source)",
    "lake.p": "Written nightly. Orders for the lake.",
    "chk_p__not_null_id": "The order's id.",
    "chk_p__unique_id": "The order's id.",
}


def test_descriptions_are_in_the_plan_json(tmp_path: Path) -> None:
    root = described_project(tmp_path / "p", COLUMN_TESTS)
    result = pz(root, "--log-format", "json", "plan")
    assert result.exit_code == 0, result.output
    nodes = {e["name"]: e for e in map(json.loads, result.lines) if e.get("event") == "plan_node"}
    assert {name: node["description"] for name, node in nodes.items()} == EXPECTED


def test_descriptions_are_in_run_results(tmp_path: Path) -> None:
    root = described_project(tmp_path / "p", COLUMN_TESTS)
    result = pz(root, "run")
    assert result.exit_code == 0, result.output
    found = {n["name"]: n.get("description") for n in result.run_results()["nodes"]}
    assert found == EXPECTED


def test_docs_site_shows_column_docs_on_outputs_and_test_config_on_checks(tmp_path: Path) -> None:
    root = described_project(tmp_path / "p", COLUMN_TESTS)
    out = tmp_path / "site"
    result = pz(root, "docs", "generate", "--out", str(out))
    assert result.exit_code == 0, result.output
    node = {n["id"]: n for n in document(out / "index.html")["nodes"]}
    assert node["lake.p"]["panel"]["columns"][0]["description"] == "The order's id."
    check = node["chk_p__unique_id"]["panel"]
    assert check["description"] == "The order's id."
    assert (check["column"], check["where"], check["warn_if"], check["error_if"]) == (
        "id",
        "id > 0",
        ">5",
        "!=0",
    )
