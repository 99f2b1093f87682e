"""No internal error (PZ0512) and no traceback from project content, flags, file-system state or server
answers: each case here once reached PZ0512, a segfault or raw driver text."""

from __future__ import annotations

import contextlib
import json
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import pz, pz_subprocess, write_project

BASE = {
    "project.yml": """
        name: shop
        engine: { threads: 2 }
    """,
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          orders:
            format: csv
            path: orders.csv
            columns: { id: bigint, customer_id: bigint, amount: "decimal(10,2)", at: timestamp }
          customers:
            format: csv
            path: customers.csv
            columns: { id: bigint, name: varchar }
    """,
    "sinks/wh.yml": """
        connector: duckdb
        connection: { path: out/wh.duckdb }
    """,
    "pipelines/orders_out.sql": """
        INSERT INTO {{ sink('wh', 'orders_out') }}
        SELECT * FROM {{ source('files', 'orders') }}
    """,
    "data/orders.csv": """
        id,customer_id,amount,at
        1,1,10.50,2026-11-01 10:00:00
        2,2,20.00,2026-11-02 10:00:00
    """,
    "data/customers.csv": """
        id,name
        1,ada
        2,grace
    """,
}


def _no_internal_error(output: str) -> None:
    assert "PZ0512" not in output and "Traceback" not in output, output


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[None]:
    """chattr +i: not even root may create entries in the folder (tests run as root, so chmod won't do)."""
    subprocess.run(["chattr", "+i", str(path)], check=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_relationships_to_a_source_dataset_no_pipeline_reads_stages_it(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/orders_out.yml": """
                checks:
                  - relationships: { column: customer_id, to: "source('files', 'customers')", field: id }
            """,
        },
    )
    checked = pz(project_dir, "validate")
    assert checked.exit_code == 0, checked.output
    result = pz(project_dir, "run")
    _no_internal_error(result.output)
    assert result.exit_code == 0, result.output
    assert result.node("src_files__customers")["status"] == "success"
    assert result.node("chk_orders_out__relationships_customer_id")["status"] == "success"


def test_ephemeral_pipeline_with_a_sink_clause_is_pz0218(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/eph.sql": """
                INSERT INTO {{ sink('wh', 'eph') }}
                SELECT * FROM {{ source('files', 'customers') }}
            """,
            "pipelines/eph.yml": "materialized: ephemeral\n",
            "pipelines/reader.sql": """
                INSERT INTO {{ sink('wh', 'reader') }}
                SELECT * FROM {{ ref('eph') }}
            """,
        },
    )
    result = pz(project_dir, "validate")
    _no_internal_error(result.output)
    assert result.exit_code == 2
    assert "error: PZ0218 pipelines/eph.sql: ephemeral pipeline 'eph' has sink clauses" in result.output


@pytest.mark.parametrize("command", ["init", "schema"])
def test_init_and_schema_into_an_unwritable_place_are_pz0522(tmp_path: Path, command: str) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    locked = tmp_path / "locked"
    locked.mkdir()
    for target in (blocker / "sub", locked / "sub", locked):
        args = ["init", str(target)] if command == "init" else ["schema", "--out", str(target)]
        with immutable(locked):
            result = pz(tmp_path, *args)
        _no_internal_error(result.output)
        assert result.exit_code == 2, result.output
        assert f"error: PZ0522 {target}" in result.output, result.output
        assert "cannot write here" in result.output


def test_state_folder_that_is_a_file_is_pz0521_for_every_command(project_dir: Path) -> None:
    write_project(project_dir, {**BASE, ".pz": "not a folder\n"})
    for args in (["run"], ["runs"], ["clean"], ["validate", "--connect"]):
        result = pz(project_dir, *args)
        _no_internal_error(result.output)
        assert result.exit_code == 2, (args, result.output)
        assert (
            "error: PZ0521 .pz: pz keeps its state in a folder .pz, but a file of that name is in the way"
            in (result.output)
        )


def test_read_only_project_folder_is_pz0521(project_dir: Path) -> None:
    write_project(project_dir, BASE)
    with immutable(project_dir):
        result = pz(project_dir, "run")
    _no_internal_error(result.output)
    assert result.exit_code == 2
    assert "error: PZ0521 .pz: pz cannot create or write its state folder: operation not permitted" in (
        result.output
    )
    assert not (project_dir / ".pz").exists()
    assert pz(project_dir, "run").exit_code == 0
    runs = project_dir / ".pz" / "runs"
    with immutable(runs):
        result = pz(project_dir, "run")
    _no_internal_error(result.output)
    assert result.exit_code == 2 and "error: PZ0521 .pz: pz cannot create or write its state folder" in (
        result.output
    )


def test_corrupt_run_record_is_reported_by_runs(project_dir: Path) -> None:
    write_project(project_dir, BASE)
    for _ in range(3):
        assert pz(project_dir, "run").exit_code == 0
    first, second, third = sorted((project_dir / ".pz" / "runs").iterdir())
    (first / "run_results.json").write_text('{"run_id": "x", "nodes": [', encoding="utf-8")
    (second / "run_results.json").write_text("[1, 2]", encoding="utf-8")
    result = pz(project_dir, "runs")
    _no_internal_error(result.output)
    assert result.exit_code == 0
    assert "no runs yet" not in result.output
    by_id = {line.split()[0]: line for line in result.lines[1:4]}
    assert "corrupt" in by_id[first.name] and "corrupt" in by_id[second.name]
    assert "success" in by_id[third.name]
    assert (
        f"warning: PZ0523 .pz/runs/{first.name}/run_results.json: run {first.name}: its record cannot be "
        "read: not valid JSON" in result.output
    )
    assert f"run {second.name}: its record cannot be read: the top level is not an object" in result.output
    as_json = pz(project_dir, "--log-format", "json", "runs")
    events = [json.loads(line) for line in as_json.lines]
    assert [e["code"] for e in events if e.get("event") == "warning"] == ["PZ0523", "PZ0523"]


def test_internal_error_with_no_writable_crash_log_still_prints_one_line(
    project_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_project(project_dir, {**BASE, ".pz": "a file where the crash log folder belongs\n"})
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    monkeypatch.setenv("HOME", str(blocker / "home"))
    monkeypatch.setattr(tempfile, "tempdir", str(blocker / "tmp"))

    def bug(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("a pz bug")

    monkeypatch.setattr("pipelinez.engine.run.prepare.validate", bug)
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert result.output.startswith(
        "error: PZ0512 pz hit an internal error, and no crash log could be written to "
    ), result.output
    for place in (project_dir / ".pz", blocker / "home", blocker / "tmp"):
        assert f"{place}/" in result.output
    assert result.output.rstrip().endswith("please report it with the command you ran")
    assert len(result.lines) == 1


def _nested_json(depth: int) -> str:
    return '{"id": 1, "x": ' + '{"a": ' * (depth - 1) + "1" + "}" * (depth - 1) + "}\n"


@pytest.mark.parametrize("declared", [False, True])
def test_deeply_nested_json_is_refused_before_duckdb_reads_it(project_dir: Path, declared: bool) -> None:
    columns = "columns: { id: bigint }" if declared else ""
    write_project(
        project_dir,
        {
            **BASE,
            "sources/js.yml": f"""
                connector: localfiles
                connection: {{ root: data }}
                datasets:
                  deep: {{ format: json, path: deep.json {", " + columns if columns else ""} }}
                  shallow: {{ format: json, path: shallow.json }}
            """,
            "pipelines/deep_out.sql": """
                INSERT INTO {{ sink('wh', 'deep_out') }}
                SELECT id FROM {{ source('js', 'deep') }}
            """,
            "pipelines/shallow_out.sql": """
                INSERT INTO {{ sink('wh', 'shallow_out') }}
                SELECT id, x FROM {{ source('js', 'shallow') }}
            """,
        },
    )
    (project_dir / "data" / "deep.json").write_text(_nested_json(20000), encoding="utf-8")
    (project_dir / "data" / "shallow.json").write_text(_nested_json(900), encoding="utf-8")
    result = pz_subprocess(project_dir, "run", timeout=120)  # a segfault would be exit -11, no message
    _no_internal_error(result.output)
    assert result.exit_code == 1, result.output
    assert (
        f"PZ0505: source 'js' dataset 'deep': {project_dir}/data/deep.json nests JSON values more than "
        "1000 levels deep, which DuckDB cannot read safely" in result.output
    )
    assert result.node("src_js__shallow")["status"] == "success"
    assert result.node("wh.shallow_out")["status"] == "success"


def test_dangling_and_looping_links_among_project_files_are_errors(project_dir: Path, tmp_path: Path) -> None:
    write_project(project_dir, BASE)
    elsewhere = write_project(tmp_path / "shared", {"linked.sql": "SELECT 1 AS x\n"})
    (project_dir / "pipelines" / "ghost.sql").symlink_to("nowhere.sql")
    (project_dir / "pipelines" / "gone").symlink_to("missing_dir")
    (project_dir / "pipelines" / "again").symlink_to("../pipelines")
    (project_dir / "pipelines" / "shared").symlink_to(elsewhere)
    (project_dir / "sources" / "loop.yml").symlink_to("loop.yml")
    (project_dir / "sinks" / "notes.txt").symlink_to("nowhere.txt")  # not a project file: ignored
    result = pz(project_dir, "validate")
    _no_internal_error(result.output)
    assert result.exit_code == 2
    errors = [line for line in result.lines if line.startswith("error:")]
    assert errors == [
        "error: PZ0111 pipelines/again: links back to a folder that contains it",
        "error: PZ0110 pipelines/ghost.sql: symbolic link to 'nowhere.sql', which does not exist",
        "error: PZ0110 pipelines/gone: symbolic link to 'missing_dir', which does not exist",
        "error: PZ0111 sources/loop.yml: this symbolic link loops back on itself",
    ], result.output
    assert "PZ0223 pipelines/shared/linked.sql" in result.output  # a linked folder is followed


def test_a_link_to_a_large_folder_stops_the_walk_with_pz0117(
    project_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sub-folder of pipelines/ (or sources/ itself) linked to a large folder outside the project (a
    home folder, /tmp) was walked for minutes; the walk is bounded and the link named."""
    from pipelinez.config import discovery

    monkeypatch.setattr(discovery, "MAX_ENTRIES", 200)  # the real bound is 50,000 entries
    write_project(project_dir, BASE)
    big = tmp_path / "big"
    for i in range(30):
        for j in range(10):
            write_project(big / f"d{i}", {f"f{j}.txt": "x", "loop.sql": "SELECT 1 AS x"})
    (big / "d0" / "up").symlink_to(big)  # a loop inside the linked folder is not reported: not read
    (project_dir / "pipelines" / "shared").symlink_to(big)
    result = pz(project_dir, "validate")
    _no_internal_error(result.output)
    assert result.exit_code == 2
    assert [line for line in result.lines if line.startswith("error:")] == [
        f"error: PZ0117 pipelines/shared: 'pipelines' holds more than 200 files and folders through "
        f"'pipelines/shared', a symbolic link to '{big}' outside the project; pz stopped walking it "
        "(project files there were not read)"
    ], result.output
    (project_dir / "pipelines" / "shared").unlink()
    (project_dir / "pipelines" / "shared").symlink_to(big / "d1")  # a small linked folder is still read
    result = pz(project_dir, "validate")
    assert result.exit_code == 0 and "PZ0223 pipelines/shared/loop.sql" in result.output, result.output
    sources = project_dir / "sources"
    (big / "d2" / "files.yml").write_text((sources / "files.yml").read_text())
    for i in range(200):
        (big / "d2" / f"n{i}.txt").write_text("x")
    (sources / "files.yml").unlink()
    sources.rmdir()
    sources.symlink_to(big / "d2")  # sources/ itself a link to a folder with too many entries
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    assert result.lines[0].startswith("error: PZ0117 sources: 'sources' holds more than 200 files"), (
        result.output
    )


def test_project_file_that_is_a_dangling_link_is_pz0110(tmp_path: Path) -> None:
    outer = write_project(tmp_path / "outer", BASE)
    inner = outer / "inner"
    inner.mkdir()
    (inner / "project.yml").symlink_to("elsewhere.yml")
    result = pz(inner, "validate")
    assert result.exit_code == 2
    assert result.lines[0] == (
        "error: PZ0110 project.yml: symbolic link to 'elsewhere.yml', which does not exist"
    ), result.output


def test_check_options_that_do_not_fit_column_types_fail_tier_4(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/orders_out.yml": """
                checks:
                  - freshness: { column: amount, max_age: 1d }
                  - accepted_values: { column: id, values: [1, two] }
                  - relationships: { column: at, to: "source('files', 'customers')", field: id }
                  - expression: { sql: "amount * 2", name: doubled }
                  - freshness: { column: at, max_age: 1d }
                  - accepted_values: { column: amount, values: [10.5, 20] }
                  - relationships: { column: customer_id, to: "source('files', 'customers')", field: id }
                  - expression: { sql: "amount > 0", name: positive }
            """,
        },
    )
    result = pz(project_dir, "validate")
    _no_internal_error(result.output)
    assert result.exit_code == 2
    place = "pipelines/orders_out.yml"
    assert [line for line in result.lines if line.startswith("error:")] == [
        f"error: PZ0405 {place}:2:5: check 'freshness_amount' on 'orders_out': freshness needs a date or "
        "timestamp column; 'amount' is DECIMAL(10,2) "
        "(cast it in the pipeline, e.g. CAST(amount AS TIMESTAMP))",
        f"error: PZ0405 {place}:3:5: check 'accepted_values_id' on 'orders_out': value 'two' can never be a "
        "value of 'id' (BIGINT)",
        f"error: PZ0405 {place}:4:5: check 'relationships_at' on 'orders_out': 'at' (TIMESTAMP) can't be "
        "compared with source('files', 'customers').id (BIGINT); cast one of them in its pipeline",
        f"error: PZ0405 {place}:5:5: check 'expression_doubled' on 'orders_out': the expression must be true "
        "or false for each row; it is DECIMAL(18,2)",
    ], result.output


def test_accepted_values_compare_in_the_column_type(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/orders_out.yml": """
                checks:
                  - accepted_values: { column: amount, values: [10.5, 20] }
            """,
        },
    )
    result = pz(project_dir, "run")
    assert result.exit_code == 0, result.output
    assert result.node("chk_orders_out__accepted_values_amount")["status"] == "success"


@pytest.mark.mysql
def test_connectorx_panic_text_never_reaches_the_user(project_dir: Path) -> None:
    import secrets

    import pymysql

    name = f"pz_test_{secrets.token_hex(4)}"
    admin = pymysql.connect(host="127.0.0.1", port=3306, user="root", password="", autocommit=True)
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
        cur.execute(f"USE `{name}`")
        cur.execute("SET SESSION sql_mode = ''")
        cur.execute("CREATE TABLE odd (id INT, d DATETIME)")
        cur.execute("INSERT INTO odd VALUES (1, '2024-01-01'), (2, '0000-00-00 00:00:00')")
    try:
        write_project(
            project_dir,
            {
                "project.yml": "name: p\n",
                "sources/my.yml": f"""
                    connector: mysql
                    connection: {{ host: 127.0.0.1, port: 3306, user: root, password: "", database: {name} }}
                    datasets:
                      odd: {{ table: odd, columns: {{ id: int, d: timestamp }} }}
                """,
                "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
                "pipelines/o.sql": """
                    INSERT INTO {{ sink('wh', 'o') }}
                    SELECT * FROM {{ source('my', 'odd') }}
                """,
            },
        )
        result = pz_subprocess(project_dir, "run")
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        admin.close()
    assert result.exit_code == 1, result.output
    assert "PZ0518" in result.output or "the MySQL reader cannot convert a value" in result.output
    for raw in ("panicked at", "RUST_BACKTRACE", "stack backtrace", "rayon::"):
        assert raw not in result.output, result.output
