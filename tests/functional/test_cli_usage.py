"""Every malformed command line is one PZ0513 diagnostic (JSON under --log-format json, wherever that flag
stands); global flags work after the command; commands that are not built say so with PZ0524."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SMALL, pz, write_project


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["validate", "--bogus"], "pz validate: no such option '--bogus'"),
        (["bogus"], "pz: no such command 'bogus'"),
        (["valdate"], "did you mean 'validate'"),
        (["run", "--threads", "0"], "pz run: invalid value for '--threads': 0 must be 1 or more"),
        (["run", "--threads", "x"], "'x' is not a whole number"),
        (["runs", "--limit"], "pz runs: option '--limit' requires an argument"),
        (["plan", "--log-format", "yaml"], "invalid value for '--log-format'"),
        (["init", "a", "b"], "pz init: got unexpected extra argument (b)"),
    ],
)
def test_usage_errors_are_pz0513_with_the_command_line_as_place(
    project_dir: Path, args: list[str], says: str
) -> None:
    write_project(project_dir, SMALL)
    result = pz(project_dir, *args)
    assert result.exit_code == 2
    assert result.lines[0].startswith("error: PZ0513 command line: "), result.output
    assert says.lower() in result.lines[0].lower()
    assert result.lines[1].startswith("  next: see `pz")
    assert "Usage:" not in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("where", ["before", "after"])
def test_usage_errors_are_json_under_log_format_json_before_or_after_the_command(
    project_dir: Path, where: str
) -> None:
    write_project(project_dir, SMALL)
    args = ["run", "--threads", "0"]
    args = ["--log-format", "json", *args] if where == "before" else [*args, "--log-format=json"]
    result = pz(project_dir, *args)
    assert result.exit_code == 2
    events = [json.loads(line) for line in result.lines]
    assert [(e["event"], e["code"], e["place"]) for e in events] == [
        ("error", "PZ0513", {"file": "command line"})
    ]


def test_global_flags_are_accepted_after_the_command(project_dir: Path) -> None:
    write_project(project_dir, SMALL)
    assert pz(project_dir, "validate").lines == ["ok: project is valid (3 nodes)"]
    quiet = pz(project_dir, "validate", "--quiet", "--no-color")
    assert (quiet.exit_code, quiet.output) == (0, "")
    as_json = pz(project_dir, "run", "--log-format", "json")
    assert as_json.exit_code == 0
    events = [json.loads(line)["event"] for line in as_json.lines]
    assert "run_started" in events and "run_completed" in events


def test_commands_not_built_say_so_with_a_code(project_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pipelinez.cli import usage

    # every command of the reference is built now; the stopgap stays for the next one
    monkeypatch.setitem(usage.NOT_BUILT, "upcoming", "pz upcoming is not available in this version of pz")
    write_project(project_dir, SMALL)
    result = pz(project_dir, "upcoming", "--dry-run")
    assert result.exit_code == 2
    assert result.lines[0].startswith("error: PZ0524 command line: "), result.output
    assert "pz upcoming" in result.lines[0] and "not available in this version" in result.lines[0]
    as_json = pz(project_dir, "--log-format", "json", "upcoming")
    assert json.loads(as_json.lines[0])["code"] == "PZ0524"
    assert usage.NOT_BUILT.keys() == {"upcoming"}


def test_help_and_version_still_exit_zero(project_dir: Path) -> None:
    write_project(project_dir, SMALL)
    assert pz(project_dir, "run", "--help").exit_code == 0
    assert pz(project_dir, "--version").exit_code == 0
    bare = subprocess.run([sys.executable, "-m", "pipelinez.cli.main"], capture_output=True, text=True)
    assert bare.returncode == 0 and bare.stdout.startswith("Usage: pz [OPTIONS] COMMAND")
    no_command = pz(project_dir)  # `pz -p DIR` and nothing else
    assert no_command.exit_code == 2
    assert no_command.lines[0] == "error: PZ0513 command line: pz: missing command"
