"""PZ0514's words match what an interrupted command left behind: a run that was recorded (its unfinished
nodes cancelled, `pz retry` finishes it) names the run; a command stopped before any run was recorded (pz
validate, pz plan, the start of pz run) says no node ran and does not send the user to `pz retry`."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelinez.cli.common import interrupt_text
from tests.conftest import SMALL, pz, write_project


def test_a_recorded_run_is_named_and_sent_to_retry() -> None:
    message, next_step = interrupt_text("SIGTERM", ["20261202T000000Z-abc"])
    assert message == (
        "run interrupted by SIGTERM: nodes that had not finished are recorded as cancelled "
        "(run 20261202T000000Z-abc)"
    )
    assert "pz retry" in next_step


def test_no_recorded_run_means_no_node_ran_and_no_retry() -> None:
    message, next_step = interrupt_text("SIGINT", [])
    assert message == "interrupted before a run was recorded: no node ran"
    assert "retry" not in next_step


def test_validate_interrupted_says_no_node_ran(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pipelinez.engine.run.validate_cache as validate_cache

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(validate_cache, "replay_project", interrupted)
    project = write_project(tmp_path / "p", SMALL)
    result = pz(project, "validate")
    assert result.exit_code == 1, result.output
    assert "error: PZ0514 interrupted before a run was recorded: no node ran" in result.output
    assert "pz retry" not in result.output and "recorded as cancelled" not in result.output


def test_run_interrupted_after_it_was_recorded_names_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop signal once run_results.json is written: the run is named, and `pz retry` suggested."""
    from pipelinez.engine.run import session

    begin = session.RunSession.begin

    def begin_then_interrupted(self: session.RunSession, *args: object, **kwargs: object) -> None:
        begin(self, *args, **kwargs)  # type: ignore[arg-type]
        raise KeyboardInterrupt

    monkeypatch.setattr(session.RunSession, "begin", begin_then_interrupted)
    project = write_project(tmp_path / "p", SMALL)
    result = pz(project, "run")
    assert result.exit_code == 1, result.output
    run_id = next((project / ".pz" / "runs").iterdir()).name
    assert (
        f"error: PZ0514 run interrupted: nodes that had not finished are recorded as cancelled (run {run_id})"
        in (result.output)
    )
    assert "next: run `pz retry`" in result.output
