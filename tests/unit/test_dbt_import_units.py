"""The tricky cores of `pz import dbt`: dbt's seed typing, config() blocks, the names pz cannot render,
incremental filters, adapter.dispatch, schema naming and the YAML writer."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from pipelinez.importers.dbt.incremental import convert
from pipelinez.importers.dbt.jinja_text import extract_configs, rewrite, unresolved
from pipelinez.importers.dbt.macros import read_macros
from pipelinez.importers.dbt.naming import SchemaNamer
from pipelinez.importers.dbt.profiles import Target
from pipelinez.importers.dbt.seeds import column_type, seed_columns
from pipelinez.importers.dbt.yamlio import dump_yaml


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["1", "22", ""], "integer"),  # DuckDB's CSV reader would say BIGINT
        (["1.5", "2"], "double"),
        (["1.0"], "double"),  # a digit after the point makes float8
        (["2024-01-02", "null"], "date"),
        (["2024-01-02 10:00:00"], "timestamp"),
        (["2024-01-02T10:00:00"], "timestamp"),
        (["True", "false"], "boolean"),
        (["1", "x"], "varchar"),
        (["", "NULL"], "integer"),  # only NULLs
        (["2024-13-40"], "varchar"),
    ],
)
def test_seed_column_types_follow_dbt(values: list[str], expected: str) -> None:
    assert column_type(values) == expected


def test_seed_columns_in_file_order() -> None:
    assert seed_columns("b,a\n1,x\n") == {"b": "integer", "a": "varchar"}


def test_config_blocks_are_removed_keeping_lines() -> None:
    text = (
        "{{\n  config(materialized='incremental', unique_key=['a', 'b'], enabled=true, tags='x')\n}}\n"
        "select 1\n"
    )
    rest, config, problems = extract_configs(text)
    assert config == {"materialized": "incremental", "unique_key": ["a", "b"], "enabled": True, "tags": "x"}
    assert problems == [] and rest == "\n\n\nselect 1\n"
    _, _, problems = extract_configs("{{ config(schema=var('s')) }}\nselect 1")
    assert problems and problems[0][0] == 1 and "schema=" in problems[0][1]


def test_helpers_rewritten_and_unresolved_names_found_with_lines() -> None:
    text = rewrite(
        "select {{ dbt_utils.generate_surrogate_key(['a']) }},\n"
        "  {{ dbt.datediff('a', 'b', 'day') }}, {{ env_var('X') }}\n"
        "from {{ ref('t') }}\n"
        "{% set n = 3 %}{{ my_macro(n) }} {{ dbt_utils.pivot('c', []) }}\n"
        "{{ adapter.dispatch('x')() }} {% if is_incremental() %}{{ this }}{% endif %}"
    )
    assert "{{ generate_surrogate_key(['a']) }}" in text and "{{ datediff(" in text and "env('X')" in text
    found = [(u.line, u.macro) for u in unresolved(text, frozenset({"my_macro"}))]
    assert found == [(4, "dbt_utils.pivot"), (5, "adapter.dispatch"), (5, "is_incremental"), (5, "this")]


def test_incremental_cursor_filter_becomes_a_watermark() -> None:
    sql = (
        "select * from {{ source('s', 'd') }}\n{% if is_incremental() %}\n"
        "  where ts >= (select max(ts) from {{ this }})\n{% endif %}\n"
    )
    done = convert(sql, {("s", "d"): {"ts": "timestamp"}})
    assert done.watermark == ("s", "d")
    assert "where ts >= {{ watermark('s', 'd') }}" in done.text and "is_incremental" not in done.text
    untyped = convert(sql, {("s", "d"): {"ts": "varchar"}})
    assert untyped.watermark is None and "cursor ts" in untyped.reason and "watermark" not in untyped.text
    other = convert(sql.replace(">=", "="), {("s", "d"): {"ts": "timestamp"}})
    assert other.watermark is None and "not `<column> >" in other.reason


def test_dispatch_resolved_and_naming_macros_left_out(tmp_path: Path) -> None:
    (tmp_path / "macros").mkdir()
    (tmp_path / "macros" / "m.sql").write_text(
        "{% macro f(x) %}{{ return(adapter.dispatch('f')(x)) }}{% endmacro %}\n"
        "{% macro default__f(x) %}{{ x }} + 1{% endmacro %}\n"
        "{% macro duckdb__f(x) %}{{ x }} + 2{% endmacro %}\n"
        "{% macro generate_schema_name(c, node) %}{{ c or target.schema }}{% endmacro %}\n"
    )
    macros = read_macros(tmp_path, ["macros"], "duckdb")
    assert macros.files == {"macros/m.sql": "{% macro f(x) -%}{{ x }} + 2{%- endmacro %}\n"}
    assert macros.names == ["f"] and macros.schema_macro is not None
    namer = SchemaNamer(Target("dev", "duckdb", "main", "db", {}), macros.schema_macro)
    assert namer.schema("raw", "model", "m") == "raw" and namer.schema(None, "model", "m") == "main"
    default = SchemaNamer(Target("dev", "duckdb", "main", "db", {}), None)
    assert default.schema("raw", "model", "m") == "main_raw"


def test_yaml_writer_round_trips_tricky_values() -> None:
    data = {
        "a": "yes",
        "b": "1.0",
        "c": "x: y # z",
        "d": ["ref('x')", "on", None, True, 3],
        "e": {"f": {"g": "{{ doc('x') }}"}, "h": []},
        "i": "2024-01-01",
        "j": "it's",
    }
    assert YAML(typ="safe", pure=True).load(dump_yaml(data)) == data


def test_no_watermark_when_another_model_reads_the_source() -> None:
    sql = (
        "select * from {{ source('s', 'd') }}\n{% if is_incremental() %}\n"
        "where ts > (select max(ts) from {{ this }})\n{% endif %}\n"
    )
    done = convert(sql, {("s", "d"): {"ts": "timestamp"}}, {("s", "d"): ["totals"]})
    assert done.watermark is None and "also read by totals" in done.reason


def test_no_watermark_when_another_model_refs_the_incremental_one() -> None:
    sql = (
        "select * from {{ source('s', 'd') }}\n{% if is_incremental() %}\n"
        "where ts > (select max(ts) from {{ this }})\n{% endif %}\n"
    )
    done = convert(sql, {("s", "d"): {"ts": "timestamp"}}, {}, ["daily"])
    assert done.watermark is None and "read by daily with ref()" in done.reason


def test_package_and_versioned_refs_are_unresolved() -> None:
    found = unresolved("select 1\nfrom {{ ref('pkg', 'model') }} join {{ ref('m', v=2) }}", frozenset())
    assert [(u.line, u.macro) for u in found] == [(2, "ref() of a package or a model version")] * 2


def test_compiled_relations_back_to_calls() -> None:
    from pipelinez.importers.dbt.compiled import mentions, restore_calls

    relations = {
        ("db", "main", "orders"): "{{ ref('orders') }}",
        ("db", "raw", "c"): "{{ source('e', 'c') }}",
    }
    text = 'select * from "db"."main"."orders" join raw.c on 1=1 join main.orders_x on 1=1'
    assert restore_calls(text, relations) == (
        "select * from {{ ref('orders') }} join {{ source('e', 'c') }} on 1=1 join main.orders_x on 1=1"
    )
    assert mentions(text, ("db", "main", "orders")) and not mentions(
        "main.orders_x", ("db", "main", "orders")
    )
