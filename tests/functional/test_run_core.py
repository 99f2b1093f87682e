"""End-to-end runs of the core on local files and DuckDB files, through the real CLI."""

from __future__ import annotations

from pathlib import Path

import duckdb
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
            columns: { id: bigint, customer: varchar, amount: "decimal(10,2)", code: varchar }
          customers:
            format: csv
            path: customers.csv
    """,
    "sinks/wh.yml": """
        connector: duckdb
        connection: { path: out/wh.duckdb }
        outputs:
          totals: { table: main.totals }
          bad_totals: {}
    """,
    "sinks/lake.yml": """
        connector: localfiles
        connection: { root: out/lake }
        outputs:
          orders_copy: { format: parquet }
    """,
    "data/orders.csv": """
        id,customer,amount,code
        1,ada,10.50,1
        2,grace,20.00,2
        3,ada,5.25,x
    """,
    "data/customers.csv": """
        name,country
        ada,GB
        grace,US
    """,
}
ORDERS_COPY = """
    INSERT INTO {{ sink('lake', 'orders_copy') }}
    SELECT * FROM {{ source('files', 'orders') }}
"""


def _wh_rows(project: Path, sql: str) -> list[tuple[object, ...]]:
    con = duckdb.connect(str(project / "out" / "wh.duckdb"), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_happy_path_writes_every_sink_and_prints_ok_lines(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/totals.sql": """
            INSERT INTO {{ sink('wh', 'totals') }}
            SELECT o.customer, c.country, sum(o.amount) AS total
            FROM {{ source('files', 'orders') }} AS o
            JOIN {{ source('files', 'customers') }} AS c ON c.name = o.customer
            GROUP BY ALL ORDER BY 1
        """,
            "pipelines/orders_copy.sql": ORDERS_COPY,
        },
    )
    result = pz(project_dir, "run")
    assert result.exit_code == 0, result.output
    lines = result.lines
    assert any(line.startswith("ok src_files__orders 3 rows ") and line.endswith("ms") for line in lines)
    # totals has one reader, a replace: streamed into it, not stored; its rows are the write's
    assert any(line.startswith("ok totals streamed into wh.totals ") for line in lines), lines
    assert result.node("totals")["rows"] == 2
    assert any(line.startswith("ok wh.totals 2 rows") for line in lines)
    assert any(line.startswith("ok lake.orders_copy 3 rows") for line in lines)
    assert _wh_rows(project_dir, "SELECT * FROM totals ORDER BY 1") == [
        ("ada", "GB", pytest.approx(15.75)),
        ("grace", "US", pytest.approx(20.0)),
    ]
    lake = duckdb.sql(
        f"SELECT count(*) FROM '{project_dir}/out/lake/orders_copy.parquet/*.parquet'"
    ).fetchone()
    assert lake == (3,)
    results = result.run_results()
    assert results["status"] == "success"
    assert {n["name"] for n in results["nodes"]} == {
        "src_files__orders",
        "src_files__customers",
        "totals",
        "orders_copy",
        "wh.totals",
        "lake.orders_copy",
    }
    for node in results["nodes"]:
        assert node["status"] == "success" and len(node["id"]) == 16 and node["duration_ms"] >= 0


def test_failed_branch_skips_descendants_and_other_branch_commits(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            # fails at run time only: 'x' cannot be cast, which dry-compile cannot know
            "pipelines/bad_totals.sql": """
            INSERT INTO {{ sink('wh', 'bad_totals') }}
            SELECT customer, sum(CAST(code AS INTEGER)) AS n FROM {{ source('files', 'orders') }} GROUP BY 1
        """,
            "pipelines/bad_totals.yml": """
            checks:
              - not_null: { columns: [customer] }
        """,
            "pipelines/orders_copy.sql": ORDERS_COPY,
        },
    )
    result = pz(project_dir, "run")
    assert result.exit_code == 1, result.output
    assert any(line.startswith("FAIL bad_totals 0 rows") for line in result.lines)
    assert any(
        line.startswith("  PZ0507: pipeline 'bad_totals'") and "Could not convert" in line
        for line in result.lines
    ), result.output
    assert "SKIP wh.bad_totals (upstream bad_totals failed)" in result.lines
    assert "SKIP chk_bad_totals__not_null_customer (upstream bad_totals failed)" in result.lines
    assert result.node("lake.orders_copy")["status"] == "success"
    assert result.node("wh.bad_totals")["status"] == "skipped"
    results = result.run_results()
    assert results["status"] == "failed"
    for node in results["nodes"]:
        assert {"id", "status", "rows", "duration_ms"} <= node.keys()
    assert "Traceback" not in result.output


def test_sink_failure_leaves_other_sink_committed(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "sinks/wh.yml": """
            connector: duckdb
            connection: { path: blocker/wh.duckdb }
        """,
            "blocker": "a file where the sink wants a folder\n",
            "pipelines/totals.sql": """
            INSERT INTO {{ sink('wh', 'totals') }}
            INSERT INTO {{ sink('lake', 'orders_copy') }}
            SELECT customer, sum(amount) AS total FROM {{ source('files', 'orders') }} GROUP BY 1
        """,
        },
    )
    result = pz(project_dir, "run")
    assert result.exit_code == 1, result.output
    assert any(line.startswith("FAIL wh.totals 0 rows") for line in result.lines)
    assert any(line.startswith("  PZ0501: sink 'wh' output 'totals'") for line in result.lines)
    assert any(line.startswith("ok lake.orders_copy 2 rows") for line in result.lines)


def test_fail_fast_cancels_pending_nodes(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "project.yml": "name: shop\nengine: { threads: 1 }\n",
            "pipelines/a_bad.sql": """
            INSERT INTO {{ sink('wh', 'bad_totals') }}
            SELECT CAST(code AS INTEGER) AS n FROM {{ source('files', 'orders') }}
        """,
            "pipelines/z_copy.sql": """
            INSERT INTO {{ sink('lake', 'orders_copy') }}
            SELECT * FROM {{ source('files', 'customers') }}
        """,
        },
    )
    result = pz(project_dir, "run", "--fail-fast")
    assert result.exit_code == 1
    statuses = {n["name"]: n["status"] for n in result.run_results()["nodes"]}
    assert statuses["a_bad"] == "failed"  # streamed: its query runs, and fails, in the write reading it
    assert statuses["wh.bad_totals"] == "failed"
    assert result.node("wh.bad_totals")["error"]["code"] == "PZ0507"
    assert "cancelled" in statuses.values()
    assert statuses["lake.orders_copy"] in ("cancelled", "skipped")


def test_warning_only_project_runs_and_exits_zero(project_dir: Path) -> None:
    write_project(
        project_dir, {**BASE, "pipelines/scratch.sql": "SELECT * FROM {{ source('files', 'orders') }}\n"}
    )
    result = pz(project_dir, "run")
    assert result.exit_code == 0, result.output
    assert (
        "warning: PZ0223 pipelines/scratch.sql: pipeline 'scratch' has no INSERT INTO and no ref() consumer"
        in result.lines
    )
    assert any(line.startswith("ok scratch 3 rows") for line in result.lines)
    validate = pz(project_dir, "validate")
    assert validate.exit_code == 0
    assert "1 warning" in validate.lines


def test_replace_failing_before_swap_leaves_previous_target(
    project_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/totals.sql": """
            INSERT INTO {{ sink('wh', 'totals') }}
            INSERT INTO {{ sink('lake', 'orders_copy') }}
            SELECT customer, sum(amount) AS total FROM {{ source('files', 'orders') }} GROUP BY 1
        """,
        },
    )
    assert pz(project_dir, "run").exit_code == 0
    before_rows = _wh_rows(project_dir, "SELECT * FROM totals ORDER BY 1")
    lake = project_dir / "out" / "lake" / "orders_copy.parquet"
    before_files = {p.name: p.read_bytes() for p in lake.iterdir()}
    (project_dir / "data" / "orders.csv").write_text("id,customer,amount,code\n9,zed,1.00,1\n")
    monkeypatch.setenv("PZ_FAILPOINTS", "sink.before_swap")
    result = pz(project_dir, "run")
    assert result.exit_code == 1
    assert _wh_rows(project_dir, "SELECT * FROM totals ORDER BY 1") == before_rows
    assert {p.name: p.read_bytes() for p in lake.iterdir()} == before_files
    assert not [p for p in lake.parent.iterdir() if p.name != "orders_copy.parquet"]


def test_replace_killed_before_swap_leaves_previous_target(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/totals.sql": """
            INSERT INTO {{ sink('wh', 'totals') }}
            SELECT customer, sum(amount) AS total FROM {{ source('files', 'orders') }} GROUP BY 1
        """,
        },
    )
    assert pz(project_dir, "run").exit_code == 0
    before = _wh_rows(project_dir, "SELECT * FROM totals ORDER BY 1")
    (project_dir / "data" / "orders.csv").write_text("id,customer,amount,code\n9,zed,1.00,1\n")
    killed = pz_subprocess(project_dir, "run", env={"PZ_FAILPOINTS": "sink.before_swap:kill"})
    assert killed.exit_code == 137
    assert _wh_rows(project_dir, "SELECT * FROM totals ORDER BY 1") == before


def test_empty_result_never_replaces_a_table(project_dir: Path) -> None:
    files = {
        **BASE,
        "pipelines/totals.sql": """
            INSERT INTO {{ sink('wh', 'totals') }}
            SELECT customer, amount FROM {{ source('files', 'orders') }} WHERE amount > {{ var('floor') }}
        """,
        "project.yml": "name: shop\nvars:\n  floor: { type: int, default: 0 }\n",
    }
    write_project(project_dir, files)
    assert pz(project_dir, "run").exit_code == 0
    result = pz(project_dir, "run", "--var", "floor=1000")
    assert result.exit_code == 1
    assert any("PZ0509" in line for line in result.lines)
    assert _wh_rows(project_dir, "SELECT count(*) FROM totals") == [(3,)]


def test_json_log_format_prints_one_event_per_line(project_dir: Path) -> None:
    import json

    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/orders_copy.sql": ORDERS_COPY,
        },
    )
    result = pz(project_dir, "--log-format", "json", "run")
    assert result.exit_code == 0
    events = [json.loads(line) for line in result.lines]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_completed"
    completed = [e for e in events if e["event"] == "node_completed"]
    assert {e["name"] for e in completed} == {"src_files__orders", "orders_copy", "lake.orders_copy"}
    assert all({"ts", "run_id", "id", "status", "rows", "duration_ms"} <= e.keys() for e in completed)
    runs = sorted((project_dir / ".pz" / "runs").iterdir())
    assert len((runs[-1] / "events.jsonl").read_text().splitlines()) == len(events)


def test_second_concurrent_run_is_refused(project_dir: Path) -> None:
    import fcntl
    import os

    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/orders_copy.sql": ORDERS_COPY,
        },
    )
    lock = project_dir / ".pz" / "lock"
    lock.parent.mkdir(parents=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, b"4242")
    try:
        result = pz_subprocess(project_dir, "run")
    finally:
        os.close(fd)
    assert result.exit_code == 2
    assert "error: PZ0511" in result.output and "pid 4242" in result.output


def test_retention_keeps_last_staging_databases(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "project.yml": "name: shop\nretention: { keep_last: 2 }\n",
            "pipelines/orders_copy.sql": ORDERS_COPY,
        },
    )
    for _ in range(4):
        assert pz(project_dir, "run").exit_code == 0
    runs = sorted((project_dir / ".pz" / "runs").iterdir())
    assert len(runs) == 4
    assert [(r / "staging.duckdb").exists() for r in runs] == [False, False, True, True]
    history = pz(project_dir, "runs")
    assert history.exit_code == 0 and len(history.lines) == 5
    assert pz(project_dir, "clean").exit_code == 0
    assert not any((r / "staging.duckdb").exists() for r in runs)


def test_run_results_match_the_published_schema(project_dir: Path) -> None:
    import json

    from jsonschema import Draft202012Validator

    schema_path = (
        Path(__file__).parents[2] / "pipelinez" / "engine" / "state" / "schemas" / "run_results.v1.json"
    )
    schema = json.loads(schema_path.read_text())
    Draft202012Validator.check_schema(schema)
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/bad.sql": """
            INSERT INTO {{ sink('wh', 'bad_totals') }}
            SELECT CAST(code AS INTEGER) AS n FROM {{ source('files', 'orders') }}
        """,
            "pipelines/orders_copy.sql": ORDERS_COPY,
        },
    )
    result = pz(project_dir, "run")
    results = result.run_results()
    Draft202012Validator(schema).validate(results)
    fixture = Path(__file__).parents[1] / "fixtures" / "run_results" / "v1_failed_run.json"
    Draft202012Validator(schema).validate(json.loads(fixture.read_text()))
    assert results["args"]["select"] == [] and results["selection"] == ["--all"]


def test_failing_error_check_blocks_sinks_and_warn_check_does_not(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/orders_copy.sql": ORDERS_COPY,
            "pipelines/orders_copy.yml": """
            checks:
              - accepted_values: { column: code, values: ["1", "2"] }
              - unique: { columns: [customer] }
                severity: warn
        """,
            "pipelines/totals.sql": """
            INSERT INTO {{ sink('wh', 'totals') }}
            SELECT customer, count(*) AS n FROM {{ ref('orders_copy') }} GROUP BY 1
        """,
        },
    )
    result = pz(project_dir, "run")
    assert result.exit_code == 1, result.output
    assert any(line.startswith("FAIL chk_orders_copy__accepted_values_code 1 rows") for line in result.lines)
    assert any(
        line.startswith("  PZ0508: check 'accepted_values_code' on 'orders_copy': 1 row(s)")
        for line in result.lines
    ), result.output
    assert any(line.startswith("WARN chk_orders_copy__unique_customer 2 rows") for line in result.lines)
    assert any(line.startswith("  PZ0510: check 'unique_customer'") for line in result.lines)
    assert "SKIP lake.orders_copy (upstream chk_orders_copy__accepted_values_code failed)" in result.lines
    assert "SKIP wh.totals (upstream chk_orders_copy__accepted_values_code failed)" in result.lines
    assert not (project_dir / "out" / "lake").exists()


def test_terminal_gets_live_progress_and_the_same_lines(project_dir: Path) -> None:
    import os
    import pty
    import subprocess
    import sys

    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/orders_copy.sql": ORDERS_COPY,
        },
    )
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipelinez.cli.main", "-p", str(project_dir), "run"],
        stdout=follower,
        stderr=follower,
        stdin=subprocess.DEVNULL,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert proc.wait(timeout=120) == 0
    screen = b"".join(chunks).decode(errors="replace")
    assert "nodes]" in screen  # the live progress line
    assert "ok lake.orders_copy 3 rows" in screen
    assert "Traceback" not in screen


def test_partitions_land_in_parallel_and_combine_into_one_staging_table(project_dir: Path) -> None:
    files = {
        f"data/parts/p{i}.csv": "id,customer,amount,code\n"
        + "".join(f"{i * 100 + j},c{j},1.00,{j}\n" for j in range(i + 1))
        for i in range(3)
    }
    write_project(
        project_dir,
        {
            **BASE,
            **files,
            "sources/files.yml": """
            connector: localfiles
            connection: { root: data }
            datasets:
              orders:
                format: csv
                path: "parts/*.csv"
                files_per_partition: 1
                columns: { id: bigint, customer: varchar, amount: "decimal(10,2)", code: varchar }
        """,
            "pipelines/orders_copy.sql": ORDERS_COPY,
        },
    )
    result = pz(project_dir, "run")
    assert result.exit_code == 0, result.output
    node = result.node("src_files__orders")
    assert node["rows"] == 6
    parts = [{k: v for k, v in p.items() if k != "fingerprint"} for p in node["partitions"]]
    assert parts == [{"index": i, "rows": i + 1, "status": "success"} for i in range(3)]
    assert len({p["fingerprint"] for p in node["partitions"]}) == 3  # what each partition reads, hashed
    staging = sorted((project_dir / ".pz" / "runs").iterdir())[-1] / "staging.duckdb"
    con = duckdb.connect(str(staging), read_only=True)
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        assert tables == {"src_files__orders"}  # orders_copy is streamed into its write: a view
        views = {
            r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
        }
        assert views == {"orders_copy"}
        assert con.execute("SELECT count(DISTINCT id) FROM src_files__orders").fetchone() == (6,)
    finally:
        con.close()


def test_dataset_checks_run_on_the_staged_extraction_and_gate_readers(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "sources/files.yml": """
            connector: localfiles
            connection: { root: data }
            datasets:
              orders:
                format: csv
                path: orders.csv
                columns: { id: bigint, customer: varchar, amount: "decimal(10,2)", code: varchar }
                checks:
                  - row_count: { min: 10 }
        """,
            "pipelines/orders_copy.sql": ORDERS_COPY,
        },
    )
    result = pz(project_dir, "run")
    assert result.exit_code == 1, result.output
    assert any(line.startswith("FAIL chk_src_files__orders__row_count 0 rows") for line in result.lines)
    assert "SKIP orders_copy (upstream chk_src_files__orders__row_count failed)" in result.lines


def test_schema_command_writes_every_schema(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from pipelinez.cli.main import cli

    out = tmp_path / "schemas"
    result = CliRunner().invoke(cli, ["schema", "--out", str(out)])
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in out.iterdir())
    assert len(names) == 4 and all(n.endswith(".json") for n in names)
    for path in out.iterdir():
        assert json.loads(path.read_text())["$schema"].startswith("https://json-schema.org/")


def test_engine_memory_limit_is_validated_and_applied(project_dir: Path) -> None:
    files = {
        **BASE,
        "pipelines/orders_copy.sql": ORDERS_COPY,
    }
    write_project(project_dir, {**files, "project.yml": "name: shop\nengine: { memory_limit: lots }\n"})
    refused = pz(project_dir, "validate")
    assert refused.exit_code == 2 and any(
        "PZ0103" in line and "memory_limit" in line for line in refused.lines
    )
    write_project(project_dir, {**files, "project.yml": "name: shop\nengine: { memory_limit: 64MB }\n"})
    assert pz(project_dir, "run").exit_code == 0


def test_native_only_format_under_force_universal_is_flagged_by_plan_and_refused_at_load(
    tmp_path: Path,
) -> None:
    from pipelinez.scaffold.quickstart import write_quickstart

    project = tmp_path / "qs"
    write_quickstart(project)
    yml = project / "project.yml"
    yml.write_text(yml.read_text().replace("engine:\n", "engine:\n  force_universal: true\n"))
    plan = pz(project, "plan")
    assert plan.exit_code == 0
    assert "note: format parquet is native-only" in plan.output
    run = pz(project, "run")
    assert run.exit_code == 1
    assert any(line.startswith("  PZ0312: source 'files' dataset 'orders'") for line in run.lines), run.output
    assert run.node("src_files__customers")["tier"] == "universal"


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_sigint_or_sigterm_stops_the_run_and_records_every_node(project_dir: Path, signame: str) -> None:
    """SIGTERM (what Airflow, Kubernetes and systemd send) is Ctrl-C: PZ0514, the run recorded as
    interrupted, the lock released, and `pz retry` takes the run up (not PZ0503)."""
    import json
    import signal
    import subprocess
    import sys
    import time

    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/slow.sql": """
            INSERT INTO {{ sink('lake', 'orders_copy') }}
            SELECT sum(hash(i)) AS h FROM range(20000000000) t(i), {{ source('files', 'orders') }} LIMIT 1
        """,
        },
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipelinez.cli.main", "-p", str(project_dir), "run"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    runs = project_dir / ".pz" / "runs"
    deadline = time.monotonic() + 600  # start-up on a machine at load average 40 can take minutes
    while time.monotonic() < deadline:  # slow is streamed into its sink write: the write runs the query
        events = list(runs.glob("*/events.jsonl")) if runs.exists() else []
        if (
            events
            and '"node_started", "ts": ' in (text := events[0].read_text())
            and ('"name": "lake.orders_copy"' in text)
        ):
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the slow sink write did not start within 10 minutes")
    time.sleep(0.5)
    proc.send_signal(getattr(signal, signame))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    by = " by SIGTERM" if signame == "SIGTERM" else ""
    assert f"error: PZ0514 run interrupted{by}: " in err and "Traceback" not in err, err
    assert "  next: run `pz retry`" in err, err
    results = json.loads(next(runs.glob("*/run_results.json")).read_text())
    assert results["status"] == "failed" and results["error"]["code"] == "PZ0514"
    assert signame in results["error"]["message"]
    statuses = {n["name"]: n["status"] for n in results["nodes"]}
    assert statuses["src_files__orders"] == "success"
    assert statuses["slow"] == "cancelled"  # a view: its query ran in the sink write, interrupted with it
    assert statuses["lake.orders_copy"] == "cancelled"
    assert pz(project_dir, "runs").exit_code == 0
    retry = pz(project_dir, "retry", "--dry-run")  # the run is finished by a retry, not refused (PZ0503)
    assert retry.exit_code == 0 and any(ln.split() == ["run", "lake.orders_copy"] for ln in retry.lines), (
        retry.output
    )
    assert pz(project_dir, "clean").exit_code == 0  # the lock was released


def test_an_interrupted_pz_removes_its_temp_spools_before_it_ends(tmp_path: Path) -> None:
    """`pz` ends with os._exit after an interruption (no atexit handler runs), so it removes its temp
    spools itself first: an HTTP read's resume spool is gone."""
    import subprocess
    import sys

    code = (
        "from pipelinez.connectors.http import resume\n"
        "from pipelinez.cli import interrupts\n"
        "spool = resume.spool_for(('run', 'api', 'items', 'x'))\n"
        "print(spool.folder, flush=True)\n"
        "interrupts.exit_now(1)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    folder = Path(done.stdout.strip())
    assert folder.name.startswith("pz-http-resume-")
    assert not folder.exists()


@pytest.mark.parametrize("after", [0.1, 0.3, 0.9, 1.5, 2.5])
def test_sigint_at_any_moment_stops_pz_promptly(project_dir: Path, after: float) -> None:
    """Ctrl-C while pz starts, validates, opens the run, or just submitted a node: one PZ0514 line and exit
    1 within seconds, never a hang behind a query that started after the interrupt went by."""
    import signal
    import subprocess
    import sys
    import time

    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/slow.sql": """
            INSERT INTO {{ sink('lake', 'orders_copy') }}
            SELECT sum(hash(i)) AS h FROM range(20000000000) t(i), {{ source('files', 'orders') }} LIMIT 1
        """,
        },
    )
    script = Path(sys.executable).parent / "pz"  # the console script: it records SIGINT before any import
    proc = subprocess.Popen(
        [str(script), "-p", str(project_dir), "run"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    status = Path(f"/proc/{proc.pid}/status")
    while proc.poll() is None and not int(  # until the interpreter handles SIGINT at all (SigCgt bit 2)
        next(line for line in status.read_text().splitlines() if line.startswith("SigCgt:")).split()[1], 16
    ) & (1 << 1):
        time.sleep(0.01)
    time.sleep(after)
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"pz still ran 120 s after SIGINT (sent {after}s after start)")
    if "init_import_site" in err:  # the interpreter itself was still starting: no pz code had run yet
        pytest.skip(f"SIGINT {after}s after start landed in Python's own start-up (machine under load)")
    assert proc.returncode == 1, err
    assert "PZ0514" in err and "Traceback" not in err, err


def test_a_node_that_gets_its_cursor_after_an_interrupt_never_starts_its_query(tmp_path: Path) -> None:
    from pipelinez.engine.run.context import RunContext, open_staging
    from pipelinez.engine.run.failures import NodeFailure

    staging = open_staging(tmp_path / "staging.duckdb", "1GB")
    ctx = RunContext("r", tmp_path, None, None, staging)  # type: ignore[arg-type]
    running = ctx.cursor()
    ctx.interrupt_all()
    with pytest.raises(NodeFailure) as refused:
        ctx.cursor()
    assert refused.value.code == "PZ0514"
    ctx.release(running)
    staging.close()


def test_runs_shows_a_killed_run_as_interrupted(project_dir: Path) -> None:
    write_project(project_dir, {**BASE, "pipelines/orders_copy.sql": ORDERS_COPY})
    killed = pz_subprocess(project_dir, "run", env={"PZ_FAILPOINTS": "sink.before_swap:kill"})
    assert killed.exit_code == 137
    history = pz(project_dir, "runs")
    assert "interrupted" in history.lines[1], history.output
    assert pz(project_dir, "run").exit_code == 0  # the dead run's lock did not block this one


def test_a_stop_signal_while_pz_ends_is_no_traceback_and_keeps_the_exit_code() -> None:
    """The command has ended (its exit code is known) but the interpreter would still join a thread: a SIGINT
    then surfaced as 'Exception ignored in threading._shutdown' with a traceback (and a SIGTERM in Python's
    last moments killed the process with 143, found by the fuzz suite). pz now leaves at once, with the
    command's exit code, before anything can land there."""
    import subprocess
    import sys

    code = (
        "import os, signal, sys, threading, time\n"
        "sys.argv = ['pz', '--version']\n"
        "threading.Thread(target=time.sleep, args=(3,)).start()  # joined at interpreter shutdown\n"
        "def later():\n"
        "    time.sleep(1)\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "threading.Thread(target=later, daemon=True).start()\n"
        "from pipelinez.cli.entry import main  # the `pz` console script\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
