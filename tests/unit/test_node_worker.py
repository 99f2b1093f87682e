"""A node runs from its work item alone: each planned node is pickled, sent to another process, and run there
against the staging database file with nothing else of the run (no project, no DAG, no plan)."""

from __future__ import annotations

import multiprocessing
import pickle
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from pipelinez.compile.compiler import compile_project
from pipelinez.config.loader import load_project
from pipelinez.core.vocabulary import NodeStatus, Tier
from pipelinez.engine.nodes.node_runners import RUNNERS, NodeOutput
from pipelinez.plan.planner import build_plan
from tests.conftest import write_project

FILES = {
    "project.yml": "name: shop\n",
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          orders: { format: csv, path: orders.csv, columns: { id: bigint, amount: "decimal(10,2)" } }
    """,
    "sinks/wh.yml": """
        connector: duckdb
        connection: { path: out/wh.duckdb }
        outputs:
          big: { table: main.big }
    """,
    "data/orders.csv": "id,amount\n1,10.50\n2,99.00\n3,120.25\n",
    "pipelines/big.sql": """
        INSERT INTO {{ sink('wh', 'big') }}
        SELECT id, amount FROM {{ source('files', 'orders') }} WHERE amount > 50
    """,
    "pipelines/big.yml": """
        checks:
          - not_null: { columns: [id] }
          - row_count: { max: 1 }
            severity: warn
    """,
}


@dataclass
class _WorkerContext:
    """What a remote worker has: the run id and its staging database."""

    run_id: str
    staging: duckdb.DuckDBPyConnection

    def cursor(self) -> duckdb.DuckDBPyConnection:
        return self.staging.cursor()

    def release(self, cur: duckdb.DuckDBPyConnection) -> None:
        cur.close()

    def note(self, message: str) -> None:
        return None

    @property
    def interrupted(self) -> bool:
        return False


def _run_in_worker(payload: bytes, staging: str) -> NodeOutput:
    planned = pickle.loads(payload)
    con = duckdb.connect(staging)
    try:
        output: NodeOutput = RUNNERS[planned.node.kind](_WorkerContext("run-1", con), planned, 1)
        return output
    finally:
        con.close()


def test_every_node_runs_in_another_process_from_its_pickled_work_item(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", FILES)
    project, diags = load_project(root)
    assert project is not None, diags
    compiled = compile_project(project, {}, {})
    assert compiled.ok and compiled.dag is not None, compiled.errors
    plan, problems = build_plan(compiled.dag)
    assert not problems
    staging = str(tmp_path / "staging.duckdb")
    outputs: dict[str, Any] = {}
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        for planned in plan.nodes:
            outputs[planned.node.name] = pool.submit(_run_in_worker, pickle.dumps(planned), staging).result()
    assert {name: (o.rows, o.status) for name, o in outputs.items()} == {
        "src_files__orders": (3, NodeStatus.SUCCESS),
        "big": (2, NodeStatus.SUCCESS),
        "chk_big__not_null_id": (0, NodeStatus.SUCCESS),
        "chk_big__row_count": (0, NodeStatus.WARN),  # a row_count check reports no offending rows
        "wh.big": (2, NodeStatus.SUCCESS),
    }
    assert outputs["wh.big"].tier is Tier.NATIVE
    con = duckdb.connect(str(root / "out" / "wh.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT id, amount::VARCHAR FROM main.big ORDER BY id").fetchall() == [
            (2, "99.00"),
            (3, "120.25"),
        ]
    finally:
        con.close()
