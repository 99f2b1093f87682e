"""Tier 4 binds a pipeline as a relation and creates its table from the result's columns: the table, its
column names and types, are those CREATE TABLE … AS … WITH NO DATA gives, and text that only a subquery
takes (DESCRIBE, SHOW, SUMMARIZE) is refused as before."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from tests.conftest import pz, write_project

SOURCE_COLUMNS = "id bigint, name varchar, amount decimal(12,2), ts timestamp"
BASE = {
    "project.yml": "name: shop\n",
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          orders:
            format: csv
            path: orders.csv
            columns: { id: bigint, name: varchar, amount: 'decimal(12,2)', ts: timestamp }
    """,
    "sinks/lake.yml": "connector: localfiles\nconnection: { root: out }\n",
    "data/orders.csv": "id,name,amount,ts\n1,a,1.5,2020-01-01 00:00:00\n",
}
# results whose types CREATE TABLE AS settles: a NULL typed, a collation, nested types
TYPED = {
    "loose": (
        "SELECT id, NULL AS nothing, name COLLATE nocase AS folded\nFROM {{ source('files', 'orders') }}"
    ),
    "nested": (
        "SELECT {'k': id, 'v': [amount]} AS s, map([name], [ts]) AS m, amount * 2 AS doubled,\n"
        "       'x'::ENUM('x', 'y') AS e, [1, 2]::INTEGER[2] AS arr\nFROM {{ source('files', 'orders') }}"
    ),
    "reader": (
        "SELECT d.nothing, d.folded, n.s.k, n.m, n.e\nFROM {{ ref('loose') }} AS d, {{ ref('nested') }} AS n"
    ),
}


def _ctas_columns(sql: str, tables: dict[str, str]) -> list[list[str]]:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE src ({SOURCE_COLUMNS})")
    for name, query in tables.items():
        con.execute(f'CREATE TABLE "{name}" AS {query} WITH NO DATA')
    con.execute(f"CREATE TABLE t AS {sql} WITH NO DATA")
    return [[str(r[0]), str(r[1])] for r in con.execute("DESCRIBE t").fetchall()]


def test_bound_tables_are_named_and_typed_as_create_table_as_makes_them(project_dir: Path) -> None:
    files = dict(BASE)
    for name, sql in TYPED.items():
        sink = "INSERT INTO {{ sink('lake', 'r') }}\n" if name == "reader" else ""
        files[f"pipelines/{name}.sql"] = sink + sql + "\n"
    result = pz(write_project(project_dir, files), "validate")
    assert result.exit_code == 0, result.output
    cached = json.loads((project_dir / ".pz" / "target" / "binds.json").read_text())
    kept = _values(cached)
    plain = {name: _plain(sql) for name, sql in TYPED.items()}
    for name in TYPED:
        before = {k: plain[k] for k in ("loose", "nested")} if name == "reader" else {}
        assert _ctas_columns(plain[name], before) in kept, name


def _plain(sql: str) -> str:
    for call, table in [
        ("source('files', 'orders')", "src"),
        ("ref('loose')", "loose"),
        ("ref('nested')", "nested"),
    ]:
        sql = sql.replace("{{ " + call + " }}", table)
    return sql


def _values(data: object) -> list[object]:
    """Every list of [column, type] pairs anywhere in binds.json."""
    found: list[object] = []
    if isinstance(data, dict):
        for value in data.values():
            found += _values(value)
    elif isinstance(data, list):
        if data and all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in data
        ):
            found.append(data)
        else:
            for value in data:
                found += _values(value)
    return found


@pytest.mark.parametrize(
    "query", ["DESCRIBE {{ ref('a') }}", "WITH x AS (SUMMARIZE {{ ref('a') }}) SELECT * FROM x"]
)
def test_a_statement_only_a_subquery_takes_is_still_refused(project_dir: Path, query: str) -> None:
    files = {
        **BASE,
        "pipelines/a.sql": "SELECT id FROM {{ source('files', 'orders') }}\n",
        "pipelines/b.sql": "INSERT INTO {{ sink('lake', 'b') }}\n" + query + "\n",
    }
    result = pz(write_project(project_dir, files), "validate")
    assert result.exit_code != 0
    assert "pipelines/b.sql" in result.output and "error: PZ04" in result.output, result.output


@pytest.mark.parametrize(
    "query",
    [
        "SELECT id FROM {{ source('files', 'orders') }}) AS t, (SELECT 2 AS b",  # closes the wrapping
        "SELECT 1 AS a) UNION ALL (SELECT 2",
    ],
)
def test_a_query_that_is_one_only_once_wrapped_is_a_syntax_error(project_dir: Path, query: str) -> None:
    files = {**BASE, "pipelines/b.sql": "INSERT INTO {{ sink('lake', 'b') }}\n" + query + "\n"}
    result = pz(write_project(project_dir, files), "validate")
    assert result.exit_code == 2, result.output
    assert "error: PZ0401 pipelines/b.sql:2" in result.output and 'near ")"' in result.output, result.output
