"""Selectors at dbt parity, each form through `pz ls` (what it matches) and `pz run` (what runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import pz, write_project

FILES = {
    "project.yml": "name: shop\n",
    "sources/ecom.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          raw_orders: { format: csv, path: orders.csv, columns: { id: bigint, customer_id: bigint } }
          raw_customers: { format: csv, path: customers.csv, columns: { id: bigint } }
    """,
    "sources/crm.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          contacts: { format: csv, path: customers.csv, columns: { id: bigint } }
    """,
    "sinks/lake.yml": "connector: localfiles\nconnection: { root: out }\n",
    "data/orders.csv": "id,customer_id\n1,1\n2,1\n",
    "data/customers.csv": "id\n1\n",
    "pipelines/staging/stg_orders.sql": "SELECT * FROM {{ source('ecom', 'raw_orders') }}\n",
    "pipelines/staging/stg_orders.yml": "tags: [staging]\nchecks:\n  - unique: { columns: [id] }\n",
    "pipelines/staging/stg_customers.sql": "SELECT * FROM {{ source('ecom', 'raw_customers') }}\n",
    "pipelines/staging/stg_contacts.sql": "SELECT * FROM {{ source('crm', 'contacts') }}\n",
    "pipelines/marts/orders.sql": """
        INSERT INTO {{ sink('lake', 'orders') }}
        SELECT o.id, c.id AS customer FROM {{ ref('stg_orders') }} o JOIN {{ ref('stg_customers') }} c
          ON o.customer_id = c.id
    """,
    "pipelines/marts/orders.yml": "tags: [nightly]\n",
    "pipelines/marts/contacts.sql": """
        INSERT INTO {{ sink('lake', 'contacts') }}
        SELECT * FROM {{ ref('stg_contacts') }}
    """,
    "pipelines/report.sql": """
        INSERT INTO {{ sink('lake', 'report') }}
        SELECT count(*) AS n FROM {{ ref('orders') }}
    """,
}


def _ls(project: Path, *args: str) -> set[str]:
    result = pz(project, "ls", *args)
    assert result.exit_code == 0, result.output
    return {line for line in result.lines if not line.startswith((" ", "warning", "1 warning", "2 warnings"))}


@pytest.fixture
def shop(project_dir: Path) -> Path:
    return write_project(project_dir, FILES)


STG_ORDERS = {"stg_orders", "chk_stg_orders__unique_id"}
STAGING = STG_ORDERS | {"stg_customers", "stg_contacts"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        (["stg_orders"], STG_ORDERS),
        (["stg_*"], STAGING),
        (["path:pipelines/staging"], STAGING),
        (["staging"], STAGING),  # a bare folder under pipelines/
        (["pipelines/marts"], {"orders", "lake.orders", "contacts", "lake.contacts"}),
        (["source:ecom.raw_orders"], {"src_ecom__raw_orders"}),
        (["source:ecom"], {"src_ecom__raw_orders", "src_ecom__raw_customers"}),
        (["source:ecom.*"], {"src_ecom__raw_orders", "src_ecom__raw_customers"}),
        (["sink:lake.report"], {"lake.report"}),
        (["tag:nightly"], {"orders", "lake.orders"}),
        (["resource_type:check"], {"chk_stg_orders__unique_id"}),
        (["resource_type:sink"], {"lake.orders", "lake.contacts", "lake.report"}),
        (["orders,resource_type:pipeline"], {"orders"}),
        (["staging,source:crm+"], {"stg_contacts"}),  # intersection of a folder and a descendants term
        (["stg_orders", "stg_customers"], STG_ORDERS | {"stg_customers"}),  # -s a b: union
        (["stg_orders stg_customers"], STG_ORDERS | {"stg_customers"}),  # space inside one value: union
        (["1+orders"], {"orders", "lake.orders", "stg_orders", "stg_customers", "chk_stg_orders__unique_id"}),
        (["orders+1"], {"orders", "lake.orders", "report"}),
        (["orders+"], {"orders", "lake.orders", "report", "lake.report"}),
        (
            ["+stg_orders"],
            STG_ORDERS | {"src_ecom__raw_orders"},
        ),
        (
            ["@stg_customers"],  # itself, its descendants, and everything those need
            {
                "src_ecom__raw_customers",
                "src_ecom__raw_orders",
                "stg_customers",
                *STG_ORDERS,
                "orders",
                "lake.orders",
                "report",
                "lake.report",
            },
        ),
    ],
)
def test_each_selector_form(shop: Path, selector: list[str], expected: set[str]) -> None:
    assert _ls(shop, "-s", *selector) == expected


def test_exclude_takes_several_values_and_select_flag_repeats(shop: Path) -> None:
    got = _ls(shop, "--select", "staging", "--select", "tag:nightly", "--exclude", "stg_contacts", "orders")
    assert got == STG_ORDERS | {"stg_customers"}  # a pipeline's name excludes its sink writes too


def test_run_adds_back_ancestors_and_runs_only_the_selection(shop: Path) -> None:
    result = pz(shop, "run", "-s", "path:pipelines/marts", "--exclude", "contacts")
    assert result.exit_code == 0, result.output
    ran = {n["name"] for n in result.run_results()["nodes"]}
    assert ran == {
        "src_ecom__raw_orders",
        "src_ecom__raw_customers",
        "stg_orders",
        "chk_stg_orders__unique_id",
        "stg_customers",
        "orders",
        "lake.orders",
    }
    assert not (shop / "out" / "contacts").exists()


def test_a_selector_matching_nothing_is_a_warning_and_exit_0(shop: Path) -> None:
    result = pz(shop, "run", "-s", "stg_ordrs")
    assert result.exit_code == 0, result.output
    assert any("PZ0250" in line and "did you mean 'stg_orders'?" in line for line in result.lines)
    assert any("PZ0251" in line for line in result.lines), result.output
    assert not (shop / "out").exists()
    # one of two terms matching nothing: the other still runs, the warning names the one
    result = pz(shop, "run", "-s", "report", "tag:nope")
    assert result.exit_code == 0, result.output
    assert any("PZ0250" in line and "'tag:nope'" in line for line in result.lines)
    assert (shop / "out" / "report.parquet").exists()


@pytest.mark.parametrize(
    ("selector", "said"),
    [
        ("color:red", "unknown method 'color:'"),
        ("resource_type:model", "names no resource type"),
        ("tag:", "has no value after 'tag:'"),
        ("@1+orders", "both @ and a leading +"),
    ],
)
def test_a_malformed_selector_is_refused(shop: Path, selector: str, said: str) -> None:
    result = pz(shop, "run", "-s", selector)
    assert result.exit_code == 2
    assert any("PZ0252" in line and said in line for line in result.lines), result.output
    assert not (shop / ".pz" / "runs").exists()


def test_ls_json_and_resource_type(shop: Path) -> None:
    result = pz(shop, "ls", "--output", "json", "-s", "orders")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.lines]
    by_name = {r["name"]: r for r in rows}
    orders = by_name["orders"]
    assert sorted(orders.pop("depends_on")) == ["chk_stg_orders__unique_id", "stg_customers", "stg_orders"]
    assert orders == {
        "name": "orders",
        "kind": "pipeline",
        "resource_type": "pipeline",
        "tags": ["nightly"],
        "path": "pipelines/marts/orders.sql",
    }
    assert by_name["lake.orders"]["kind"] == "sink_write"
    assert _ls(shop, "--resource-type", "source") == {
        "src_ecom__raw_orders",
        "src_ecom__raw_customers",
        "src_crm__contacts",
    }
    assert _ls(shop, "--resource-type", "pipeline", "-s", "tag:staging") == {"stg_orders"}
