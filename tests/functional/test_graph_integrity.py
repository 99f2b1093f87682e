"""The graph never drops a node: relationships checks that point downstream (at a pipeline built from the
checked table) run after both sides exist, every node is validated, planned, run and recorded, on both
executors and through `pz retry`; a failing such check still holds back every sink write it guards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import pz, write_project

# order_items reads the items dataset; orders reads order_items; customers reads orders. Both the dataset
# and order_items carry a relationships check pointing at orders: downstream of what they check.
DOWNSTREAM = {
    "project.yml": "name: shop\nengine: { threads: 2, retry: { max_attempts: 1 } }\n",
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          items:
            format: csv
            path: items.csv
            columns: { id: bigint, order_id: bigint }
            checks:
              - relationships: { column: order_id, to: orders, field: id }
    """,
    "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
    "data/items.csv": "id,order_id\n1,10\n2,10\n3,11\n",
    "pipelines/order_items.sql": """
        INSERT INTO {{ sink('wh', 'order_items') }}
        SELECT * FROM {{ source('files', 'items') }}
    """,
    "pipelines/order_items.yml": """
        checks:
          - relationships: { column: order_id, to: orders, field: id }
    """,
    "pipelines/orders.sql": """
        INSERT INTO {{ sink('wh', 'orders') }}
        SELECT DISTINCT order_id AS id FROM {{ ref('order_items') }}
    """,
    "pipelines/customers.sql": """
        INSERT INTO {{ sink('wh', 'customers') }}
        SELECT id FROM {{ ref('orders') }}
    """,
}
NODES = {
    "src_files__items",
    "chk_src_files__items__relationships_order_id",
    "order_items",
    "chk_order_items__relationships_order_id",
    "orders",
    "customers",
    "wh.order_items",
    "wh.orders",
    "wh.customers",
}
# orders keeps order 10 only: item 3 points at an order that does not exist, so both checks fail
FAILING = {
    **DOWNSTREAM,
    "pipelines/orders.sql": """
        INSERT INTO {{ sink('wh', 'orders') }}
        SELECT DISTINCT order_id AS id FROM {{ ref('order_items') }} WHERE order_id < 11
    """,
}


def _statuses(result: Any) -> dict[str, str]:
    return {n["name"]: n["status"] for n in result.run_results()["nodes"]}


def test_validate_plan_and_run_keep_every_node_of_a_check_pointing_downstream(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p", DOWNSTREAM)
    validate = pz(project, "validate")
    assert validate.exit_code == 0 and f"({len(NODES)} nodes)" in validate.output, validate.output
    plan = pz(project, "plan")
    assert plan.exit_code == 0 and f"plan: {len(NODES)} nodes" in plan.output, plan.output
    order = [line.split()[1] for line in plan.lines if line.strip()[:1].isdigit()]
    assert set(order) == NODES
    # the check runs after both sides exist; what the pipelines between them feed waits for it
    for check in ("chk_order_items__relationships_order_id", "chk_src_files__items__relationships_order_id"):
        assert order.index("orders") < order.index(check) < order.index("wh.orders")
        assert order.index(check) < order.index("customers") and order.index(check) < order.index(
            "wh.order_items"
        )
    run = pz(project, "run")
    assert run.exit_code == 0, run.output
    assert _statuses(run) == dict.fromkeys(NODES, "success"), run.output


def test_a_failing_check_pointing_downstream_keeps_bad_data_from_every_sink(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p", FAILING)
    run = pz(project, "run")
    assert run.exit_code == 1, run.output
    statuses = _statuses(run)
    assert set(statuses) == NODES
    assert statuses["chk_order_items__relationships_order_id"] == "failed"
    assert statuses["orders"] == "success"  # the check needs it
    for blocked in ("customers", "wh.order_items", "wh.orders", "wh.customers"):
        assert statuses[blocked] == "skipped", (blocked, run.output)
    assert not (project / "out" / "wh.duckdb").exists()


def test_retry_finishes_every_node_of_a_check_pointing_downstream(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p", DOWNSTREAM)
    failed = pz(project, "run", env={"PZ_FAILPOINTS": "pipeline.start@orders"})
    assert failed.exit_code == 1, failed.output
    statuses = _statuses(failed)
    assert set(statuses) == NODES and statuses["orders"] == "failed"
    assert statuses["wh.customers"] == "skipped" and statuses["wh.order_items"] == "skipped"
    dry = pz(project, "retry", "--dry-run")
    assert dry.exit_code == 0, dry.output
    for name in NODES - {"src_files__items"}:
        assert any(name in line.split() for line in dry.lines), (name, dry.output)
    retry = pz(project, "retry")
    assert retry.exit_code == 0, retry.output
    assert set(_statuses(retry)) == NODES
    assert set(_statuses(retry).values()) == {"success"}, retry.output


@pytest.mark.parametrize("files", [DOWNSTREAM, FAILING], ids=["passing", "failing"])
def test_the_ray_executor_runs_every_node_of_a_check_pointing_downstream(
    tmp_path: Path, ray_instance: Any, files: dict[str, str]
) -> None:
    local = write_project(tmp_path / "local", files)
    remote = write_project(tmp_path / "ray", files)
    by_thread = pz(local, "run")
    by_ray = pz(remote, "run", "--executor", "ray")
    assert by_ray.exit_code == by_thread.exit_code, by_ray.output
    assert set(_statuses(by_ray)) == NODES
    assert _statuses(by_ray) == _statuses(by_thread), by_ray.output
