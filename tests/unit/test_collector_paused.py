"""The cyclic garbage collector is off while a validate loads and compiles the project
(`prepare.collector_paused`: at 2,000 pipelines its passes over the compile's live objects were about a third
of a re-validation's CPU), and on again after it, whatever way the compile ends."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipelinez.engine.run import prepare
from pipelinez.engine.run.prepare import collector_paused
from tests.conftest import SMALL, write_project


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_a_validate_compiles_with_the_collector_off_and_turns_it_back_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, collector_on: None
) -> None:
    seen: list[bool] = []
    original = prepare.compile_project

    def compiled(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return original(*args, **kwargs)

    monkeypatch.setattr(prepare, "compile_project", compiled)
    checked = prepare.validate(write_project(tmp_path / "shop", SMALL))
    assert not checked.errors and seen == [False]
    assert gc.isenabled()


def test_the_collector_comes_back_after_an_exception_and_stays_off_if_it_was(collector_on: None) -> None:
    with pytest.raises(RuntimeError), collector_paused():
        assert not gc.isenabled()
        raise RuntimeError("compile failed")
    assert gc.isenabled()
    gc.disable()
    with collector_paused(), collector_paused():
        pass
    assert not gc.isenabled()  # the caller had it off: left off


def test_the_pz_validate_command_leaves_it_off_in_a_pz_process_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, collector_on: None
) -> None:
    """`pz validate` in a `pz` process (its command ends it) never turns the collector back on: the one pass
    over the compile's objects would only delay the exit. In any other caller (a CliRunner here) it is on
    again after the command."""
    from pipelinez.cli import interrupts
    from tests.conftest import pz

    project = write_project(tmp_path / "p", SMALL)
    assert pz(project, "validate").exit_code == 0
    assert gc.isenabled()
    monkeypatch.setattr(interrupts, "in_pz_process", lambda: True)
    (project / ".pz" / "target" / "validate.json").unlink(missing_ok=True)
    assert pz(project, "validate").exit_code == 0
    assert not gc.isenabled()
