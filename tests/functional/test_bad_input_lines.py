"""Bad input that used to slip through without a code, or to break the one-line-per-message rule: names
holding control characters, odd file-system entries in the project, `.pz/runs` as a file, internal errors
under --log-format json, crash logs that overwrote what was there."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.conftest import pz, pz_subprocess, write_project

BASE = {
    "project.yml": """
        name: shop
    """,
    "sinks/wh.yml": """
        connector: duckdb
        connection: { path: out/wh.duckdb }
    """,
    "pipelines/t.sql": """
        INSERT INTO {{ sink('wh', 't') }}
        SELECT 1 AS a
    """,
}

# every line `pz validate` prints: a diagnostic, its next step, or the summary
LINE = re.compile(r"^(error|warning): PZ\d{4} |^  next: |^\d+ errors?(, \d+ warnings?)?$|^$")


def _one_line_each(output: str) -> None:
    for line in output.split("\n"):
        assert LINE.match(line), f"stray line {line!r} in:\n{output}"


def test_names_with_control_characters_are_escaped_in_every_message(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/t.sql": "INSERT INTO {{ sink('wh', 't') }}\n"
            "SELECT '{{ env('A\\nB') }}' AS a, {{ var('x\\ty') }} AS b, '{{ env('C\\u2028D') }}' AS c\n",
            "sources/files.yml": 'connector: localfiles\nconnection: { root: data }\ndatasets:\n  "a\\nb":\n'
            "    format: csv\n    path: x.csv\n    nope: 1\n",
        },
    )
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    _one_line_each(result.output)
    assert "env('A\\nB') is not declared" in result.output
    assert "var('x\\ty') is not declared" in result.output
    assert "env('C\\u2028D')" in result.output
    as_json = pz(project_dir, "--log-format", "json", "validate")
    messages = [json.loads(line)["message"] for line in as_json.lines]
    assert any("env('A\\nB')" in m for m in messages), messages


def test_pipelines_sources_or_sinks_as_a_file_is_pz0114(project_dir: Path) -> None:
    files = {k: v for k, v in BASE.items() if not k.startswith("pipelines/")}
    write_project(project_dir, {**files, "pipelines": "SELECT 1\n"})
    result = pz(project_dir, "validate")
    assert result.exit_code == 2, result.output
    assert "error: PZ0114 pipelines: 'pipelines' is a file, but it must be a folder" in result.output
    assert pz(project_dir, "run").exit_code == 2
    write_project(project_dir / "other", {**BASE, "sources": "x\n"})
    result = pz(project_dir / "other", "validate")
    assert result.exit_code == 2 and "error: PZ0114 sources: 'sources' is a file" in result.output


def test_a_named_pipe_as_a_project_file_is_pz0114_and_never_blocks(project_dir: Path) -> None:
    write_project(project_dir, BASE)
    os.mkfifo(project_dir / "pipelines" / "x.sql")
    os.mkfifo(project_dir / "sinks" / "fifo.yml")
    (project_dir / "sources").mkdir()
    (project_dir / "sources" / "folder.yml").mkdir()
    result = pz_subprocess(project_dir, "validate", timeout=120)
    assert result.exit_code == 2, result.output
    assert "error: PZ0114 pipelines/x.sql: 'x.sql' is a named pipe, not a regular file" in result.output
    assert "error: PZ0114 sinks/fifo.yml: 'fifo.yml' is a named pipe" in result.output
    assert "error: PZ0114 sources/folder.yml: 'folder.yml' is a folder" in result.output


def test_a_pipeline_file_that_links_to_a_folder_is_pz0114_not_walked(
    project_dir: Path, tmp_path: Path
) -> None:
    """Found by the 10,000-case fuzz run: pipelines/x.sql -> /tmp made validation walk all of /tmp."""
    write_project(project_dir, BASE)
    big = tmp_path / "big"
    for i in range(50):
        (big / f"d{i}").mkdir(parents=True)
        (big / f"d{i}" / "p.sql").write_text("SELECT 1\n")
    (project_dir / "pipelines" / "x.sql").symlink_to(big)
    result = pz(project_dir, "validate")
    assert result.exit_code == 2, result.output
    assert "error: PZ0114 pipelines/x.sql: 'x.sql' is a folder, not a regular file" in result.output
    assert "d0" not in result.output


def test_runs_folder_that_is_a_file_is_pz0521_not_no_runs_yet(project_dir: Path) -> None:
    write_project(project_dir, {**BASE, ".pz/runs": "not a folder\n"})
    result = pz(project_dir, "runs")
    assert result.exit_code == 2, result.output
    assert "no runs yet" not in result.output
    assert (
        "error: PZ0521 .pz/runs: pz keeps its state in a folder .pz/runs, but a file of that name is in "
        "the way" in result.output
    )
    run = pz(project_dir, "run")
    assert run.exit_code == 2 and "PZ0521" in run.output and "PZ0512" not in run.output


def _bug(*_args: object, **_kwargs: object) -> None:
    raise RuntimeError("a pz bug")


def test_internal_error_is_a_json_event_under_log_format_json(
    project_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_project(project_dir, BASE)
    monkeypatch.setattr("pipelinez.engine.run.prepare.validate", _bug)
    result = pz(project_dir, "--log-format", "json", "validate")
    assert result.exit_code == 2
    events = [json.loads(line) for line in result.lines]
    assert [(e["event"], e["code"]) for e in events] == [("error", "PZ0512")]
    assert "please report it with" in events[0]["message"]
    assert "Traceback" not in result.output


def test_crash_log_is_appended_never_overwritten(project_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_project(project_dir, {**BASE, ".pz/pz-crash.log": "earlier text\n"})
    monkeypatch.setattr("pipelinez.engine.run.prepare.validate", _bug)
    for _ in range(2):
        result = pz(project_dir, "validate")
        assert result.output.startswith("error: PZ0512 pz hit an internal error; please report it with")
    log = (project_dir / ".pz" / "pz-crash.log").read_text()
    assert log.startswith("earlier text\n")
    assert log.count("RuntimeError: a pz bug") == 2


def test_orchestrator_failure_appends_to_the_runs_debug_log(tmp_path: Path) -> None:
    from pipelinez.engine.run.session import _write_log

    log = tmp_path / "pz.log"
    log.write_text("2026-11-30 node x: full message:\nduckdb said\n")
    assert _write_log(log, "Traceback (most recent call last): boom") == log
    text = log.read_text()
    assert text.startswith("2026-11-30 node x: full message:\nduckdb said\n") and text.endswith("boom\n")


def test_mysql_source_on_a_port_that_never_speaks_mysql_fails_transient_not_hangs(
    project_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    monkeypatch.setattr("pipelinez.connectors.mysql.settings.CONNECT_SECONDS", 1)
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        write_project(
            project_dir,
            {
                **BASE,
                "sources/my.yml": f"""
                    connector: mysql
                    connection: {{ host: 127.0.0.1, port: {port}, user: root, password: "", database: x }}
                    retry: {{ max_attempts: 1 }}
                    datasets:
                      items: {{ table: items, columns: {{ id: bigint }} }}
                """,
                "pipelines/t.sql": "INSERT INTO {{ sink('wh', 't') }}\n"
                "SELECT * FROM {{ source('my', 'items') }}\n",
            },
        )
        result = pz(project_dir, "--log-format", "json", "run")
    assert result.exit_code == 1, result.output
    done = next(
        e for e in map(json.loads, result.lines) if e["event"] == "node_completed" and e["status"] == "failed"
    )
    assert done["error"]["code"] == "PZ0505" and done["error"]["transient"] is True, done
    assert "timed out" in done["error"]["message"], done
