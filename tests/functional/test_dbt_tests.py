"""dbt's test spellings in pz, end to end: column `tests:`/`data_tests:`, bare `- unique`, pipeline-level
`data_tests:`, `config: {severity, where, warn_if, error_if}`, `relationships.to: ref('x')`, dbt's NULL
semantics of `expression`, and singular tests (`tests/**/*.sql`)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import PzResult, pz, write_project

BASE = {
    "project.yml": "name: shop\n",
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          orders: { format: csv, path: orders.csv, columns: { id: bigint, status: varchar, amount: int } }
          customers: { format: csv, path: customers.csv }
    """,
    "sinks/lake.yml": "connector: localfiles\nconnection: { root: out }\n",
    "pipelines/orders.sql": """
        INSERT INTO {{ sink('lake', 'orders') }}
        SELECT id, status, amount FROM {{ source('files', 'orders') }}
    """,
    "pipelines/items.sql": """
        SELECT * FROM (VALUES (1, 1), (2, 2), (3, 9)) AS t(item_id, order_id)
    """,
    "data/orders.csv": "id,status,amount\n1,placed,10\n2,shipped,\n2,lost,-5\n",
    "data/customers.csv": "name\nada\n",
}


def _run(project: Path, files: dict[str, str], *args: str) -> PzResult:
    write_project(project, {**BASE, **files})
    return pz(project, "run", *args)


def _status(result: PzResult, node: str) -> str:
    return str(result.node(node)["status"])


def _line(result: PzResult, start: str) -> str:
    return next((line for line in result.lines if line.startswith(start)), "")


def test_column_tests_bare_and_mapping_spellings_become_checks(project_dir: Path) -> None:
    sidecar = """
        columns:
          id:
            description: the order
            tests:
              - unique
              - not_null
          status:
            data_tests:
              - accepted_values: { values: [placed, shipped], config: { severity: warn } }
    """
    result = _run(project_dir, {"pipelines/orders.yml": sidecar})
    assert result.exit_code == 1, result.output
    assert _line(result, "FAIL chk_orders__unique_id 2 rows"), result.output
    assert _status(result, "chk_orders__not_null_id") == "success"
    assert _line(result, "WARN chk_orders__accepted_values_status 1 rows"), result.output
    assert _status(result, "lake.orders") == "skipped"  # the error-severity test blocks the write


def test_pipeline_data_tests_and_config_where(project_dir: Path) -> None:
    sidecar = """
        data_tests:
          - unique: { columns: [id], config: { where: "status <> 'lost'" } }
          - not_null: { columns: [amount] }
            config: { where: "id = 1" }
    """
    result = _run(project_dir, {"pipelines/orders.yml": sidecar})
    assert result.exit_code == 0, result.output
    assert _status(result, "chk_orders__unique_id") == "success"  # the duplicate id 2 is 'lost'
    assert _status(result, "chk_orders__not_null_amount") == "success"  # the NULL amount is id 2


def test_where_filter_still_finds_failures_in_the_rows_it_keeps(project_dir: Path) -> None:
    sidecar = """
        data_tests:
          - not_null: { columns: [amount], config: { where: "status = 'shipped'" } }
    """
    result = _run(project_dir, {"pipelines/orders.yml": sidecar})
    assert result.exit_code == 1, result.output
    assert _line(result, "FAIL chk_orders__not_null_amount 1 rows"), result.output


def test_thresholds_compare_the_failure_count(project_dir: Path) -> None:
    sidecar = """
        columns:
          id:
            tests:
              - unique: { config: { warn_if: ">1", error_if: ">5" } }
          amount:
            tests:
              - not_null: { config: { error_if: ">=1" } }
          status:
            tests:
              - accepted_values: { values: [placed], config: { warn_if: ">10", error_if: ">10" } }
    """
    result = _run(project_dir, {"pipelines/orders.yml": sidecar})
    # unique: 2 failing rows > 1 -> warn, not > 5 -> no error
    assert _line(result, "WARN chk_orders__unique_id 2 rows"), result.output
    assert "duplicated value(s) of (id) (warn_if >1)" in result.output
    # not_null: 1 failing row >= 1 -> error
    assert _line(result, "FAIL chk_orders__not_null_amount 1 rows"), result.output
    assert "1 row(s) with NULL in amount (error_if >=1)" in result.output
    # accepted_values: 2 failing rows, neither threshold reached -> passes
    assert _status(result, "chk_orders__accepted_values_status") == "success"
    assert result.exit_code == 1


def test_severity_warn_ignores_error_if(project_dir: Path) -> None:
    sidecar = """
        columns:
          id:
            tests:
              - unique: { config: { severity: warn, error_if: ">=1" } }
    """
    result = _run(project_dir, {"pipelines/orders.yml": sidecar})
    assert result.exit_code == 0, result.output
    assert _line(result, "WARN chk_orders__unique_id 2 rows"), result.output
    assert _status(result, "lake.orders") == "success"


def test_relationships_to_ref_and_source_spellings(project_dir: Path) -> None:
    sidecar = """
        columns:
          order_id:
            tests:
              - relationships: { to: ref('orders'), field: id }
          item_id:
            tests:
              - relationships: { to: "source('files', 'orders')", field: id, config: { severity: warn } }
    """
    result = _run(project_dir, {"pipelines/items.yml": sidecar})
    assert _line(result, "FAIL chk_items__relationships_order_id 1 rows"), result.output
    assert _line(result, "WARN chk_items__relationships_item_id 1 rows"), result.output


def test_dbt_expression_nulls_pass_but_checks_expression_nulls_fail(project_dir: Path) -> None:
    sidecar = """
        checks:
          - expression: { sql: "amount >= -10", name: pz_spelling }
        data_tests:
          - expression: { sql: "amount >= -10", name: dbt_spelling }
    """
    result = _run(project_dir, {"pipelines/orders.yml": sidecar})
    # the NULL amount: a failure for pz's checks: expression, not for dbt's expression_is_true
    assert _line(result, "FAIL chk_orders__expression_pz_spelling 1 rows"), result.output
    assert _status(result, "chk_orders__expression_dbt_spelling") == "success"


def test_source_dataset_column_tests(project_dir: Path) -> None:
    files = {
        "sources/files.yml": """
            connector: localfiles
            connection: { root: data }
            datasets:
              orders:
                format: csv
                path: orders.csv
                columns:
                  id: { type: bigint, tests: [unique] }
                  status: varchar
                  amount: { type: int, data_tests: [{ not_null: { config: { severity: warn } } }] }
                data_tests:
                  - expression: { sql: "amount > -10" }
                  - row_count: { max: 2, config: { severity: warn } }
        """
    }
    result = _run(project_dir, files)
    assert _line(result, "FAIL chk_src_files__orders__unique_id 2 rows"), result.output
    assert _line(result, "WARN chk_src_files__orders__not_null_amount 1 rows"), result.output
    assert _status(result, "chk_src_files__orders__expression_1") == "success"  # NULL amount passes
    assert _line(result, "WARN chk_src_files__orders__row_count"), result.output


def test_config_given_twice_is_refused(project_dir: Path) -> None:
    sidecar = """
        checks:
          - unique: { columns: [id] }
            severity: warn
            config: { severity: error }
    """
    write_project(project_dir, {**BASE, "pipelines/orders.yml": sidecar})
    result = pz(project_dir, "validate")
    assert result.exit_code != 0
    assert "PZ0135" in result.output and "orders.yml" in result.output


def test_unknown_bare_test_and_bad_threshold_are_refused(project_dir: Path) -> None:
    sidecar = """
        columns:
          id:
            tests:
              - uniq
              - accepted_values
              - not_null: { config: { warn_if: "more than 3" } }
              - relationships: { to: ref('orders'), field: id, arguments: {} }
    """
    write_project(project_dir, {**BASE, "pipelines/orders.yml": sidecar})
    result = pz(project_dir, "validate")
    assert result.exit_code != 0
    assert (
        "PZ0113 pipelines/orders.yml:4:9: unknown column test 'uniq' (did you mean 'unique'?)"
        in result.output
    )
    assert "column test 'accepted_values' needs options" in result.output
    assert "write it as - accepted_values: { values: [open, shipped] }" in result.output
    assert "'columns.id.tests[2].not_null.config.warn_if' is not a failure-count threshold" in result.output
    assert "unknown option 'arguments' for check 'relationships'" in result.output
    assert result.output.count("PZ0113") == 4, result.output


SINGULAR_PASS = """
    -- no order of a known status without an amount, across two pipelines
    SELECT o.id FROM {{ ref('orders') }} AS o JOIN {{ ref('items') }} AS i ON i.order_id = o.id
    WHERE o.amount IS NULL AND o.status = 'placed';
"""
SINGULAR_FAIL = """
    SELECT * FROM {{ ref('orders') }} WHERE amount < 0
"""


def test_singular_tests_pass_and_fail_and_gate_nothing(project_dir: Path) -> None:
    files = {"tests/ok.sql": SINGULAR_PASS, "tests/sub/negative_amounts.sql": SINGULAR_FAIL}
    result = _run(project_dir, files)
    assert result.exit_code == 1, result.output
    assert _status(result, "chk_test__ok") == "success"
    assert _line(result, "FAIL chk_test__negative_amounts 1 rows"), result.output
    assert "tests/sub/negative_amounts.sql: its query returned 1 row(s)" in result.output
    assert _status(result, "lake.orders") == "success"  # gates nothing: the write went ahead
    assert "PZ0223" in result.output and "'items'" in result.output  # items: still a dead leaf
    assert "test__ok" not in " ".join(line for line in result.lines if "PZ0223" in line)


def test_singular_test_runs_after_every_pipeline_it_reads(project_dir: Path) -> None:
    write_project(project_dir, {**BASE, "tests/ok.sql": SINGULAR_PASS})
    result = pz(project_dir, "--log-format", "json", "plan")
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.lines]
    nodes = {e["name"]: e for e in events if e["event"] == "plan_node"}
    assert set(nodes["chk_test__ok"]["deps"]) == {"orders", "items"}
    assert not any("chk_test__ok" in n["deps"] for n in nodes.values())


def test_singular_test_that_writes_or_reads_unknown_names_is_refused(project_dir: Path) -> None:
    files = {
        "tests/writes.sql": "INSERT INTO {{ sink('lake', 'x') }} SELECT 1",
        "tests/unknown.sql": "SELECT * FROM {{ ref('nope') }}",
        "tests/empty.sql": "-- nothing\n",
    }
    write_project(project_dir, {**BASE, **files})
    result = pz(project_dir, "validate")
    assert result.exit_code != 0
    assert "PZ0245" in result.output and "tests/writes.sql" in result.output
    assert "PZ0203" in result.output and "tests/unknown.sql" in result.output
    assert "PZ0246" in result.output and "tests/empty.sql" in result.output


def test_singular_test_sql_error_is_found_before_data_moves(project_dir: Path) -> None:
    write_project(project_dir, {**BASE, "tests/bad.sql": "SELECT no_such_column FROM {{ ref('orders') }}"})
    result = pz(project_dir, "validate")
    assert result.exit_code != 0
    assert "PZ0405 tests/bad.sql: singular test tests/bad.sql:" in result.output, result.output
    assert "no_such_column" in result.output


def test_where_renders_var_and_the_var_counts_as_used(project_dir: Path) -> None:
    files = {
        "project.yml": "name: shop\nvars:\n  skip: { type: string, default: lost }\n",
        "pipelines/orders.yml": """
            data_tests:
              - unique: { columns: [id], config: { where: "status <> '{{ var('skip') }}'" } }
        """,
    }
    result = _run(project_dir, files)
    assert result.exit_code == 0, result.output
    assert "PZ0222" not in result.output
    failing = pz(project_dir, "run", "--var", "skip=placed")
    assert failing.exit_code == 1, failing.output
    assert _line(failing, "FAIL chk_orders__unique_id 2 rows"), failing.output


def test_column_level_expression_takes_a_whole_expression_and_lets_null_pass(project_dir: Path) -> None:
    sidecar = """
        columns:
          amount:
            tests:
              - expression: { sql: "amount >= 0" }
    """
    result = _run(project_dir, {"pipelines/orders.yml": sidecar})
    assert _line(result, "FAIL chk_orders__expression_1 1 rows"), result.output  # -5 fails, NULL passes


def test_where_that_is_not_one_predicate_is_refused(project_dir: Path) -> None:
    sidecar = """
        data_tests:
          - unique: { columns: [id], config: { where: "1=0) OR (1=1" } }
          - not_null: { columns: [id], config: { where: "true; DROP TABLE x" } }
          - not_null: { columns: [amount], config: { where: "no_such_column > 1" } }
    """
    write_project(project_dir, {**BASE, "pipelines/orders.yml": sidecar})
    result = pz(project_dir, "validate")
    assert result.exit_code != 0
    assert result.output.count("PZ0405") == 3, result.output
    assert "check 'not_null_amount' on 'orders'" in result.output and "no_such_column" in result.output


def test_singular_test_reading_a_broken_source_reports_the_source_only(project_dir: Path) -> None:
    files = {
        "sources/broken.yml": "connector: localfiles\nconnection: [not, a, mapping]\n",
        "tests/reads_broken.sql": "SELECT * FROM {{ source('broken', 'x') }}",
    }
    write_project(project_dir, {**BASE, **files})
    result = pz(project_dir, "validate")
    assert result.exit_code != 0
    assert "sources/broken.yml" in result.output, result.output
    assert "Traceback" not in result.output


def test_column_tests_take_name_severity_and_config_siblings(project_dir: Path) -> None:
    sidecar = """
        columns:
          status:
            tests:
              - accepted_values: { values: [placed, shipped, lost] }
              - accepted_values: { values: [placed] }
                name: only_placed
                severity: warn
              - not_null:
                config: { where: "id = 1" }
    """
    result = _run(project_dir, {"pipelines/orders.yml": sidecar})
    assert result.exit_code == 0, result.output
    assert _status(result, "chk_orders__accepted_values_status") == "success"
    assert _line(result, "WARN chk_orders__only_placed 2 rows"), result.output
    assert _status(result, "chk_orders__not_null_status") == "success"


def test_two_column_tests_of_one_default_name_are_refused(project_dir: Path) -> None:
    sidecar = """
        columns:
          status:
            tests:
              - accepted_values: { values: [placed] }
            data_tests:
              - accepted_values: { values: [shipped] }
    """
    write_project(project_dir, {**BASE, "pipelines/orders.yml": sidecar})
    result = pz(project_dir, "validate")
    assert result.exit_code != 0
    assert "PZ0204" in result.output and "'accepted_values_status'" in result.output, result.output


def test_row_count_with_only_config_is_refused(project_dir: Path) -> None:
    sidecar = """
        data_tests:
          - row_count: { config: { severity: warn } }
    """
    write_project(project_dir, {**BASE, "pipelines/orders.yml": sidecar})
    result = pz(project_dir, "validate")
    assert result.exit_code != 0
    assert "PZ0136 pipelines/orders.yml:2:5" in result.output, result.output
    assert "neither min nor max" in result.output
