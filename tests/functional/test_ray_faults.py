"""Faults on the Ray executor: a worker killed mid-node is a transient PZ0710 that pz (the only retry
authority) retries once with no duplicate rows and no breaker trip; `pz retry` of a Ray run reuses what its
manifests staged (on Ray, or locally), and falls back to extraction with a note when a manifest is gone."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import duckdb

from tests.conftest import fresh_pg_database, pz, write_project
from tests.functional.test_ray_parity import FILES, PARTS


def _results(project: Path) -> dict[str, Any]:
    run = sorted((project / ".pz" / "runs").iterdir())[-1]
    return dict(json.loads((run / "run_results.json").read_text()))


def _events(project: Path) -> list[dict[str, Any]]:
    run = sorted((project / ".pz" / "runs").iterdir())[-1]
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]


def _node(results: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(next(n for n in results["nodes"] if n["name"] == name))


def test_a_worker_killed_mid_load_is_one_node_retry_with_no_duplicate_rows_and_no_breaker_trip(
    tmp_path: Path, ray_instance: Any
) -> None:
    files = {
        **FILES,
        "project.yml": """
            name: shop
            engine:
              retry: { max_attempts: 3, base_delay: 10ms, max_delay: 10ms }
              breaker: { failure_threshold: 1, cool_down: 1h }
        """,
    }
    project = write_project(tmp_path / "p", files)
    marks = tmp_path / "marks"
    marks.mkdir()
    # the worker process dies (exit 137, as kill -9) after the orders landed in its DuckDB, the first time
    env = {"PZ_FAILPOINTS": "source.landed@src_files__orders:kill-once", "PZ_FAILPOINTS_DIR": str(marks)}
    result = pz(project, "run", "--executor", "ray", env=env)
    assert result.exit_code == 0, result.output
    assert (marks / "source.landed@src_files__orders.hit").exists()  # the kill happened
    events = _events(project)
    retries = [e for e in events if e["event"] == "node_retry"]
    assert [(e["name"], e["attempt"], e["error"]["code"], e["error"]["transient"]) for e in retries] == [
        ("src_files__orders", 1, "PZ0710", True)
    ]
    assert not [e for e in events if e["event"] == "breaker_state_changed"]  # a lost worker blames nobody
    results = _results(project)
    orders = _node(results, "src_files__orders")
    assert (orders["status"], orders["attempts"], orders["rows"]) == ("success", 2, 4)
    con = duckdb.connect(str(project / "out" / "wh.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT sum(n)::INT FROM main.totals").fetchone() == (4,)  # each order once
    finally:
        con.close()


def test_a_worker_lost_on_every_attempt_fails_the_node_transiently_and_skips_its_descendants(
    tmp_path: Path, ray_instance: Any
) -> None:
    files = {**FILES, "project.yml": "name: shop\nengine: { retry: { max_attempts: 1 } }\n"}
    project = write_project(tmp_path / "p", files)
    result = pz(
        project, "run", "--executor", "ray", env={"PZ_FAILPOINTS": "source.landed@src_files__orders:kill"}
    )
    assert result.exit_code == 1, result.output
    assert "PZ0710: src_files__orders: the Ray worker running attempt 1 was lost" in result.output
    results = _results(project)
    orders = _node(results, "src_files__orders")
    assert orders["status"] == "failed" and orders["error"]["transient"] is True
    assert _node(results, "totals")["status"] == "skipped"
    assert _node(results, "src_files__customers")["status"] == "success"  # independent branch went on


def test_pz_retry_of_a_ray_run_reuses_the_manifests_of_the_loads_it_staged(
    tmp_path: Path, ray_instance: Any
) -> None:
    files = {**FILES, "project.yml": "name: shop\nengine: { retry: { max_attempts: 1 } }\n"}
    project = write_project(tmp_path / "p", files)
    failed = pz(project, "run", "--executor", "ray", env={"PZ_FAILPOINTS": "sink.write@wh.totals"})
    assert failed.exit_code == 1, failed.output
    first = _results(project)
    # the retry runs on the executor of the run it finishes (no flag), and reads its manifests
    retried = pz(project, "retry")
    assert retried.exit_code == 0, retried.output
    assert "note: reusing staged data for 2 source load(s)" in retried.output
    results = _results(project)
    assert results["retry_of"] == first["run_id"] and results["args"]["executor"] == "ray"
    for name in ("src_files__orders", "src_files__customers"):
        node = _node(results, name)
        assert (node["provenance"], node["reused_from"]) == ("reused", first["run_id"])
    assert _node(results, "wh.totals")["status"] == "success"
    staging = Path(results["args"]["staging"])
    manifest = json.loads((staging / results["run_id"] / "src_files__orders" / "_manifest.json").read_text())
    assert manifest["rows"] == 4  # the reused load is staged again under the retry's own run
    # pz clean (and the retention sweep) deletes what Ray runs staged on the shared folder too
    assert sorted(p.name for p in staging.iterdir()) == sorted([first["run_id"], results["run_id"]])
    assert pz(project, "clean").exit_code == 0
    assert list(staging.iterdir()) == []


def test_pz_retry_of_a_ray_run_falls_back_to_extraction_when_a_manifest_is_gone_and_may_run_locally(
    tmp_path: Path, ray_instance: Any
) -> None:
    files = {**FILES, "project.yml": "name: shop\nengine: { retry: { max_attempts: 1 } }\n"}
    project = write_project(tmp_path / "p", files)
    staging = tmp_path / "shared"
    failed = pz(
        project,
        "run",
        "--executor",
        "ray",
        "--staging",
        str(staging),
        env={"PZ_FAILPOINTS": "sink.write@wh.totals"},
    )
    assert failed.exit_code == 1, failed.output
    run_id = _results(project)["run_id"]
    shutil.rmtree(staging / run_id / "src_files__customers")
    retried = pz(project, "retry", "--executor", "local")
    assert retried.exit_code == 0, retried.output
    assert "note: reusing staged data for 1 source load(s)" in retried.output
    assert "src_files__customers" in retried.output and "_manifest.json" in retried.output
    results = _results(project)
    assert "executor" not in results["args"]  # this retry ran locally
    assert _node(results, "src_files__orders")["provenance"] == "reused"
    assert "provenance" not in _node(results, "src_files__customers")
    assert _node(results, "wh.totals")["status"] == "success"


PARTS_FLAKY = {
    **PARTS,
    "project.yml": """
        name: parts
        engine:
          retry: { max_attempts: 2, base_delay: 10ms, max_delay: 10ms }
          breaker: { failure_threshold: 1, cool_down: 1h }
    """,
}


def test_a_partitioned_load_fans_out_and_a_lost_partition_reruns_alone(
    tmp_path: Path, ray_instance: Any
) -> None:
    project = write_project(tmp_path / "p", PARTS_FLAKY)
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {"PZ_FAILPOINTS": "source.landed@src_files__events#2:kill-once", "PZ_FAILPOINTS_DIR": str(marks)}
    result = pz(project, "run", "--executor", "ray", env=env)
    assert result.exit_code == 0, result.output
    events = _events(project)
    retries = [(e["name"], e["error"]["code"]) for e in events if e["event"] == "node_retry"]
    assert retries == [("src_files__events", "PZ0710")]
    assert not [e for e in events if e["event"] == "breaker_state_changed"]
    results = _results(project)
    events_node = _node(results, "src_files__events")
    assert (events_node["status"], events_node["attempts"], events_node["rows"]) == ("success", 2, 15)
    assert [(p["index"], p["rows"]) for p in events_node["partitions"]] == [(i, 3) for i in range(5)]
    # one task per partition, each published with its manifest; the load's table is a manifest of their files
    staging = Path(results["args"]["staging"]) / results["run_id"]
    combined = json.loads((staging / "src_files__events" / "_manifest.json").read_text())
    assert combined["rows"] == 15 and len(combined["files"]) == 5
    assert all(f.startswith(f"../src_files__events__part{i}/") for i, f in enumerate(combined["files"]))
    con = duckdb.connect(str(project / "out" / "wh.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT sum(days)::INT FROM main.per_kind").fetchone() == (15,)  # no row twice
    finally:
        con.close()


def test_pz_retry_resumes_a_ray_partitioned_load_past_the_partitions_that_landed(
    tmp_path: Path, ray_instance: Any
) -> None:
    files = {**PARTS, "project.yml": "name: parts\nengine: { retry: { max_attempts: 1 } }\n"}
    project = write_project(tmp_path / "p", files)
    failed = pz(
        project, "run", "--executor", "ray", env={"PZ_FAILPOINTS": "source.landed@src_files__events#3"}
    )
    assert failed.exit_code == 1, failed.output
    first = _node(_results(project), "src_files__events")
    assert [p["status"] for p in first["partitions"]] == ["success"] * 3 + ["failed", "success"]
    retried = pz(project, "retry")
    assert retried.exit_code == 0, retried.output
    node = _node(_results(project), "src_files__events")
    assert node["status"] == "success" and node["rows"] == 15
    reused = [p["index"] for p in node["partitions"] if p.get("provenance") == "reused"]
    assert reused == [0, 1, 2, 4]


SLOW_PG = """
    CREATE TABLE t AS SELECT i AS id FROM generate_series(1, 10) i;
    CREATE VIEW slow AS SELECT t.* FROM t CROSS JOIN (SELECT pg_sleep(20)) s;
"""


def _slow_project(root: Path, db: str, extra: str = "") -> Path:
    return write_project(
        root,
        {
            **FILES,
            "project.yml": f"name: shop\nengine: {{ retry: {{ max_attempts: 1 }}{extra} }}\n",
            "sources/pg.yml": f"""
                connector: postgres
                connection: {{ host: 127.0.0.1, port: 5432, database: {db}, user: postgres }}
                datasets:
                  slow: {{ table: public.slow, columns: {{ id: integer }} }}
            """,
            "pipelines/slow_copy.sql": """
                INSERT INTO {{ sink('lake', 'slow_copy') }}
                SELECT * FROM {{ source('pg', 'slow') }}
            """,
            "sinks/lake.yml": """
                connector: localfiles
                connection: { root: out/lake }
                outputs:
                  orders_copy: { format: parquet }
                  slow_copy: { format: parquet }
            """,
        },
    )


def test_fail_fast_cancels_the_running_ray_tasks(tmp_path: Path, ray_instance: Any) -> None:
    with fresh_pg_database(SLOW_PG) as db:
        project = _slow_project(tmp_path / "p", db)
        # totals fails at once; the slow load (a 20 s query) is running on a worker: its task is cancelled
        fail = {"PZ_FAILPOINTS": "pipeline.start@totals"}
        result = pz(project, "run", "--executor", "ray", "--fail-fast", env=fail)
    assert result.exit_code == 1, result.output
    results = _results(project)
    slow = _node(results, "src_pg__slow")
    assert slow["status"] == "failed", slow
    assert slow["error"]["code"] == "PZ0514" and "Ray task was cancelled" in slow["error"]["message"], slow
    assert _node(results, "totals")["status"] == "failed"
    assert _node(results, "slow_copy")["status"] == "cancelled"


def _driver_until_files_landed(project: Path, env: dict[str, str]) -> Any:
    """`pz run --executor ray` as its own process, returned once both file loads are staged (the slow
    PostgreSQL load is still running then)."""
    import subprocess
    import sys
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "pipelinez.cli.main", "-p", str(project), "run", "--executor", "ray"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    landed: set[str] = set()
    while proc.poll() is None and landed != {"src_files__orders", "src_files__customers"}:
        time.sleep(0.2)
        runs = project / ".pz" / "runs"
        if runs.is_dir() and any(runs.iterdir()):
            landed = {
                e["name"]
                for e in _events(project)
                if e["event"] == "node_completed" and e["name"].startswith("src_files__")
            }
    return proc


def test_ctrl_c_on_the_driver_cancels_its_tasks_and_pz_retry_reuses_the_manifests(
    tmp_path: Path, ray_instance: Any
) -> None:
    import signal

    with fresh_pg_database(SLOW_PG) as db:
        project = _slow_project(tmp_path / "p", db)
        # the driver is its own process, starting its own local Ray instance (stopped when it ends)
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        proc = _driver_until_files_landed(project, env)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, err
        interrupted = _results(project)
        assert interrupted["status"] == "failed" and interrupted["error"]["code"] == "PZ0514"
        assert _node(interrupted, "src_pg__slow")["status"] == "cancelled"
        retried = pz(project, "retry")  # joins the session's instance
    assert retried.exit_code == 0, retried.output
    assert "note: reusing staged data for 2 source load(s)" in retried.output
    results = _results(project)
    assert results["retry_of"] == interrupted["run_id"]
    assert _node(results, "src_files__orders")["provenance"] == "reused"
    assert _node(results, "src_pg__slow")["status"] == "success"


def test_a_ray_driver_killed_with_sigkill_is_refused_by_pz_retry_as_on_the_local_executor(
    tmp_path: Path, ray_instance: Any
) -> None:
    with fresh_pg_database(SLOW_PG) as db:
        project = _slow_project(tmp_path / "p", db)
        # joined to the session's instance: Ray ends the killed driver's tasks itself
        env = {**os.environ, "RAY_ADDRESS": ray_instance.get_runtime_context().gcs_address}
        proc = _driver_until_files_landed(project, env)
        proc.kill()
        proc.communicate(timeout=60)
        killed = _results(project)
        assert killed["status"] == "running"  # it never recorded an end
        retried = pz(project, "retry")
    # the article's rule holds on Ray too: a kill -9'd run's statuses can't be trusted, even with manifests
    assert retried.exit_code == 2, retried.output
    assert "PZ0503" in retried.output and killed["run_id"] in retried.output
