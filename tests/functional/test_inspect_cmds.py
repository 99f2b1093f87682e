"""`pz compile`, `pz show`, `pz test`, `pz build` and `--vars`, end to end on small projects."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from tests.conftest import pz, write_project

FILES = {
    "project.yml": """
        name: shop
        vars:
          floor: { type: int, default: 0 }
          label: { type: string, default: all }
    """,
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          orders:
            format: csv
            path: orders.csv
            columns: { id: bigint, amount: bigint, updated_at: timestamp }
            sync: { mode: incremental, cursor: updated_at }
    """,
    "sinks/wh.yml": """
        connector: duckdb
        connection: { path: out/wh.duckdb }
        outputs:
          big: { strategy: append, duplicates: accept }
          total: { strategy: append, duplicates: accept }
    """,
    "data/orders.csv": "id,amount,updated_at\n1,10,2026-01-01\n2,20,2026-01-02\n3,30,2026-01-03\n",
    "pipelines/big.sql": """
        INSERT INTO {{ sink('wh', 'big') }}
        SELECT id, amount, {{ var('label') }} AS label FROM {{ source('files', 'orders') }}
        WHERE amount > {{ var('floor') }}
        ORDER BY id  -- a comment on the last line
    """,
    "pipelines/big.yml": """
        checks:
          - unique: { columns: [id] }
          - expression: { sql: "amount < 25" }
            severity: warn
    """,
    "pipelines/total.sql": """
        INSERT INTO {{ sink('wh', 'total') }}
        SELECT sum(amount) AS total FROM {{ ref('big') }}
    """,
    "pipelines/total.yml": "checks:\n  - expression: { sql: \"total < {{ var('floor') }} + 1000\" }\n",
}


@pytest.fixture
def shop(project_dir: Path) -> Path:
    return write_project(project_dir, FILES)


def _nothing_written(project: Path) -> None:
    assert not (project / "out").exists()
    assert not (project / ".pz" / "runs").exists()
    assert not (project / ".pz" / "state.duckdb").exists()
    assert not [p for p in (project / ".pz").glob("preview-*")]


def test_compile_prints_the_rendered_sql_of_the_selected_pipelines(shop: Path) -> None:
    result = pz(shop, "compile", "-s", "total", "--vars", "{floor: 15}")
    assert result.exit_code == 0, result.output
    assert result.lines[0] == "-- total (pipelines/total.sql)"
    assert 'SELECT sum(amount) AS total FROM "big"' in result.output
    assert "big.sql" not in result.output
    result = pz(shop, "compile", "--var", "floor=15")
    assert "WHERE amount > 15" in result.output and "-- total" in result.output
    _nothing_written(shop)


def test_show_prints_rows_and_writes_nothing(shop: Path) -> None:
    result = pz(shop, "show", "big", "--limit", "2", "--vars", '{"floor": 10, "label": "hi"}')
    assert result.exit_code == 0, result.output
    assert "big (first 2 row(s))" in result.output
    assert "│ 2  │ 20     │ hi" in result.output and "│ 3  │ 30     │ hi" in result.output
    assert "│ 1 " not in result.output  # floor 10 from --vars
    _nothing_written(shop)
    result = pz(shop, "--log-format", "json", "show", "total")
    assert result.exit_code == 0, result.output
    assert json.loads(result.lines[-1])["rows"] == [{"total": 60}]


def test_show_of_no_pipeline_is_refused(shop: Path) -> None:
    result = pz(shop, "show", "bigg")
    assert result.exit_code == 2
    assert any("PZ0253" in line and "did you mean 'big'?" in line for line in result.lines), result.output


def test_show_after_a_run_leaves_the_watermark_and_the_sink_alone(shop: Path) -> None:
    assert pz(shop, "run").exit_code == 0
    state = (shop / ".pz" / "state.duckdb").read_bytes()
    runs = sorted((shop / ".pz" / "runs").iterdir())
    (shop / "data" / "orders.csv").write_text("id,amount,updated_at\n4,40,2026-02-01\n")
    result = pz(shop, "show", "big")
    assert result.exit_code == 0, result.output
    assert "│ 4  │ 40" in result.output  # the rows the next run would read past the watermark
    assert pz(shop, "test").exit_code == 0  # amount 40: the warn check warns, an exit 0
    assert (shop / ".pz" / "state.duckdb").read_bytes() == state
    assert sorted((shop / ".pz" / "runs").iterdir()) == runs
    with duckdb.connect(str(shop / "out" / "wh.duckdb"), read_only=True) as con:
        assert con.execute('SELECT count(*) FROM "big"').fetchone() == (3,)


def test_test_runs_the_checks_and_fails_on_an_error_check(shop: Path) -> None:
    result = pz(shop, "test")
    assert result.exit_code == 0, result.output
    assert "pass chk_big__unique_id" in result.lines
    assert any(line.startswith("warn chk_big__expression") for line in result.lines), result.output
    assert result.lines[-1] == "test: 3 check(s): 2 passed, 1 warned, 0 failed, 0 skipped"
    _nothing_written(shop)
    result = pz(shop, "test", "-s", "total", "--vars", "floor: -1000")  # total < 0: the error check fails
    assert result.exit_code == 1, result.output
    assert any(line.startswith("FAIL chk_total__expression") for line in result.lines), result.output
    result = pz(shop, "test", "-s", "resource_type:check,big")  # big's two checks, not total's
    assert result.lines[-1] == "test: 2 check(s): 1 passed, 1 warned, 0 failed, 0 skipped"
    _nothing_written(shop)


def test_build_is_run(shop: Path) -> None:
    result = pz(shop, "build", "-s", "big", "--var", "floor=15", "--vars", "{floor: 5}")
    assert result.exit_code == 0, result.output
    assert result.run_results()["args"]["vars"] == {"floor": "15"}  # --var wins over --vars
    with duckdb.connect(str(shop / "out" / "wh.duckdb"), read_only=True) as con:
        assert con.execute('SELECT count(*) FROM "big"').fetchone() == (2,)
    assert pz(shop, "build", "--help").output.count("--full-refresh") == 1


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[1, 2]", "is not a mapping"),
        ("{floor: [1]}", "gives 'floor' no single value"),
        ("{floor: 1", "can't be read"),
    ],
)
def test_malformed_vars_is_a_usage_error(shop: Path, text: str, said: str) -> None:
    for command in (["validate"], ["plan"], ["ls"], ["show", "big"], ["test"], ["docs", "generate"]):
        result = pz(shop, *command, "--vars", text)
        assert result.exit_code == 2, (command, result.output)
        assert any("PZ0513" in line and said in line for line in result.lines), (command, result.output)


def test_show_says_what_failed_when_an_input_fails(shop: Path) -> None:
    (shop / "data" / "orders.csv").write_text("id,amount,updated_at\nx,not a number,never\n")
    result = pz(shop, "show", "total")
    assert result.exit_code == 1, result.output
    assert "error: the pipeline's inputs could not be computed:" in result.lines
    assert any(line.startswith("  FAIL src_files__orders: PZ") for line in result.lines), result.output
    assert any(line.startswith("  skip big") for line in result.lines), result.output
    _nothing_written(shop)
