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
