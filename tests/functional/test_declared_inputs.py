"""A pipeline reads only what it declares (PZ0413 and engine.external_access), no secret byte in any file
under .pz/, tier 4 reports every unknown column at once, and `validate --connect` binds what it fetched."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import PG_HOST, PG_PORT, PG_USER, SMALL, fresh_pg_database, pz, write_project

PASSWD = "/etc/passwd"


def _pipeline(query: str) -> dict[str, str]:
    return {**SMALL, "pipelines/p.sql": "INSERT INTO {{ sink('lake', 'p') }}\n" + query + "\n"}


@pytest.mark.parametrize(
    ("query", "what", "col"),
    [
        (f"SELECT column0 AS id FROM read_csv('{PASSWD}', header = false)", "table function read_csv()", 27),
        (
            f"SELECT id FROM {{{{ source('files', 'orders') }}}}, read_text('{PASSWD}')",
            "table function read_text()",
            37,
        ),
        (
            "SELECT (SELECT count(*) FROM /* x */ \"QUERY\"('SELECT 1')) AS id\n"
            "FROM {{ source('files', 'orders') }}",
            "table function query()",
            38,
        ),
        (
            "SELECT 1 AS id FROM postgres_scan('host=127.0.0.1', 'public', 't')",
            "table function postgres_scan()",
            21,
        ),
        ("SELECT value AS id FROM duckdb_settings()", "table function duckdb_settings()", 25),
        ("SELECT path AS id FROM duckdb_databases", "the catalog view duckdb_databases", 24),
    ],
    ids=["read_csv", "read_text", "query", "postgres_scan", "settings", "catalog"],
)
def test_a_table_function_reading_outside_is_refused_at_validate(
    project_dir: Path, query: str, what: str, col: int
) -> None:
    write_project(project_dir, _pipeline(query))
    result = pz(project_dir, "run")
    assert result.exit_code == 2, result.output
    assert f"error: PZ0413 pipelines/p.sql:2:{col}: pipeline 'p' reads {what}" in result.output
    assert "root:" not in result.output
    assert not (project_dir / "out").exists()  # nothing ran


@pytest.mark.parametrize(
    "statement",
    [
        "ATTACH '/tmp/other.duckdb' AS other",
        "COPY (SELECT 1) TO '/tmp/x.csv'",
        "SET threads = 1",
        "LOAD httpfs",
        "PRAGMA database_list",
    ],
)
def test_a_statement_reaching_outside_is_refused(project_dir: Path, statement: str) -> None:
    write_project(project_dir, _pipeline(f"SELECT id FROM {{{{ source('files', 'orders') }}}};\n{statement}"))
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    word = statement.split()[0].replace("LOAD", "INSTALL/LOAD").replace("PRAGMA", "the catalog view pragma_")
    assert f"PZ0413 pipelines/p.sql: pipeline 'p' runs {word}" in result.output, result.output


def test_a_file_named_as_a_table_is_refused_and_never_read(project_dir: Path) -> None:
    write_project(project_dir, {**_pipeline("SELECT * FROM 'data/orders.csv'")})
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    assert (
        "PZ0413 pipelines/p.sql: pipeline 'p' reads outside its inputs: Cannot access file" in result.output
    )


def test_a_check_reading_a_file_is_refused(project_dir: Path) -> None:
    files = {
        **SMALL,
        "pipelines/p.yml": f"""
            checks:
              - expression: {{ sql: "id < (SELECT count(*) FROM read_text('{PASSWD}'))", name: sneaky }}
        """,
    }
    write_project(project_dir, files)
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    assert (
        "PZ0413 pipelines/p.yml:2:5: check 'expression_sneaky' on 'p' reads table function read_text()"
        in result.output
    ), result.output


def test_computing_table_functions_stay_allowed(project_dir: Path) -> None:
    query = (
        "SELECT o.id + g.x AS id FROM {{ source('files', 'orders') }} AS o, generate_series(1, 2) AS g(x), "
        "unnest([1]) AS u(y)"
    )
    write_project(project_dir, _pipeline(query))
    result = pz(project_dir, "run")
    assert result.exit_code == 0, result.output
    assert "2 rows" in result.output


def test_an_input_or_cte_named_like_a_catalog_view_is_no_outside_read(project_dir: Path) -> None:
    """A CTE called pg_tables is the query's own: not DuckDB's catalog view (it was PZ0413: found by review).
    A pipeline cannot take such a name at all: staging cannot hold a table called pg_settings (PZ0238 at
    validate; it failed at run time)."""
    files = {
        **SMALL,
        "pipelines/p.sql": "INSERT INTO {{ sink('lake', 'p') }}\n"
        "WITH pg_tables AS (SELECT id FROM {{ source('files', 'orders') }}) SELECT id FROM pg_tables\n",
    }
    write_project(project_dir, files)
    result = pz(project_dir, "run")
    assert result.exit_code == 0, result.output
    assert "ok lake.p 1 rows" in result.output
    write_project(project_dir, {"pipelines/pg_settings.sql": "SELECT 1 AS id\n"})
    reserved = pz(project_dir, "validate")
    assert reserved.exit_code == 2, reserved.output
    assert [line.split()[1] for line in reserved.lines if line.startswith("error:")] == ["PZ0238"], (
        reserved.output
    )
    (project_dir / "pipelines" / "pg_settings.sql").unlink()
    write_project(project_dir, _pipeline("SELECT count(*) AS id FROM pg_tables"))  # the real view: refused
    refused = pz(project_dir, "validate")
    assert refused.exit_code == 2 and "reads the catalog view pg_tables" in refused.output, refused.output


def test_an_extension_type_is_named_for_what_it_is(project_dir: Path) -> None:
    """A type DuckDB loads from an extension on first use (INET) cannot bind in tier 4's locked database:
    PZ0414 names the extension and the opt-out, never PZ0403's 'add an explicit CAST' (found by review)."""
    write_project(
        project_dir, _pipeline("SELECT id, '127.0.0.1'::INET AS ip FROM {{ source('files', 'orders') }}")
    )
    result = pz(project_dir, "validate")
    assert result.exit_code == 2, result.output
    errors = [line for line in result.lines if line.startswith("error:")]
    assert errors == [errors[0]] and errors[0].startswith("error: PZ0414 pipelines/p.sql:"), result.output
    assert "DuckDB's 'inet' extension" in errors[0] and "external_access: true" in result.output


def test_engine_external_access_opts_out(project_dir: Path) -> None:
    files = {
        **_pipeline(f"SELECT id FROM read_csv('{project_dir / 'data' / 'orders.csv'}')"),
        "project.yml": "name: shop\nengine: { external_access: true }\n",
    }
    write_project(project_dir, files)
    result = pz(project_dir, "run")
    assert result.exit_code == 0, result.output
    assert "ok lake.p 1 rows" in result.output


def _files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


@pytest.mark.parametrize("ephemeral", [False, True], ids=["streamed", "ephemeral"])
def test_no_secret_byte_in_any_file_under_pz(project_dir: Path, ephemeral: bool) -> None:
    secret = "s3cr3t-Xq7-4fZ9"
    files = {
        **SMALL,
        "project.yml": "name: shop\nenv:\n  TOKEN: { secret: true }\n",
        "pipelines/p.sql": "INSERT INTO {{ sink('lake', 'p') }}\nSELECT id FROM {{ ref('f') }}\n",
        "pipelines/f.sql": "SELECT id FROM {{ source('files', 'orders') }} WHERE {{ env('TOKEN') }} <> 'x'\n",
    }
    if ephemeral:
        files["pipelines/f.yml"] = "materialized: ephemeral\n"
    else:  # p reads f's result: f is stored, p (holding nothing secret) streamed; make p the one with it
        files["pipelines/p.sql"] = (
            "INSERT INTO {{ sink('lake', 'p') }}\n"
            "SELECT id FROM {{ source('files', 'orders') }} WHERE {{ env('TOKEN') }} <> 'x'\n"
        )
        del files["pipelines/f.sql"]
    write_project(project_dir, files)
    result = pz(project_dir, "run", env={"TOKEN": secret})
    assert result.exit_code == 0, result.output
    assert (
        "stored in staging: its SQL holds a secret" in pz(project_dir, "plan", env={"TOKEN": secret}).output
    )
    leaks = [p for p in _files_under(project_dir / ".pz") if secret.encode() in p.read_bytes()]
    assert leaks == []


def test_tier_4_reports_every_unknown_column_of_a_pipeline(project_dir: Path) -> None:
    query = (
        'SELECT idd, o.id2, id AS a, "Id3" + 1 AS b\n'
        "FROM {{ source('files', 'orders') }} AS o\n"
        "GROUP BY iid, id"
    )
    write_project(project_dir, _pipeline(query))
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    found = [line for line in result.lines if line.startswith("error: PZ0412")]
    assert [line.split(": pipeline")[0] for line in found] == [
        "error: PZ0412 pipelines/p.sql:2:8",
        "error: PZ0412 pipelines/p.sql:2:13",
        "error: PZ0412 pipelines/p.sql:2:29",
        "error: PZ0412 pipelines/p.sql:4:10",
    ]
    for line, name in zip(found, ["idd", "id2", "Id3", "iid"], strict=True):
        assert f'column "{name}" not found' in line or f'column named "{name}"' in line
    assert "4 errors" in result.output


def test_tier_4_reports_unknown_functions_and_columns_together(project_dir: Path) -> None:
    query = (
        "SELECT lenght(id) AS a, coalesc(\n"
        "    id, ')' , idd) AS b, idx + 1 AS c\n"
        "FROM {{ source('files', 'orders') }}"
    )
    write_project(project_dir, _pipeline(query))
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    found = [line.split(": pipeline 'p': ") for line in result.lines if line.startswith("error: ")]
    assert [(where, what.split(";")[0]) for where, what in found] == [
        ("error: PZ0402 pipelines/p.sql:2:8", "Scalar Function with name lenght does not exist"),
        ("error: PZ0402 pipelines/p.sql:2:25", "Scalar Function with name coalesc does not exist"),
        ("error: PZ0412 pipelines/p.sql:3:26", 'Referenced column "idx" not found in FROM clause'),
    ]


def test_validate_connect_binds_the_schemas_it_just_fetched(project_dir: Path) -> None:
    with fresh_pg_database("CREATE TABLE orders (id bigint, amount numeric(10,2))") as db:
        files = {
            **SMALL,
            "sources/pg.yml": f"""
                connector: postgres
                connection: {{ host: {PG_HOST}, port: {PG_PORT}, user: {PG_USER}, database: {db} }}
                datasets:
                  orders: {{ table: public.orders }}
            """,
            "pipelines/p.sql": (
                "INSERT INTO {{ sink('lake', 'p') }}\nSELECT idd FROM {{ source('pg', 'orders') }}\n"
            ),
        }
        write_project(project_dir, files)
        result = pz(project_dir, "validate", "--connect")
        assert result.exit_code == 2, result.output
        assert "PZ0406" not in result.output
        assert "error: PZ0412 pipelines/p.sql:2:8: pipeline 'p': Referenced column \"idd\"" in result.output
