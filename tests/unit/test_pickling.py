"""Errors and results cross a process boundary (a process pool, a Ray task) unchanged."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from pipelinez.connectors.postgres.sink import AppendFailed
from pipelinez.core.diagnostics import (
    ConnectorHostError,
    PzConfigError,
    PzConnectorError,
    PzError,
    PzValidationError,
    error,
    warning,
)
from pipelinez.core.vocabulary import NodeKind, NodeStatus, RunStatus
from pipelinez.engine.nodes.landing import NodeOutput
from pipelinez.engine.run.backend import AttemptResult
from pipelinez.engine.run.failures import NodeFailure
from pipelinez.engine.run.session import RunOutcome
from pipelinez.engine.state.lock import ProjectLocked
from pipelinez.engine.state.run_results import NodeResult, RunArgs, RunResults


def _round_trip(value: Any) -> Any:
    return pickle.loads(pickle.dumps(value))


DIAGS = [
    error("PZ0201", "sink() names undeclared sink 'wh'", file="p.sql", line=2, col=13),
    warning("PZ0223", "x"),
]


@pytest.mark.parametrize(
    "cls", [PzError, PzConfigError, PzValidationError, ConnectorHostError, ProjectLocked]
)
def test_pz_errors_keep_every_diagnostic(cls: type[PzError]) -> None:
    back = _round_trip(cls(DIAGS))
    assert type(back) is cls
    assert back.diagnostics == tuple(DIAGS) and str(back) == str(cls(DIAGS)) and back.exit_code == 2


def test_node_failure_keeps_its_fields_and_stays_raisable() -> None:
    failure = NodeFailure(
        "PZ0501", "sink 'w': reset", transient=True, retry_after=2.5, batches_committed=3, rows=7
    )
    back = _round_trip(failure)
    assert back == failure and back.to_dict() == failure.to_dict()
    with pytest.raises(NodeFailure):
        raise back


def test_connector_errors_keep_transience_retry_after_and_subclass_fields() -> None:
    plain = _round_trip(PzConnectorError("timeout", is_transient=True, retry_after=4.0, code="PZ0505"))
    assert (plain.message, plain.is_transient, plain.retry_after, plain.code) == (
        "timeout",
        True,
        4.0,
        "PZ0505",
    )
    append = _round_trip(
        AppendFailed("reset", batches_committed=2, rows_committed=10, is_transient=True, retry_after=None)
    )
    assert type(append) is AppendFailed
    assert (append.batches_committed, append.rows_committed, append.is_transient, append.code) == (
        2,
        10,
        True,
        "PZ0501",
    )


def test_attempt_results_and_run_results_survive_a_round_trip() -> None:
    ok = AttemptResult(
        "orders", 1, output=NodeOutput(rows=5, tier="native", partitions=[{"index": 0, "rows": 5}])
    )
    failed = AttemptResult("w.orders", 2, failure=NodeFailure("PZ0501", "boom", transient=True))
    assert _round_trip(ok) == ok and _round_trip(failed) == failed
    results = RunResults("r1", "run", "2026-01-01T00:00:00.000Z", ["--all"], RunArgs(threads=2))
    results.nodes = [NodeResult("abc", "orders", NodeKind.PIPELINE, status=NodeStatus.SUCCESS, rows=5)]
    outcome = RunOutcome("r1", RunStatus.SUCCESS, results)
    back = _round_trip(outcome)
    assert back == outcome and back.results.to_dict() == results.to_dict()
