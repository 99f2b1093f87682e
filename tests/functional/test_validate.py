"""`pz validate` reports every error of every tier at once, each with code, place, cause and next step."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import pz, pz_subprocess, write_project

P_SQL = "INSERT INTO {{ sink('lake', 'p') }}\nSELECT * FROM {{ source('files', 'orders') }}\n"

GOOD_BASE = {
    "project.yml": """
        name: shop
        vars:
          min_total: { type: int, default: 0 }
    """,
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          orders:
            format: csv
            path: orders.csv
            columns: { id: bigint, customer: varchar, amount: double }
    """,
    "sinks/lake.yml": """
        connector: localfiles
        connection: { root: out }
    """,
    "data/orders.csv": "id,customer,amount\n1,ada,1.5\n",
}

ERROR_LINE = re.compile(r"^error: (PZ\d{4}) (\S+?)(:\d+(:\d+)?)?: .+$")


def test_broken_project_reports_every_error_at_once(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **GOOD_BASE,
            "sources/files.yml": """
            connector: localfiles
            connection: { root: data, rooot: data }
            datasets:
              orders:
                format: csv
                path: orders.csv
                columns: { id: bigint, customer: varchar, amount: double }
        """,
            "sinks/lake.yml": """
            connector: localfiles
            connection: { root: out }
            outputs:
              merged: { strategy: merge }
              typo: { formatt: csv }
        """,
            "pipelines/a.sql": """
            INSERT INTO {{ sink('wh', 'totals') }}
            SELECT * FROM {{ source('files', 'nope') }} JOIN {{ ref('orderz') }} USING (id)
        """,
            "pipelines/orders.sql": """
            INSERT INTO {{ sink('lake', 'merged') }}
            SELECT id, customer, amount FROM {{ source('files', 'orders') }}
        """,
            "pipelines/b.sql": """
            INSERT INTO {{ sink('lake', 'dup') }}
            INSERT INTO {{ sink('lake', 'dup') }}
            SELECT 1 AS x
        """,
            "pipelines/c.sql": """
            INSERT INTO {{ sink('lake', 'c_out') }}
            SELECT id,
                   custmer
            FROM {{ source('files', 'orders') }}
        """,
            "pipelines/d.sql": """
            INSERT INTO {{ sink('lake', 'shared') }}
            SELECT 1 AS x
        """,
            "pipelines/e.sql": """
            INSERT INTO {{ sink('lake', 'shared') }}
            SELECT {{ var('max_total') }} AS x
        """,
        },
    )
    result = pz_subprocess(project_dir, "validate")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.lines if line.startswith("error: ")]
    codes = {ERROR_LINE.match(line).group(1) for line in errors}  # type: ignore[union-attr]
    files = {ERROR_LINE.match(line).group(2) for line in errors}  # type: ignore[union-attr]
    assert {"PZ0201", "PZ0202", "PZ0203", "PZ0208", "PZ0209", "PZ0301", "PZ0303", "PZ0305", "PZ0412"} <= codes
    assert len(files) >= 4
    # every error line is followed by its next step
    for i, line in enumerate(result.lines):
        if line.startswith("error: "):
            assert result.lines[i + 1].startswith("  next: "), line
    assert "error: PZ0201 pipelines/a.sql:1:13: sink() names undeclared sink 'wh'" in result.lines
    assert any(
        line.startswith("error: PZ0203 pipelines/a.sql:2:") and "did you mean 'orders'?" in line
        for line in errors
    )
    assert any(line.startswith("error: PZ0412 pipelines/c.sql:3:") and "custmer" in line for line in errors)
    assert any(line.startswith("error: PZ0301 sources/files.yml:2:") and "rooot" in line for line in errors)
    assert result.lines[-1].startswith(f"{len(errors)} errors")


def test_shape_errors_of_several_files_are_reported_together(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **GOOD_BASE,
            "project.yml": """
            name: shop
            engine:
              breaker: { failure_threshold: 0 }
              threads: many
        """,
            "sinks/lake.yml": """
            connector: localfiles
            connection: { root: out }
            outputs:
              x: { input: orders }
        """,
            "pipelines/p.sql": "INSERT INTO {{ sink('lake', 'x') }}\nSELECT 1 AS a\n",
            "pipelines/p.yml": """
            checks:
              - not_nul: { columns: [a] }
              - unique: { column: a }
        """,
        },
    )
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    codes = [line.split()[1] for line in result.lines if line.startswith("error: ")]
    assert {"PZ0120", "PZ0103", "PZ0112", "PZ0113"} <= set(codes), result.output
    assert codes.count("PZ0113") >= 2


def test_cycle_is_printed(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **GOOD_BASE,
            "pipelines/a.sql": "SELECT * FROM {{ ref('b') }}\n",
            "pipelines/b.sql": "INSERT INTO {{ sink('lake', 'b') }}\nSELECT * FROM {{ ref('a') }}\n",
        },
    )
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    assert any("PZ0205" in line and "a -> b -> a" in line for line in result.lines), result.output


def test_hostile_check_expression_is_refused_before_running(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **GOOD_BASE,
            "pipelines/p.sql": P_SQL,
            "pipelines/p.yml": """
            checks:
              - expression: { sql: "TRUE); DROP TABLE p; SELECT (1", name: evil }
        """,
        },
    )
    result = pz(project_dir, "run")
    assert result.exit_code == 2
    assert any(line.startswith("error: PZ0405 pipelines/p.yml") for line in result.lines), result.output
    assert not (project_dir / ".pz" / "runs").exists()


def test_pipeline_must_be_one_query(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **GOOD_BASE,
            "pipelines/p.sql": "INSERT INTO {{ sink('lake', 'p') }}\nSELECT 1 AS a; DROP TABLE x\n",
        },
    )
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    assert any("PZ0404" in line for line in result.lines), result.output


def test_secret_env_never_printed(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **GOOD_BASE,
            "project.yml": """
            name: shop
            env:
              LAKE_TOKEN: { required: true, secret: true }
        """,
            "pipelines/p.sql": """
            INSERT INTO {{ sink('lake', 'p') }}
            SELECT {{ env('LAKE_TOKEN') }} AS token, nosuchcolumn FROM {{ source('files', 'orders') }}
        """,
        },
    )
    result = pz(project_dir, "validate", env={"LAKE_TOKEN": "hunter2-very-secret"})
    assert result.exit_code == 2
    assert "hunter2-very-secret" not in result.output
    missing = pz(project_dir, "validate", env={})
    assert any("PZ0212" in line and "LAKE_TOKEN" in line for line in missing.lines), missing.output


def test_plan_prints_nodes_with_tier_strategy_and_retry(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **GOOD_BASE,
            "sinks/lake.yml": """
            connector: localfiles
            connection: { root: out }
            retry: { max_attempts: 6 }
            outputs:
              p: { format: csv, retry: { base_delay: 2s } }
        """,
            "pipelines/p.sql": P_SQL,
        },
    )
    result = pz(project_dir, "plan")
    assert result.exit_code == 0, result.output
    text = result.output
    assert "src_files__orders" in text and "localfiles native" in text
    assert "lake.p" in text and "replace" in text
    assert (
        "retry: max_attempts 6 (sink 'lake'), base_delay 2s (output 'p'), max_delay 30s (engine default)"
        in text
    )


def test_project_flag_works_after_the_command_and_bad_var_is_one_error(project_dir: Path) -> None:
    from click.testing import CliRunner

    from pipelinez.cli.main import cli

    write_project(
        project_dir,
        {
            **GOOD_BASE,
            "pipelines/p.sql": """
        INSERT INTO {{ sink('lake', 'p') }}
        SELECT * FROM {{ source('files', 'orders') }} WHERE amount > {{ var('min_total') }}
    """,
        },
    )
    result = CliRunner().invoke(cli, ["validate", "-p", str(project_dir), "--var", "min_total=abc"])
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith(("error:", "warning:"))]
    assert len(errors) == 1 and "PZ0210" in errors[0], result.output


def test_qualified_column_typo_is_pz0412(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **GOOD_BASE,
            "pipelines/p.sql": """
        INSERT INTO {{ sink('lake', 'p') }}
        SELECT o.custmer FROM {{ source('files', 'orders') }} AS o
    """,
        },
    )
    result = pz(project_dir, "validate")
    assert any(line.startswith("error: PZ0412 pipelines/p.sql:2:") for line in result.lines), result.output


def test_vars_render_inside_check_options(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **GOOD_BASE,
            "project.yml": """
            name: shop
            vars:
              allowed: { type: string, default: bob }
        """,
            "pipelines/p.sql": P_SQL,
            "pipelines/p.yml": """
            checks:
              - accepted_values: { column: customer, values: ["{{ var('allowed') }}"] }
        """,
        },
    )
    assert pz(project_dir, "run", "--var", "allowed=ada").exit_code == 0
    result = pz(project_dir, "run")
    assert result.exit_code == 1
    assert any("PZ0508" in line and "found: ada" in line for line in result.lines), result.output


def test_crash_log_masks_secret_env_values(project_dir: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from pipelinez.cli.main import _secret_free

    write_project(
        project_dir,
        {
            **GOOD_BASE,
            "project.yml": """
        name: shop
        env:
          TOKEN: { secret: true }
    """,
        },
    )
    monkeypatch.setenv("TOKEN", "tok-123456")
    assert _secret_free(project_dir, "boom tok-123456 at x") == "boom *** at x"


def test_later_tiers_still_check_the_files_that_passed_tier_one(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **GOOD_BASE,
            "sinks/lake.yml": """
            connector: localfiles
            connection: { root: out }
            max_concurrency: lots
        """,
            "pipelines/writes_lake.sql": P_SQL,
            "pipelines/typo.sql": """
            INSERT INTO {{ sink('lake', 'typo') }}
            SELECT custmer FROM {{ source('files', 'orders') }}
        """,
            "pipelines/bad_ref.sql": "SELECT * FROM {{ ref('nope') }}\n",
        },
    )
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    codes = [line.split()[1] for line in result.lines if line.startswith("error: ")]
    assert "PZ0103" in codes  # tier 1, sinks/lake.yml
    assert "PZ0203" in codes  # tier 2, pipelines/bad_ref.sql
    assert "PZ0412" in codes  # tier 4, pipelines/typo.sql
    assert "PZ0201" not in codes, result.output  # the sink exists; only its file is broken
    run = pz(project_dir, "run")
    assert run.exit_code == 2 and not (project_dir / ".pz" / "runs").exists()


def test_a_bad_sink_clause_does_not_hide_query_errors_downstream(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **GOOD_BASE,
            "pipelines/up.sql": P_SQL.replace("'lake', 'p'", "'wh', 'up'"),
            "pipelines/down.sql": """
                INSERT INTO {{ sink('lake', 'down') }}
                SELECT custmer FROM {{ ref('up') }}
            """,
        },
    )
    codes = [line.split()[1] for line in pz(project_dir, "validate").lines if line.startswith("error: ")]
    assert sorted(codes) == ["PZ0201", "PZ0412"]


def test_two_datasets_staging_under_one_name_is_refused(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **GOOD_BASE,
            "sources/a.yml": "connector: localfiles\nconnection: { root: data }\n"
            "datasets:\n  b__c: { format: csv, path: orders.csv }\n",
            "sources/a__b.yml": "connector: localfiles\nconnection: { root: data }\n"
            "datasets:\n  c: { format: csv, path: orders.csv }\n",
        },
    )
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    assert any("PZ0216" in line and "src_a__b__c" in line for line in result.lines), result.output


def test_every_node_id_is_distinct_even_for_identical_work(project_dir: Path) -> None:
    import json

    write_project(
        project_dir,
        {
            **GOOD_BASE,
            "sources/files.yml": """
            connector: localfiles
            connection: { root: data }
            datasets:
              one: { format: csv, path: orders.csv }
              two: { format: csv, path: orders.csv }
        """,
            "pipelines/p.sql": """
            INSERT INTO {{ sink('lake', 'l1') }}
            INSERT INTO {{ sink('lake', 'l2') }}
            SELECT * FROM {{ source('files', 'one') }} UNION ALL SELECT * FROM {{ source('files', 'two') }}
        """,
        },
    )
    result = pz(project_dir, "--log-format", "json", "plan")
    ids = [json.loads(line)["id"] for line in result.lines if '"plan_node"' in line]
    assert len(ids) == 5 and len(set(ids)) == 5


def test_secret_in_sql_never_reaches_a_compile_error(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **GOOD_BASE,
            "project.yml": "name: shop\nenv:\n  API_TOKEN: { required: true, secret: true }\n",
            "pipelines/p.sql": """
            INSERT INTO {{ sink('lake', 'p') }}
            SELECT CAST('{{ env("API_TOKEN") }}' AS INTEGER) AS x FROM {{ source('files', 'orders') }}
        """,
        },
    )
    result = pz(project_dir, "--log-format", "json", "validate", env={"API_TOKEN": "T0kenQwErTy"})
    assert result.exit_code == 2
    assert "T0kenQwErTy" not in result.output and "t0kenqwerty" not in result.output


def test_typed_vars_keep_their_truth_in_jinja_logic(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **GOOD_BASE,
            "project.yml": """
            name: shop
            vars:
              flag: { type: bool, default: false }
              n: { type: int, default: 3 }
        """,
            "pipelines/p.sql": """
            INSERT INTO {{ sink('lake', 'p') }}
            SELECT * FROM {{ source('files', 'orders') }}
            {% if var('flag') or var('n') > 5 %} WHERE 1 = 0 {% endif %}
        """,
        },
    )
    result = pz(project_dir, "run")
    assert result.exit_code == 0, result.output
    assert result.node("p")["rows"] == 1
    flipped = pz(project_dir, "run", "--var", "n=9")
    assert flipped.node("p")["rows"] == 0


def test_merge_keys_must_be_result_columns_before_data_moves(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **GOOD_BASE,
            "sinks/wh.yml": """
            connector: duckdb
            connection: { path: wh.duckdb }
            outputs:
              m: { strategy: merge, keys: [nosuch], on_delete: { column: gone } }
        """,
            "pipelines/p.sql": P_SQL.replace("'lake', 'p'", "'wh', 'm'"),
        },
    )
    result = pz(project_dir, "run")
    assert result.exit_code == 2
    assert sum("PZ0412" in line and "sinks/wh.yml" in line for line in result.lines) == 2, result.output
    assert not (project_dir / ".pz" / "runs").exists()


def test_check_expressions_are_single_expressions(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **GOOD_BASE,
            "pipelines/p.sql": P_SQL,
            "pipelines/p.yml": """
            checks:
              - expression: { sql: "amount > 0 -- positive", name: commented }
              - expression: { sql: "id > 100) OR (1=1", name: sneaky }
        """,
        },
    )
    result = pz(project_dir, "validate")
    errors = [line for line in result.lines if line.startswith("error:")]
    assert len(errors) == 1 and "PZ0405" in errors[0] and "sneaky" in errors[0], result.output


def test_nul_in_an_inferred_column_name_is_a_dataset_error_not_an_internal_error(project_dir: Path) -> None:
    """Found by the fuzz suite: a CSV without a columns: contract whose header holds NUL bytes was PZ0512."""
    write_project(
        project_dir,
        {
            **GOOD_BASE,
            "sources/files.yml": """
            connector: localfiles
            connection: { root: data }
            datasets:
              orders: { format: csv, path: orders.csv }
        """,
            "pipelines/p.sql": P_SQL,
        },
    )
    (project_dir / "data" / "orders.csv").write_bytes(b"id,cust\x00omer\n1,ada\n")
    result = pz(project_dir, "validate")
    assert result.exit_code == 2, result.output
    assert "PZ0512" not in result.output
    errors = [line for line in result.lines if line.startswith("error: PZ0302 sources/files.yml:")]
    assert any("NUL character" in line for line in errors), result.output


def test_a_failing_bind_amid_many_keeps_the_tables_bound_before_it(project_dir: Path) -> None:
    """Tier 4 creates its tables many to a transaction: a pipeline that fails to bind rolls its batch back,
    and what bound before it in that batch is kept, so later pipelines still bind against it."""
    orders = "{{ source('files', 'orders') }}"
    pipelines = {
        f"pipelines/p{i:02d}.sql": f"SELECT id, amount + {i} AS amount FROM {orders}\n" for i in range(20)
    }
    write_project(
        project_dir,
        {
            **GOOD_BASE,
            **pipelines,
            "pipelines/q_broken.sql": "SELECT nope FROM {{ ref('p03') }}\n",
            "pipelines/r_reader.sql": "SELECT p.id, q.amount\n"
            "FROM {{ ref('p01') }} p JOIN {{ ref('p19') }} q USING (id)\n",
            "pipelines/s_wrong.sql": "SELECT customer FROM {{ ref('p05') }}\n",
            "pipelines/t_out.sql": P_SQL.replace("source('files', 'orders')", "ref('r_reader')"),
        },
    )
    result = pz(project_dir, "validate")
    assert result.exit_code == 2, result.output
    codes = sorted(
        (m.group(1), m.group(2)) for line in result.output.splitlines() if (m := ERROR_LINE.match(line))
    )
    assert codes == [
        ("PZ0412", "pipelines/q_broken.sql"),
        ("PZ0412", "pipelines/s_wrong.sql"),
    ], result.output


def test_a_contract_type_that_ends_the_statement_is_refused_and_runs_nothing(project_dir: Path) -> None:
    """A `columns:` type is pasted into the CREATE TABLE of tier 4: one that closes the statement and adds
    others (a COMMIT, a COPY writing a file) is PZ0302 at the dataset, and none of it runs."""
    leak = project_dir / "leak.csv"
    for hostile in (
        f"double); COPY (SELECT 42) TO '{leak}'; CREATE TABLE z (y int",
        "double); COMMIT; SELECT (1",
    ):
        sources = GOOD_BASE["sources/files.yml"].replace("amount: double", f'amount: "{hostile}"')
        write_project(project_dir, {**GOOD_BASE, "sources/files.yml": sources, "pipelines/p.sql": P_SQL})
        result = pz(project_dir, "validate")
        assert result.exit_code == 2, result.output
        errors = [m.groups()[:2] for line in result.output.splitlines() if (m := ERROR_LINE.match(line))]
        assert errors == [("PZ0302", "sources/files.yml")], result.output
        assert "holds more than a type" in result.output
        assert not leak.exists()
