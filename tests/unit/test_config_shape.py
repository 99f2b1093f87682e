"""Tier 1 shape: every code at the right file:line:col, all problems of a file reported together."""

from __future__ import annotations

from textwrap import dedent

import pytest

from pipelinez.config.shape import validate_shape
from pipelinez.config.yaml_loader import parse_yaml
from pipelinez.core.codes import BY_CODE
from pipelinez.core.diagnostics import Diagnostic

FILES = {
    "project": "project.yml",
    "source": "sources/pg.yml",
    "sink": "sinks/wh.yml",
    "sidecar": "pipelines/p.yml",
}


def shape(kind: str, text: str) -> list[Diagnostic]:
    doc, problems = parse_yaml(dedent(text), FILES[kind])
    assert problems == [] and doc is not None
    return validate_shape(doc, kind)


def found(kind: str, text: str) -> list[tuple[str, str]]:
    return [(d.code, d.place.render()) for d in shape(kind, text)]


def only(kind: str, text: str) -> Diagnostic:
    diagnostics = shape(kind, text)
    assert len(diagnostics) == 1, diagnostics
    return diagnostics[0]


# --- valid files -----------------------------------------------------------------------------------


def test_reference_project_yml_is_valid() -> None:
    assert (
        found(
            "project",
            """\
        name: shop
        vars:
          min_date: { type: date, default: "2024-01-01" }
          limit: { type: int, default: 10, description: rows }
        env:
          PG_PASSWORD: { required: true, secret: true }
          WAREHOUSE_HOST: { default: localhost }
          PLAIN:
        connectors:
          postgres: ">=1.0,<2"
        engine:
          threads: 4
          fail_fast: false
          force_universal: false
          retry: { max_attempts: 3, base_delay: 1s, max_delay: 30s }
          breaker: { failure_threshold: 5, cool_down: 30s }
        retention: { keep_last: 10 }
        """,
        )
        == []
    )


def test_connector_keys_stay_open_and_templates_are_fine_in_them() -> None:
    assert (
        found(
            "source",
            """\
        connector: postgres
        connection: { host: "{{ env('HOST') }}", port: 5432, anything: [1, 2] }
        datasets:
          orders:
            table: public.orders
            query: "select 1"
            partitions: { column: id, count: 8 }
            files_per_partition: 4
            sync: { mode: incremental, cursor: updated_at, start: "{{ var('min_date') }}", window: 1d }
          empty:
        """,
        )
        == []
    )
    assert (
        found(
            "sink",
            """\
        connector: localfiles
        outputs:
          a: { path: out/a.csv, format: csv, delimiter: ";", header: true, strategy: replace }
          b:
        """,
        )
        == []
    )


# --- PZ0102 unknown key -------------------------------------------------------------------------


def test_pz0102_unknown_key_at_the_key_with_did_you_mean() -> None:
    d = only(
        "project",
        """\
        name: shop
        engine:
          thread: 4
        """,
    )
    assert (d.code, d.place.render()) == ("PZ0102", "project.yml:3:3")
    assert "'thread'" in d.message and "did you mean 'threads'?" in d.message
    assert d.next_step == BY_CODE["PZ0102"].next_step


def test_pz0102_without_a_close_match_lists_the_allowed_keys() -> None:
    d = only("sidecar", "owner: me\n")
    assert (d.code, d.place.render()) == ("PZ0102", "pipelines/p.yml:1:1")
    assert "allowed keys: description, materialized, tags, checks" in d.message


# --- PZ0103 wrong type / value --------------------------------------------------------------------


def test_pz0103_wrong_type_and_enum_say_what_is_allowed() -> None:
    diagnostics = shape(
        "sink",
        """\
        connector: postgres
        max_concurrency: two
        outputs:
          o:
            strategy: upsert
            keys: order_id
            allow_empty: 1
        """,
    )
    assert [(d.code, d.place.render()) for d in diagnostics] == [
        ("PZ0103", "sinks/wh.yml:2:18"),
        ("PZ0103", "sinks/wh.yml:5:15"),
        ("PZ0103", "sinks/wh.yml:6:11"),
        ("PZ0103", "sinks/wh.yml:7:18"),
    ]
    assert "must be an integer, not a string ('two')" in diagnostics[0].message
    assert "one of: replace, merge, append" in diagnostics[1].message
    assert "must be a list" in diagnostics[2].message
    assert "true or false" in diagnostics[3].message


def test_pz0103_templates_in_typed_engine_keys_are_explained() -> None:
    d = only(
        "source",
        """\
        connector: pg
        max_concurrency: "{{ var('n') }}"
        """,
    )
    assert d.code == "PZ0103" and "templates" in d.message


def test_pz0103_var_type_outside_the_allowed_types() -> None:
    d = only(
        "project",
        """\
        name: shop
        vars:
          when: { type: datetime }
        """,
    )
    assert (d.code, d.place.render()) == ("PZ0103", "project.yml:3:17")
    assert "string, int, bigint, decimal, bool, date, timestamp" in d.message
    assert "did you mean 'date'?" in d.message


# --- PZ0104 missing key -----------------------------------------------------------------------


def test_pz0104_missing_required_keys() -> None:
    assert found("project", "engine: { threads: 2 }\n") == [("PZ0104", "project.yml:1:1")]
    diagnostics = shape(
        "source",
        """\
        connection: {}
        datasets:
          orders:
            sync: { mode: incremental }
        """,
    )
    assert [(d.code, d.place.render()) for d in diagnostics] == [
        ("PZ0104", "sources/pg.yml:1:1"),
        ("PZ0104", "sources/pg.yml:4:5"),
    ]
    assert "'connector'" in diagnostics[0].message
    assert "'datasets.orders.sync' is missing required key 'cursor'" in diagnostics[1].message


# --- PZ0106 durations ------------------------------------------------------------------------------


def test_pz0106_bad_duration() -> None:
    d = only(
        "source",
        """\
        connector: pg
        datasets:
          orders:
            sync: { mode: incremental, cursor: u, window: 1 week }
        """,
    )
    assert (d.code, d.place.render()) == ("PZ0106", "sources/pg.yml:4:51")
    assert "'1 week'" in d.message and "2s" in d.message


# --- PZ0107 names ------------------------------------------------------------------------------------


def test_pz0107_dataset_output_and_var_names() -> None:
    assert found("source", "connector: pg\ndatasets:\n  9orders: {}\n  order-items: {}\n") == [
        ("PZ0107", "sources/pg.yml:3:3"),
        ("PZ0107", "sources/pg.yml:4:3"),
    ]
    d = only("sink", "connector: pg\noutputs:\n  my output: {}\n")
    assert (d.code, d.place.render()) == ("PZ0107", "sinks/wh.yml:3:3")
    assert "'my output' is not a valid output name" in d.message
    assert found("project", "name: x\nvars:\n  1st: { type: int }\n") == [("PZ0107", "project.yml:3:3")]


# --- PZ0112 input on a sink output ---------------------------------------------------------------


def test_pz0112_input_on_a_sink_output_has_its_own_code() -> None:
    d = only(
        "sink",
        """\
        connector: postgres
        outputs:
          orders_enriched:
            table: analytics.orders_enriched
            input: orders
        """,
    )
    assert (d.code, d.place.render()) == ("PZ0112", "sinks/wh.yml:5:5")
    assert "input" in d.message
    assert "INSERT INTO {{ sink('wh', 'orders_enriched') }}" in d.next_step


# --- PZ0113 checks -----------------------------------------------------------------------------------


def test_pz0113_every_check_problem_of_a_file_is_reported_together() -> None:
    diagnostics = shape(
        "sidecar",
        """\
        checks:
          - not_nul: { columns: [a] }
          - not_null: { column: a }
          - unique: [a]
          - accepted_values: { column: s }
          - row_count: { min: 5, max: 1 }
          - freshness: { column: u, max_age: soon }
            severity: fatal
          - expression: { sql: "a > 0" }
            severty: warn
          - not_null
          - unique: { columns: [a] }
            not_null: { columns: [a] }
          - severity: warn
          - row_count: {}
        """,
    )
    assert [(d.code, d.place.render()) for d in diagnostics] == [
        ("PZ0113", "pipelines/p.yml:2:5"),  # unknown type
        ("PZ0113", "pipelines/p.yml:3:5"),  # missing option columns
        ("PZ0113", "pipelines/p.yml:3:17"),  # unknown option column
        ("PZ0113", "pipelines/p.yml:4:13"),  # options not a mapping
        ("PZ0113", "pipelines/p.yml:5:5"),  # missing option values
        ("PZ0113", "pipelines/p.yml:6:23"),  # min > max
        ("PZ0113", "pipelines/p.yml:7:38"),  # bad duration
        ("PZ0113", "pipelines/p.yml:8:15"),  # bad severity
        ("PZ0113", "pipelines/p.yml:10:5"),  # unknown sibling key
        ("PZ0113", "pipelines/p.yml:11:5"),  # not a mapping
        ("PZ0113", "pipelines/p.yml:12:5"),  # two types
        ("PZ0113", "pipelines/p.yml:14:5"),  # no type
        ("PZ0113", "pipelines/p.yml:15:16"),  # row_count sets nothing
    ]
    messages = [d.message for d in diagnostics]
    assert "unknown check type 'not_nul' (did you mean 'not_null'?)" in messages[0]
    assert "check 'not_null' is missing option 'columns'" in messages[1]
    assert "unknown option 'column' for check 'not_null' (did you mean 'columns'?)" in messages[2]
    assert "options of check 'unique' must be a mapping" in messages[3]
    assert "missing option 'values'" in messages[4]
    assert "min 5 greater than max 1" in messages[5]
    assert "'soon'" in messages[6]
    assert "error, warn" in messages[7]
    assert "unknown key 'severty' in a check (did you mean 'severity'?)" in messages[8]
    assert "must be a mapping" in messages[9]
    assert "names 2 check types (unique, not_null)" in messages[10]
    assert "names no check type" in messages[11]
    assert "min, max" in messages[12]
    assert "- not_null: { columns: [order_id] }" in diagnostics[1].next_step


def test_pz0113_dataset_checks_in_sources() -> None:
    d = only(
        "source",
        """\
        connector: pg
        datasets:
          orders:
            checks:
              - uniq: { columns: [id] }
        """,
    )
    assert (d.code, d.place.render()) == ("PZ0113", "sources/pg.yml:5:9")
    assert "did you mean 'unique'?" in d.message


def test_pz0113_checks_must_be_a_list() -> None:
    d = only("sidecar", "checks: { not_null: { columns: [a] } }\n")
    assert (d.code, d.place.render()) == ("PZ0113", "pipelines/p.yml:1:9")


def test_valid_checks_of_every_type() -> None:
    assert (
        found(
            "sidecar",
            """\
        description: Orders joined to their customer.
        materialized: table
        tags: [nightly]
        checks:
          - not_null: { columns: [order_id, customer] }
          - unique: { columns: [order_id] }
          - accepted_values: { column: status, values: [open, shipped, returned, 1, true] }
          - row_count: { min: 1, max: 100000000 }
          - row_count: { max: 5 }
            name: at_most_five
          - expression: { sql: "amount >= 0", name: non_negative_amount }
          - relationships: { column: customer_id, to: "source('pg', 'customers')", field: id }
          - freshness: { column: updated_at, max_age: 1d }
            severity: warn
        """,
        )
        == []
    )


# --- PZ0120 engine.breaker ---------------------------------------------------------------------------


def test_pz0120_malformed_breaker_instead_of_generic_codes() -> None:
    diagnostics = shape(
        "project",
        """\
        name: shop
        engine:
          breaker:
            failure_threshold: 0
            cool_down: 30
            cooldown: 5s
        """,
    )
    assert [(d.code, d.place.render()) for d in diagnostics] == [
        ("PZ0120", "project.yml:4:24"),
        ("PZ0120", "project.yml:5:16"),
        ("PZ0120", "project.yml:6:5"),
    ]
    assert "did you mean 'cool_down'?" in diagnostics[2].message
    assert all("failure_threshold: 5, cool_down: 30s" in d.next_step for d in diagnostics)


@pytest.mark.parametrize(
    "breaker",
    [
        "5",
        "{ failure_threshold: five }",
        "{ failure_threshold: 1.5 }",
        "{ cool_down: 5 seconds }",
        "[]",
        "{ failure_threshold: -1 }",
    ],
)
def test_pz0120_every_malformed_breaker(breaker: str) -> None:
    d = only("project", f"name: shop\nengine:\n  breaker: {breaker}\n")
    assert d.code == "PZ0120" and d.place.line == 3


# --- PZ0121 retry ------------------------------------------------------------------------------------


def test_pz0121_malformed_retry_blocks_anywhere() -> None:
    diagnostics = shape(
        "source",
        """\
        connector: pg
        retry: { max_attempts: 0 }
        datasets:
          orders:
            retry: { base_delay: 1m, max_delay: 10s }
          customers:
            retry: { base_delay: soon, attempts: 2 }
        """,
    )
    assert [(d.code, d.place.render()) for d in diagnostics] == [
        ("PZ0121", "sources/pg.yml:2:24"),
        ("PZ0121", "sources/pg.yml:5:26"),
        ("PZ0121", "sources/pg.yml:7:26"),
        ("PZ0121", "sources/pg.yml:7:32"),
    ]
    assert "at least 1" in diagnostics[0].message
    assert "base_delay 1m longer than max_delay 10s" in diagnostics[1].message
    assert "'soon'" in diagnostics[2].message
    assert "unknown key 'attempts'" in diagnostics[3].message


def test_pz0121_in_project_and_sink_outputs() -> None:
    assert found("project", "name: x\nengine:\n  retry: { max_delay: 1 }\n") == [
        ("PZ0121", "project.yml:3:23")
    ]
    assert found("sink", "connector: pg\nretry: 3\noutputs:\n  o: { retry: { max_attempts: 0.5 } }\n") == [
        ("PZ0121", "sinks/wh.yml:2:8"),
        ("PZ0121", "sinks/wh.yml:4:31"),
    ]


def test_a_dataset_named_retry_is_not_a_retry_block() -> None:
    assert found("source", "connector: pg\ndatasets:\n  retry: { table: t }\n  checks: {}\n") == []


# --- aggregation -----------------------------------------------------------------------------------


def test_a_file_with_several_problems_reports_all_sorted_and_deduplicated() -> None:
    diagnostics = shape(
        "project",
        """\
        vars:
          x: { typ: int }
        engine:
          threads: 0
          retry: { max_attempts: 0 }
          breaker: { cool_down: x }
        retention: { keep: 3 }
        extra: 1
        """,
    )
    assert [(d.code, d.place.render()) for d in diagnostics] == [
        ("PZ0104", "project.yml:1:1"),
        ("PZ0104", "project.yml:2:3"),
        ("PZ0102", "project.yml:2:8"),
        ("PZ0103", "project.yml:4:12"),
        ("PZ0121", "project.yml:5:26"),
        ("PZ0120", "project.yml:6:25"),
        ("PZ0102", "project.yml:7:14"),
        ("PZ0102", "project.yml:8:1"),
    ]
    assert len(set(diagnostics)) == len(diagnostics)
    assert all(d.is_error and d.next_step for d in diagnostics)


def test_unknown_kind_is_a_programming_error() -> None:
    doc, _ = parse_yaml("a: 1\n", "x.yml")
    assert doc is not None
    with pytest.raises(ValueError):
        validate_shape(doc, "pipeline")
