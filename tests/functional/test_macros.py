"""Shared macros (macros/**/*.sql), the portable helpers and env_var(), through the pz CLI."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb

from tests.conftest import pz, write_project

BASE = {
    "project.yml": """
        name: shop
        env:
          REGION: { default: eu }
          LAKE_DIR: {}
    """,
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          orders:
            format: csv
            path: orders.csv
            columns: { id: bigint, amount: bigint, note: varchar, placed: timestamp, shipped: date }
    """,
    "sinks/lake.yml": """
        connector: localfiles
        connection: { root: "{{ env_var('LAKE_DIR', 'out') }}" }
        outputs:
          p: { format: csv }
    """,
    "data/orders.csv": (
        "id,amount,note,placed,shipped\n"
        "1,150,a,2024-03-15 10:30:00,2024-03-20\n"
        "2,275,,2024-02-29 23:00:00,2024-03-02\n"
    ),
    "macros/money.sql": """
        {# money helpers #}
        {% macro cents_to_dollars(col, scale=2) %}round({{ col }} / 100.0, {{ scale }}){% endmacro %}

        {% macro at_least(col, n) %}{{ col }} >= {{ n }}{% endmacro %}
    """,
    "macros/nested/reads.sql": """
        {% macro orders() %}{{ source('files', 'orders') }}{% endmacro %}
        {% macro dollars_of(col) %}{{ cents_to_dollars(col, 1) }}{% endmacro %}
    """,
}


def _rows(path: Path, columns: str) -> list[tuple[object, ...]]:
    return duckdb.sql(f"SELECT {columns} FROM read_csv('{path}') ORDER BY 1").fetchall()


def test_a_macro_renders_in_a_pipeline_and_in_a_sidecar_check(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/p.sql": """
                INSERT INTO {{ sink('lake', 'p') }}
                SELECT id, {{ cents_to_dollars('amount') }} AS dollars, {{ dollars_of('amount') }} AS d1,
                       {{ env_var('REGION') }} AS region
                FROM {{ orders() }}
            """,
            "pipelines/p.yml": """
                checks:
                  - expression: { sql: "{{ at_least('dollars', 2) }}", name: two_dollars }
                    severity: warn
            """,
        },
    )
    result = pz(project_dir, "run", env={"LAKE_DIR": None, "REGION": None})
    assert result.exit_code == 0, result.output
    assert _rows(project_dir / "out" / "p.csv", "id, dollars, d1, region") == [
        (1, 1.5, 1.5, "eu"),
        (2, 2.75, 2.8, "eu"),
    ]
    check = result.node("chk_p__expression_two_dollars")
    assert check["status"] == "warn", check  # the macro's predicate: 1.50 >= 2 is false for one row
    assert "1" in str(check.get("failing_rows", check))
    # the source() a macro calls is the pipeline's input: the load runs before it
    assert result.node("src_files__orders")["status"] == "success"


def test_env_var_is_env(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/p.sql": """
                INSERT INTO {{ sink('lake', 'p') }}
                SELECT id, {{ env_var('REGION', 'xx') }} AS region FROM {{ source('files', 'orders') }}
            """,
        },
    )
    result = pz(project_dir, "run", env={"LAKE_DIR": "lake2", "REGION": "us"})
    assert result.exit_code == 0, result.output
    assert _rows(project_dir / "lake2" / "p.csv", "id, region") == [(1, "us"), (2, "us")]
    (project_dir / "pipelines" / "p.sql").write_text(
        "INSERT INTO {{ sink('lake', 'p') }}\nSELECT {{ env_var('NOPE') }} AS x\n"
    )
    refused = pz(project_dir, "validate")
    assert refused.exit_code == 2
    assert "PZ0211 pipelines/p.sql:2:8: env_var('NOPE') is not declared" in refused.output


def test_macro_errors_are_placed_in_the_macro_file_and_name_the_caller(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "macros/broken.sql": """
                {% macro fine() %}1{% endmacro %}

                {% macro boom(x) %}
                  {{ x / 0 }}
                {% endmacro %}
                {% macro forever(n) %}{{ forever(n + 1) }}{% endmacro %}
            """,
            "macros/bad/output.sql": "{% macro ok2() %}2{% endmacro %}\nSELECT 1\n",
            "macros/bad/clash.sql": (
                "{% macro ref(x) %}{% endmacro %}\n\n{% macro cents_to_dollars(x) %}{% endmacro %}\n"
            ),
            "macros/bad/syntax.sql": "{% macro half(x) %}\n{{ x }\n{% endmacro %}\n",
            "pipelines/q.sql": "INSERT INTO {{ sink('lake', 'q') }}\nSELECT {{ boom(1) }} AS x\n",
            "pipelines/r.sql": "INSERT INTO {{ sink('lake', 'r') }}\nSELECT {{ forever(1) }} AS x\n",
        },
    )
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    out = result.output
    assert (
        "PZ0239 macros/broken.sql:4: in macro 'boom' (called from pipelines/q.sql): template error: "
        "division by zero"
    ) in out
    assert "PZ0240 macros/broken.sql:6: in macro 'forever' (called from pipelines/r.sql)" in out
    assert "PZ0127 macros/bad/output.sql:1: macros/bad/output.sql holds text ('SELECT 1')" in out
    assert "PZ0129 macros/bad/clash.sql:1: macro 'ref' has the name of pz's own function ref()" in out
    assert (
        "PZ0128 macros/money.sql:2: macro 'cents_to_dollars' is defined twice: macros/bad/clash.sql:3 and "
        "macros/money.sql:2"
    ) in out
    assert "PZ0126 macros/bad/syntax.sql:2: macro file syntax error" in out
    assert "Traceback" not in out


def test_each_helper_renders_sql_duckdb_runs(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/p.sql": """
                INSERT INTO {{ sink('lake', 'p') }}
                SELECT id,
                  {{ generate_surrogate_key(['id', 'note']) }} AS sk,
                  {{ date_trunc('month', 'placed') }} AS month,
                  {{ dateadd('day', 2, 'shipped') }} AS due,
                  {{ datediff('day', 'placed', 'shipped') }} AS days,
                  {{ safe_cast("note", 'integer') }} AS note_int,
                  {{ safe_cast("'12'", 'decimal(18, 2)') }} AS twelve
                FROM {{ source('files', 'orders') }}
            """,
            "pipelines/s.sql": """
                INSERT INTO {{ sink('lake', 's') }}
                SELECT {{ star(from=ref('p'), except=['sk', 'month']) }} FROM {{ ref('p') }}
            """,
        },
    )
    result = pz(project_dir, "run", env={"LAKE_DIR": None})
    assert result.exit_code == 0, result.output
    rows = _rows(project_dir / "out" / "p.csv", "id, sk, month, due, days, note_int, twelve")
    key = duckdb.sql(
        "SELECT md5(coalesce(CAST(1 AS VARCHAR), '_pz_surrogate_key_null_') || '-' || 'a'), "
        "md5('2' || '-' || '_pz_surrogate_key_null_')"
    ).fetchone()
    assert key is not None
    assert rows == [
        (1, key[0], dt.datetime(2024, 3, 1), dt.datetime(2024, 3, 22), 5, None, 12.0),
        (2, key[1], dt.datetime(2024, 2, 1), dt.datetime(2024, 3, 4), 2, None, 12.0),
    ]
    s = duckdb.sql(f"SELECT * FROM '{project_dir}/out/s.parquet'")
    assert s.columns == ["id", "due", "days", "note_int", "twelve"]


def test_a_helper_refuses_what_it_cannot_render(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/p.sql": """
                INSERT INTO {{ sink('lake', 'p') }}
                SELECT {{ date_trunc('fortnight', 'placed') }} AS m FROM {{ source('files', 'orders') }}
            """,
        },
    )
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    assert "PZ0213 pipelines/p.sql:2" in result.output
    assert "date_trunc(): 'fortnight' is not a date part" in result.output


def test_a_macro_spends_its_callers_budget(project_dir: Path) -> None:
    spin = (
        "{% macro spin() %}{% for i in range(1000) %}{% for j in range(700) %}{% endfor %}{% endfor %}"
        "{% endmacro %}\n"
    )
    once = "INSERT INTO {{ sink('lake', 'p') }}\nSELECT 1 AS x {{ spin() }}\n"
    write_project(project_dir, {**BASE, "macros/spin.sql": spin, "pipelines/p.sql": once})
    assert pz(project_dir, "validate").exit_code == 0  # 700,000 loop steps: within the bound
    twice = "INSERT INTO {{ sink('lake', 'p') }}\nSELECT 1 AS x {{ spin() }}{{ spin() }}\n"
    (project_dir / "pipelines" / "p.sql").write_text(twice)
    result = pz(project_dir, "validate")  # 1,400,000 steps in one render: past the caller's bound
    assert result.exit_code == 2
    assert "PZ0239 macros/spin.sql:1: in macro 'spin' (called from pipelines/p.sql)" in result.output
    assert "loops ran more than 1,000,000 iterations" in result.output
