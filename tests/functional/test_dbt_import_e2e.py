"""Imported dbt projects run in pz with zero hand edits and produce the tables `dbt build` produced
(tests/fixtures/dbt/expected: EXCEPT ALL both ways, column names and types).

These need the dbt habits of dbt_syntax.md (folder config, dbt test spellings, shared macros and helpers,
views), built by other lanes: marked `needs_dbt_habits`, and skipped while project.yml has no `pipelines:`
folder config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import pz
from tests.functional.test_dbt_import import compare_with_dbt, imported


def _has_folder_config() -> bool:
    import pipelinez.config

    schema = Path(pipelinez.config.__file__).parent / "schemas" / "project.schema.json"
    return "pipelines" in json.loads(schema.read_text()).get("properties", {})


pytestmark = [
    pytest.mark.needs_dbt_habits,
    pytest.mark.skipif(
        not _has_folder_config(), reason="needs the dbt habits (folder config in project.yml)"
    ),
]


def _statuses(result_nodes: list[dict[str, object]]) -> dict[str, object]:
    return {str(n["name"]): n["status"] for n in result_nodes}


def test_jaffle_duckdb_validates_runs_and_matches_dbt_build(tmp_path: Path) -> None:
    out = imported(tmp_path, "jaffle_duckdb")
    validate = pz(out, "validate")
    assert validate.exit_code == 0, validate.output
    run = pz(out, "run")
    assert run.exit_code == 0, run.output
    compare_with_dbt(out / "jaffle_shop.duckdb", "jaffle_duckdb")
    statuses = _statuses(run.run_results()["nodes"])
    assert statuses["chk_orders__relationships_customer_id"] == "success"


def test_jaffle_shop_validates_runs_and_matches_dbt_build(tmp_path: Path) -> None:
    out = imported(tmp_path, "jaffle_shop")
    validate = pz(out, "validate")
    assert validate.exit_code == 0, validate.output
    run = pz(out, "run")
    assert run.exit_code == 0, run.output
    compare_with_dbt(out / "jaffle_shop.duckdb", "jaffle_shop")
    statuses = _statuses(run.run_results()["nodes"])
    # the relationship test from order_items to orders: a check pointing downstream
    assert statuses["chk_order_items__relationships_order_id"] == "success"
    assert statuses["chk_test__assert_order_total_positive"] == "success"
    again = pz(out, "run")  # the incremental stg_locations reads only new rows and merges them
    assert again.exit_code == 0, again.output
    compare_with_dbt(out / "jaffle_shop.duckdb", "jaffle_shop")
