"""The Python API (`from pipelinez import Project`): typed results, no printing, no exit, every diagnostic in
one exception, events as in events.jsonl; and the orchestrator example of docs/api.md, run as written."""

from __future__ import annotations

import json
import logging
import pickle
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipelinez import Project, PzConfigError, PzValidationError
from pipelinez.api import PlanNode, RunPlan, ValidationReport, init_project
from pipelinez.core.vocabulary import NodeKind, NodeStatus, RunStatus
from tests.conftest import write_project
from tests.functional.test_run_core import BASE, ORDERS_COPY

DOCS = Path(__file__).parents[2] / "docs" / "api.md"

BAD_TOTALS = """
    INSERT INTO {{ sink('wh', 'bad_totals') }}
    SELECT customer, sum(CAST(code AS INTEGER)) AS n FROM {{ source('files', 'orders') }} GROUP BY 1
"""


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return write_project(tmp_path / "shop", {**BASE, "pipelines/orders_copy.sql": ORDERS_COPY})


def test_validate_plan_and_run_return_typed_values_and_print_nothing(
    shop: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = Project(shop)
    report = project.validate()
    assert isinstance(report, ValidationReport) and report.nodes == 3
    plan = project.plan(select=["lake.orders_copy"])
    assert isinstance(plan, RunPlan) and all(isinstance(n, PlanNode) for n in plan.nodes)
    assert plan.names == ["src_files__orders", "orders_copy", "lake.orders_copy"]
    assert plan.nodes[2].kind == NodeKind.SINK_WRITE and plan.nodes[2].deps == ("orders_copy",)
    assert plan.nodes[2].strategy == "replace" and plan.nodes[2].delivery
    outcome = project.run()
    assert outcome.status == RunStatus.SUCCESS and outcome.exit_code == 0
    assert {n.name: (n.status, n.rows) for n in outcome.nodes} == {
        "src_files__orders": (NodeStatus.SUCCESS, 3),
        "orders_copy": (NodeStatus.SUCCESS, 3),
        "lake.orders_copy": (NodeStatus.SUCCESS, 3),
    }
    assert [r.run_id for r in project.runs(limit=5)] == [outcome.run_id]
    assert pickle.loads(pickle.dumps(outcome)) == outcome
    assert capsys.readouterr() == ("", "")


def test_on_event_gets_exactly_what_events_jsonl_records(shop: Path) -> None:
    seen: list[dict[str, Any]] = []
    outcome = Project(shop).run(on_event=seen.append)
    lines = (shop / ".pz" / "runs" / outcome.run_id / "events.jsonl").read_text().splitlines()
    assert seen == [json.loads(line) for line in lines]
    assert seen[0]["event"] == "run_started" and seen[-1]["event"] == "run_completed"


def test_a_failed_node_is_a_result_not_an_exception(shop: Path) -> None:
    write_project(shop, {"pipelines/bad_totals.sql": BAD_TOTALS})
    outcome = Project(shop).run()
    assert outcome.status == RunStatus.FAILED and outcome.exit_code == 1
    by_name = {n.name: n for n in outcome.nodes}
    failed = by_name["wh.bad_totals"]  # bad_totals is streamed into this write, which runs its query
    assert failed.status == NodeStatus.FAILED
    assert failed.error is not None and failed.error.code == "PZ0507"
    assert failed.error.message.startswith("pipeline 'bad_totals' (pipelines/bad_totals.sql): ")
    assert by_name["lake.orders_copy"].status == NodeStatus.SUCCESS
    stopped = Project(shop).run(fail_fast=True, threads=1)
    assert stopped.status == RunStatus.FAILED
    assert NodeStatus.PENDING not in {n.status for n in stopped.nodes}


def test_every_validation_error_comes_in_one_exception_and_nothing_exits(
    shop: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_project(
        shop,
        {
            "pipelines/a.sql": "INSERT INTO {{ sink('nowhere', 'x') }} SELECT 1 AS one",
            "pipelines/b.sql": "SELECT * FROM {{ ref('missing') }}",
        },
    )
    project = Project(shop)
    with pytest.raises(PzValidationError) as info:
        project.validate()
    codes = [d.code for d in info.value.diagnostics if d.is_error]
    assert len(codes) >= 2, codes
    with pytest.raises(PzValidationError) as planned:
        project.run()
    assert [d.code for d in planned.value.diagnostics if d.is_error] == codes
    assert not (shop / ".pz" / "runs").exists()  # refused before any run started
    assert capsys.readouterr() == ("", "")


def test_a_folder_without_a_project_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(PzConfigError) as info:
        Project(tmp_path)
    assert info.value.diagnostics[0].code == "PZ0105"


def test_importing_pipelinez_does_not_load_the_engine() -> None:
    code = "import sys, pipelinez; print(any(m.startswith('pipelinez.engine') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _orchestrator_example() -> Any:
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## From an orchestrator", 1)[1]
    code = re.findall(r"```python\n(.+?)\n```", section, flags=re.S)[0]
    namespace: dict[str, Any] = {"__name__": "docs_api_example"}
    exec(compile(code, str(DOCS), "exec"), namespace)
    return namespace["run_pipelinez"]


def test_the_orchestrator_example_in_docs_api_runs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    run_pipelinez = _orchestrator_example()
    init_project(tmp_path / "quickstart")
    with caplog.at_level(logging.INFO, logger="pipelinez"):
        summary = run_pipelinez(str(tmp_path / "quickstart"), min_amount="0")
    assert set(summary) == {"run_id", "rows"}
    assert summary["rows"]["orders_enriched"] > 0
    assert any(r.getMessage().startswith("success orders_enriched") for r in caplog.records)
    with pytest.raises(RuntimeError, match="failed"):
        shop = write_project(tmp_path / "shop", {**BASE, "pipelines/bad_totals.sql": BAD_TOTALS})
        run_pipelinez(str(shop))
    with pytest.raises(PzValidationError):
        run_pipelinez(str(shop), undeclared_var="1")


def test_arguments_of_the_wrong_type_are_one_usage_error_and_nothing_runs(shop: Path) -> None:
    from pipelinez.api import PzUsageError

    project = Project(shop)
    with pytest.raises(PzUsageError) as info:
        project.run(threads="2", fail_fast="no", vars=["min_date=2025-01-01"], select="orders_copy")  # type: ignore[arg-type]
    problems = info.value.diagnostics
    assert [d.code for d in problems] == ["PZ0513"] * 4, problems
    said = " | ".join(d.message for d in problems)
    for name in ("threads='2'", "fail_fast='no'", "vars=['min_date=2025-01-01']", "select='orders_copy'"):
        assert name in said, said
    assert all(d.place.file == "Project.run()" and d.next_step for d in problems)
    for bad in ({"threads": 0}, {"threads": True}, {"vars": {"n": 5}}, {"on_event": "print"}):
        with pytest.raises(PzUsageError):
            project.run(**bad)  # type: ignore[arg-type]
    with pytest.raises(PzUsageError):
        project.retry(dry_run="yes")  # type: ignore[arg-type]
    with pytest.raises(PzUsageError):
        project.runs(limit=0)
    # the docs site's calls too (they raised TypeError, AttributeError, OverflowError: found by review)
    for call in (
        lambda: project.docs(runs="5"),  # type: ignore[arg-type]
        lambda: project.docs(runs=0),
        lambda: project.lineage(5),  # type: ignore[arg-type]
        lambda: project.docs_server(shop, port=70000),
    ):
        with pytest.raises(PzUsageError):
            call()
    assert not (shop / ".pz" / "runs").exists()  # refused before any run started


def test_a_callback_that_raises_does_not_stop_or_strand_the_run(shop: Path) -> None:
    from pipelinez.api import EventCallbackError

    seen: list[str] = []

    def on_event(event: dict[str, Any]) -> None:
        seen.append(event["event"])
        if event["event"] == "node_completed":
            raise ValueError("the orchestrator's log is full")

    with pytest.raises(EventCallbackError) as info:
        Project(shop).run(on_event=on_event)
    assert seen.count("node_completed") == 1  # not called again after it raised
    failure = info.value
    assert [d.code for d in failure.diagnostics] == ["PZ0535"]
    assert "ValueError: the orchestrator's log is full" in failure.diagnostics[0].message
    assert isinstance(failure.__cause__, ValueError)
    outcome = failure.outcome
    assert outcome.status == RunStatus.SUCCESS  # the run went on to its end
    results = json.loads((shop / ".pz" / "runs" / outcome.run_id / "run_results.json").read_text())
    assert results["status"] == "success" and results["finished_at"]
    assert Project(shop).run().status == RunStatus.SUCCESS  # the lock was released


@pytest.mark.parametrize("handler", ["default", "the caller's"])
def test_sigterm_stops_an_api_run_in_the_main_thread_as_ctrl_c_does(shop: Path, handler: str) -> None:
    """With Python's default SIGTERM handler the run is recorded and SystemExit(143) ends the process; a
    handler the caller installed (Airflow's task runner has one) is called after the run was recorded."""
    import signal
    import time

    write_project(
        shop,
        {
            "pipelines/slow.sql": """
            INSERT INTO {{ sink('lake', 'slow') }}
            SELECT sum(hash(i)) AS h FROM range(20000000000) t(i), {{ source('files', 'orders') }} LIMIT 1
        """
        },
    )
    code = f"from pipelinez import Project\nProject({str(shop)!r}).run(select=['lake.slow'])\n"
    if handler != "default":
        code = (
            "import signal\n"
            "def stop(signum, frame):\n"
            "    raise SystemExit('the orchestrator stopped the task')\n"
            "signal.signal(signal.SIGTERM, stop)\n" + code
        )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    runs = shop / ".pz" / "runs"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        events = list(runs.glob("*/events.jsonl")) if runs.exists() else []
        if events and '"name": "lake.slow"' in events[0].read_text():
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the slow sink write did not start within 10 minutes")
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    if handler == "default":
        assert proc.returncode == 143, err  # SystemExit(143) after the run was recorded, not a kill
        assert "Traceback" not in err, err
    else:
        assert proc.returncode == 1 and "the orchestrator stopped the task" in err, err
    results = json.loads(next(runs.glob("*/run_results.json")).read_text())
    assert results["status"] == "failed" and results["error"]["code"] == "PZ0514"
    assert "SIGTERM" in results["error"]["message"]
    statuses = {n["name"]: (n["status"], n.get("skipped_because")) for n in results["nodes"]}
    assert statuses["lake.slow"] == ("cancelled", "interrupted (SIGTERM)"), statuses
    dry = Project(shop).retry(dry_run=True)  # recorded as interrupted, not stranded `running` (PZ0503)
    assert dry.selection is not None and "lake.slow" in dry.selection.run
