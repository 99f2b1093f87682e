"""Names pz cannot use as they are are refused at validate, each with its code, instead of being renamed
silently or failing with DuckDB's words at run time: pipeline and dataset names that differ only by case
(PZ0229), result and dataset columns that differ only by case (PZ0119), output names that are not one safe
name, for every connector (PZ0118)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SMALL, pz, write_project

ORDERS = "SELECT id FROM {{ source('files', 'orders') }}\n"


def _refused(project: Path, code: str, *others: str) -> list[str]:
    """validate and run both refuse, with `code` (and `others`) only; nothing runs. The lines of `code`."""
    for command in ("validate", "run"):
        result = pz(project, command)
        assert result.exit_code == 2, result.output
        errors = [line for line in result.lines if line.startswith("error:")]
        assert errors and all(line.split()[1] in (code, *others) for line in errors), result.output
    assert not (project / ".pz" / "runs").exists() or not any((project / ".pz" / "runs").iterdir())
    return [line for line in pz(project, "validate").lines if line.startswith(f"error: {code}")]


@pytest.mark.parametrize("other", ["pipelines/P.sql", "pipelines/marts/P.sql"])
def test_pipeline_files_that_differ_only_by_case_are_pz0229_naming_both(tmp_path: Path, other: str) -> None:
    project = write_project(
        tmp_path / "p", {**SMALL, other: "INSERT INTO {{ sink('lake', 'q') }}\nSELECT 2 AS id\n"}
    )
    (line,) = _refused(project, "PZ0229")
    assert line.startswith("error: PZ0229 pipelines/p.sql:") and other in line, line


def test_a_pipeline_and_a_staging_table_that_differ_only_by_case_are_pz0229(tmp_path: Path) -> None:
    project = write_project(
        tmp_path / "p",
        {**SMALL, "pipelines/SRC_files__orders.sql": "INSERT INTO {{ sink('lake', 'q') }}\n" + ORDERS},
    )
    (line,) = _refused(project, "PZ0229")
    assert "pipelines/SRC_files__orders.sql" in line and "dataset 'orders'" in line, line


def test_datasets_that_stage_under_names_differing_only_by_case_are_pz0229(tmp_path: Path) -> None:
    project = write_project(
        tmp_path / "p",
        {
            **SMALL,
            "sources/files.yml": """
                connector: localfiles
                connection: { root: data }
                datasets:
                  orders: { format: csv, path: orders.csv, columns: { id: bigint } }
                  Orders: { format: csv, path: orders.csv, columns: { id: bigint } }
            """,
            "pipelines/q.sql": "INSERT INTO {{ sink('lake', 'q') }}\n"
            "SELECT id FROM {{ source('files', 'Orders') }}\n",
        },
    )
    (line,) = _refused(project, "PZ0229")
    assert line.startswith("error: PZ0229 sources/files.yml:") and "'Orders'" in line and "'orders'" in line


def test_result_columns_that_differ_only_by_case_are_pz0119_not_renamed(tmp_path: Path) -> None:
    project = write_project(
        tmp_path / "p",
        {
            **SMALL,
            "pipelines/p.sql": """
                INSERT INTO {{ sink('lake', 'p') }}
                SELECT id AS a, id + 1 AS "A" FROM {{ source('files', 'orders') }}
            """,
            # an ephemeral pipeline is never a table: its result is checked on its own
            "pipelines/e.sql": "SELECT id AS code, id AS \"CODE\" FROM {{ source('files', 'orders') }}\n",
            "pipelines/e.yml": "materialized: ephemeral\n",
            "pipelines/r.sql": "INSERT INTO {{ sink('lake', 'r') }}\nSELECT * FROM {{ ref('e') }}\n",
        },
    )
    lines = _refused(project, "PZ0119")
    assert len(lines) == 2, lines
    assert any(line.startswith("error: PZ0119 pipelines/p.sql") and "'a' and 'A'" in line for line in lines)
    assert any(
        line.startswith("error: PZ0119 pipelines/e.sql") and "'code' and 'CODE'" in line for line in lines
    )
    assert not (project / "out").exists()


def test_result_columns_with_a_line_break_that_differ_only_by_case_are_pz0119(tmp_path: Path) -> None:
    """DuckDB's rename of the second name (`X\nY_1`) is recognised whatever characters the name holds."""
    project = write_project(
        tmp_path / "p",
        {
            **SMALL,
            "pipelines/p.sql": "INSERT INTO {{ sink('lake', 'p') }}\n"
            "SELECT id, 1 AS \"x\ny\", 2 AS \"X\nY\" FROM {{ source('files', 'orders') }}\n",
        },
    )
    (line,) = _refused(project, "PZ0119")
    assert line.startswith("error: PZ0119 pipelines/p.sql"), line


def test_join_columns_with_one_name_are_still_accepted(tmp_path: Path) -> None:
    """Only a case clash is refused: DuckDB's `id`, `id_1` for a SELECT * over a join stays as it was."""
    project = write_project(
        tmp_path / "p",
        {
            **SMALL,
            "pipelines/p.sql": """
                INSERT INTO {{ sink('lake', 'p') }}
                SELECT * FROM {{ source('files', 'orders') }} AS a JOIN {{ source('files', 'orders') }} AS b
                ON a.id = b.id
            """,
        },
    )
    result = pz(project, "validate")
    assert result.exit_code == 0, result.output


def test_a_contract_with_columns_that_differ_only_by_case_is_pz0119(tmp_path: Path) -> None:
    project = write_project(
        tmp_path / "p",
        {
            **SMALL,
            "sources/files.yml": """
                connector: localfiles
                connection: { root: data }
                datasets:
                  orders: { format: csv, path: orders.csv, columns: { id: bigint, ID: bigint } }
            """,
        },
    )
    (line,) = _refused(project, "PZ0119")
    assert line.startswith("error: PZ0119 sources/files.yml:4:") and "'id' and 'ID'" in line, line


SINKS = {
    "localfiles": "connector: localfiles\nconnection: { root: out }\n",
    "duckdb": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
    "postgres": "connector: postgres\nconnection: { host: 127.0.0.1, user: postgres, database: x }\n",
    "mysql": 'connector: mysql\nconnection: { host: 127.0.0.1, user: root, password: "", database: x }\n',
    "http": "connector: http\nconnection: { base_url: 'http://127.0.0.1:9' }\n",
    "s3": "connector: s3\nconnection: { bucket: b, endpoint: 'http://127.0.0.1:9', url_style: path }\n",
}
# each name as written in the SQL file (a Jinja string literal: \\ is one backslash, \t a tab), and why
UNSAFE = {
    "../x": "holds a path separator",
    "a/b": "holds a path separator",
    "a\\\\b": "holds a path separator",
    "..": "is '..'",
    "": "is empty",
    "  ": "is empty",
    "x\\ty": "holds a control character",
}


@pytest.mark.parametrize("connector", sorted(SINKS))
def test_output_names_that_are_not_one_safe_name_are_pz0118_for_every_connector(
    tmp_path: Path, connector: str
) -> None:
    clauses = "".join(f"INSERT INTO {{{{ sink('out', '{name}') }}}}\n" for name in UNSAFE)
    project = write_project(
        tmp_path / "p",
        {**SMALL, "sinks/out.yml": SINKS[connector], "pipelines/p.sql": clauses + ORDERS},
    )
    # http cannot replace, and an output with no entry is a replace: PZ0305 too, rightly
    lines = _refused(project, "PZ0118", *(["PZ0305"] if connector == "http" else []))
    assert all(line.startswith("error: PZ0118 pipelines/p.sql:") for line in lines), lines
    reasons = [line.split("names an output that ", 1)[1].split(";", 1)[0] for line in lines]
    assert sorted(reasons) == sorted(UNSAFE.values()), lines
