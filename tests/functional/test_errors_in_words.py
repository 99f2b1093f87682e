"""Errors at once and in words a user reads: a schema error does not hide cross-field errors, positions
survive ephemeral inlining, DuckDB's multi-line messages are condensed, connector messages are not prefixed
twice."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import pz, write_project

FILES = {
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
    "sinks/lake.yml": "connector: localfiles\nconnection: { root: out }\n",
    "data/orders.csv": "id,customer,amount\n1,ada,1.5\n",
}

INTERNALS = re.compile(r"; ;|Candidate bindings|<locals>|invalid literal|Traceback|\n\s*LINE \d+:")


def _errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def test_a_schema_error_does_not_hide_the_files_cross_field_errors(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **FILES,
            "sources/pg.yml": """
                connector: postgres
                connection: { dsn: "postgresql://u@h/db", host: h, portt: 1 }
                datasets:
                  a: { table: t, query: "select 1", columns: { id: bigint } }
                  b: { tablee: t, columns: { id: bigint } }
            """,
            "pipelines/p.sql": "INSERT INTO {{ sink('lake', 'p') }}\nSELECT * FROM {{ source('pg', 'a') }}\n",
        },
    )
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    errors = _errors(result.output)
    assert [re.findall(r"^error: (PZ\d+) sources/pg.yml:(\d+):", e)[0] for e in errors] == [
        ("PZ0304", "2"),  # dsn and host exclude each other (cross-field)
        ("PZ0301", "2"),  # unknown key portt (schema)
        ("PZ0304", "4"),  # dataset a: table and query (cross-field)
        ("PZ0302", "5"),  # dataset b: unknown key tablee (schema)
    ], result.output
    assert "'host' and 'dsn' exclude each other" in errors[0]
    assert "dataset 'a'" in errors[2] and "exactly one of table: or query:" in errors[2]
    assert "validate() crashed" not in result.output


EPHEMERAL = """
    SELECT id,
           customer,
           amount
    FROM {{ source('files', 'orders') }}
    WHERE amount > 0
"""


def test_positions_stay_right_after_an_ephemeral_is_inlined(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **FILES,
            "pipelines/e.sql": EPHEMERAL,
            "pipelines/e.yml": "materialized: ephemeral\n",
            "pipelines/a.sql": """
                INSERT INTO {{ sink('lake', 'a') }}
                SELECT id,
                       amount
                FROM {{ ref('e') }}
                WHERE id > 0
                  AND custmer = 'x'
            """,
        },
    )
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    assert _errors(result.output)[0].startswith("error: PZ0412 pipelines/a.sql:6:7: pipeline 'a': ")


def test_an_error_inside_an_inlined_ephemeral_points_into_the_ephemeral_file(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **FILES,
            "pipelines/e.sql": EPHEMERAL.replace("customer,", "custmer,"),
            "pipelines/e.yml": "materialized: ephemeral\n",
            "pipelines/a.sql": "INSERT INTO {{ sink('lake', 'a') }}\nSELECT id\nFROM {{ ref('e') }}\n",
        },
    )
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    first = _errors(result.output)[0]
    assert first.startswith("error: PZ0412 pipelines/e.sql:2:8: pipeline 'a': "), result.output
    assert "in ephemeral 'e', which 'a' inlines" in first


def test_duckdb_messages_are_condensed_to_one_line_with_its_suggestion(project_dir: Path) -> None:
    cases = {
        "a": ("SELECT o.custmer FROM {{ source('files', 'orders') }} o", 'did you mean "customer"?'),
        "b": ("SELECT custmer FROM {{ source('files', 'orders') }}", 'candidates: "customer", "amount"'),
        "c": ("SELECT lenght(customer) AS n FROM {{ source('files', 'orders') }}", 'did you mean "length"?'),
        "d": ("SELECT substr(id) AS s FROM {{ source('files', 'orders') }}", "candidates: substr(VARCHAR"),
    }
    files = {
        f"pipelines/{n}.sql": f"INSERT INTO {{{{ sink('lake', '{n}') }}}}\n{q}\n"
        for n, (q, _) in cases.items()
    }
    write_project(project_dir, {**FILES, **files})
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    errors = _errors(result.output)
    assert len(errors) == 4, result.output
    for line, (_, says) in zip(errors, cases.values(), strict=True):
        assert says in line, line
    assert not INTERNALS.search(result.output), result.output


def test_a_runtime_duckdb_error_is_one_line(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **FILES,
            "pipelines/a.sql": "INSERT INTO {{ sink('lake', 'a') }}\nSELECT CAST(customer AS INT) AS v\n"
            "FROM {{ source('files', 'orders') }}\n",
        },
    )
    result = pz(project_dir, "run")
    assert result.exit_code == 1
    failure = next(line for line in result.lines if line.startswith("  PZ0507"))
    assert failure.startswith(
        "  PZ0507: pipeline 'a' (pipelines/a.sql): Could not convert string 'ada' to INT32"
    )
    assert not INTERNALS.search(result.output), result.output
    message = result.node("lake.a")["error"]["message"]  # 'a' is streamed: its write ran the query
    assert message.endswith("(streamed into sink 'lake' output 'a'; nothing was written)"), message
    assert "\n" not in message and not message.startswith("Conversion Error")
    run_dir = sorted((project_dir / ".pz" / "runs").iterdir())[-1]
    debug = (run_dir / "pz.log").read_text()  # the full text is kept for whoever digs deeper
    assert "Conversion Error: Could not convert string 'ada' to INT32" in debug


def test_a_connector_message_naming_its_output_is_not_prefixed_twice(project_dir: Path) -> None:
    long_name = "x" * 70
    write_project(
        project_dir,
        {
            **FILES,
            "sinks/my.yml": """
                connector: mysql
                connection: { host: 127.0.0.1, port: 3306, user: root, password: "", database: test }
                outputs:
                  a: { table: pz_errors_dup_prefix }
            """,
            "pipelines/a.sql": f"INSERT INTO {{{{ sink('my', 'a') }}}}\nSELECT 1 AS {long_name}\n",
        },
    )
    result = pz(project_dir, "run")
    assert result.exit_code == 1
    failure = next(line for line in result.lines if line.startswith("  PZ0501"))
    assert failure.count("sink 'my' output 'a'") == 1, failure
    assert f"column name '{long_name}' is not a valid MySQL column name" in failure


def test_a_csv_parse_failure_names_file_line_and_cause_and_is_not_retried(project_dir: Path) -> None:
    """The row echoed in DuckDB's message holds `timeout` and a quoted newline: the failure is the data's (a
    conversion error, one attempt, not transient), its message names the file, the line and the cause, and
    a next: line follows it, as after a validation error."""
    write_project(
        project_dir,
        {
            **FILES,
            "data/orders.csv": 'id,customer,amount\n1,ada,1.5\ntimeout,"b\nc",2\n',
            "pipelines/a.sql": "INSERT INTO {{ sink('lake', 'a') }}\n"
            "SELECT id FROM {{ source('files', 'orders') }}\n",
        },
    )
    result = pz(project_dir, "run")
    assert result.exit_code == 1, result.output
    assert not any(line.startswith("RETRY") for line in result.lines), result.output
    fail = result.lines.index(
        next(line for line in result.lines if line.startswith("FAIL src_files__orders"))
    )
    data = project_dir / "data" / "orders.csv"
    assert result.lines[fail + 1] == (
        f"  PZ0505: source 'files' dataset 'orders': CSV error in {data} line 3: Error when converting "
        'column "id". Could not convert string "timeout" to \'BIGINT\''
    ), result.output
    assert result.lines[fail + 2].startswith("  next: fix the cause shown at the source"), result.output
    node = result.node("src_files__orders")
    assert node["attempts"] == 1 and node["error"]["transient"] is False


def test_a_value_with_a_newline_is_escaped_not_a_place_to_cut_the_message(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **FILES,
            "data/orders.csv": 'id,customer,amount\n1,"ada\nlovelace",1.5\n',
            "pipelines/a.sql": "INSERT INTO {{ sink('lake', 'a') }}\nSELECT CAST(customer AS INT) AS v\n"
            "FROM {{ source('files', 'orders') }}\n",
        },
    )
    result = pz(project_dir, "run")
    assert result.exit_code == 1, result.output
    failure = next(line for line in result.lines if line.startswith("  PZ0507"))
    assert failure.startswith(
        "  PZ0507: pipeline 'a' (pipelines/a.sql): Could not convert string 'ada\\nlovelace' to INT32"
    ), failure
    after = result.lines[result.lines.index(failure) + 1]
    assert after.startswith("  next: fix the SQL, then `pz run`"), result.output
