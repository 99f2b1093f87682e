"""`.pz/state.duckdb` that pz cannot use: broken (PZ0527), held by another process (PZ0528), or holding a
watermark that no longer fits its dataset (PZ0235). Each is a coded error naming the file and a next step on
validate, plan and run, never an internal error; a project without incremental datasets is not concerned.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pytest

from tests.conftest import pz, write_project
from tests.functional.test_incremental import CURSORS, backend, make_project, run_ok, sink_ids, state

Breaker = Callable[[Path], None]


def _garbage(path: Path) -> None:
    path.write_bytes(b"not a database " * 500)


def _folder(path: Path) -> None:
    path.unlink()
    (path / "inside").mkdir(parents=True)


def _wal_folder(path: Path) -> None:
    (path.parent / "state.duckdb.wal").mkdir()


def _no_table(path: Path) -> None:
    path.unlink()
    with contextlib.closing(duckdb.connect(str(path))) as con:
        con.execute("CREATE TABLE other (x INTEGER)")


BROKEN: dict[str, tuple[Breaker, str, str]] = {
    "not a database": (_garbage, "cannot be opened (", "move .pz/state.duckdb aside"),
    "a folder": (_folder, "is a folder, not pz's state file", "remove the folder .pz/state.duckdb"),
    "its WAL a folder": (
        _wal_folder,
        "its write-ahead log .pz/state.duckdb.wal is a folder",
        "remove the folder .pz/state.duckdb.wal",
    ),
    "no watermarks table": (_no_table, "without pz's watermarks table", "move .pz/state.duckdb aside"),
}


def _incremental_project(tmp_path: Path, strategy: str = "merge") -> tuple[Path, Path]:
    """A duckdb source table `items` (int cursor c) read incrementally, after one committed run."""
    ct = CURSORS["int"]
    with backend("duckdb_native", tmp_path) as src:
        src.create(ct, range(1, 4))
        project = make_project(
            tmp_path / "proj", src.source_yaml(ct, "{ mode: incremental, cursor: c }"), strategy
        )
    run_ok(project)
    return project, project / ".pz" / "state.duckdb"


def _coded(output: str, code: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith(f"error: {code} ")]


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_state_file_is_pz0527_on_validate_plan_and_run(tmp_path: Path, case: str) -> None:
    project, path = _incremental_project(tmp_path)
    breaker, cause, step = BROKEN[case]
    breaker(path)
    for command in ("validate", "plan", "run"):
        result = pz(project, command)
        assert result.exit_code == 2, (command, result.output)
        assert "PZ0512" not in result.output and "Traceback" not in result.output
        lines = _coded(result.output, "PZ0527")
        assert len(lines) == 1, (command, result.output)
        assert lines[0].startswith("error: PZ0527 .pz/state.duckdb: the state file .pz/state.duckdb ")
        assert cause in lines[0], lines[0]
        assert step in result.output
    assert sink_ids(project) == [1, 2, 3]  # nothing ran


@contextlib.contextmanager
def _held_open(path: Path) -> Iterator[int]:
    """Another process holding the state file's lock, as a DuckDB shell does."""
    code = (
        "import duckdb, sys, time\n"
        f"con = duckdb.connect({str(path)!r})\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"held"
        yield proc.pid
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


def test_a_state_file_held_by_another_process_is_pz0528(tmp_path: Path) -> None:
    project, path = _incremental_project(tmp_path)
    with _held_open(path) as pid:
        for command in ("validate", "plan", "run"):
            result = pz(project, command)
            assert result.exit_code == 2, (command, result.output)
            assert "PZ0512" not in result.output
            lines = _coded(result.output, "PZ0528")
            assert len(lines) == 1, (command, result.output)
            assert f"is held open by another process (PID {pid}" in lines[0]
            assert "close the program that has the file open" in result.output
    run_ok(project)  # released: runs again


def test_a_project_without_incremental_datasets_ignores_the_state_file(tmp_path: Path) -> None:
    project = write_project(
        tmp_path / "proj",
        {
            "project.yml": "name: plain\n",
            "sources/src.yml": "connector: localfiles\nconnection: { root: data }\ndatasets:\n"
            "  items: { format: csv, path: items.csv, columns: { id: int } }\n",
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: wh.duckdb }\n",
            "pipelines/items.sql": "INSERT INTO {{ sink('wh', 'items') }}\n"
            "SELECT * FROM {{ source('src', 'items') }}\n",
            "data/items.csv": "id\n1\n",
        },
    )
    (project / ".pz").mkdir()
    _garbage(project / ".pz" / "state.duckdb")
    run_ok(project)


def _store(path: Path, column: str, value: str) -> None:
    with contextlib.closing(duckdb.connect(str(path))) as con:
        con.execute("UPDATE watermarks SET column_name = ?, value = ?", [column, value])


@pytest.mark.parametrize(
    ("column", "value", "cause"),
    [
        ("other", "3", "was committed for cursor column 'other', and the dataset's cursor is now 'c'"),
        ("c", "three", "'three' is not an integer value"),
        ("c", "infinity", "'infinity' is not a finite integer value"),
    ],
)
def test_a_stored_watermark_that_no_longer_fits_is_pz0235(
    tmp_path: Path, column: str, value: str, cause: str
) -> None:
    project, path = _incremental_project(tmp_path)
    _store(path, column, value)
    for command in ("validate", "plan", "run"):
        result = pz(project, command)
        assert result.exit_code == 2, (command, result.output)
        lines = _coded(result.output, "PZ0235")
        assert len(lines) == 1, (command, result.output)
        assert lines[0].startswith(
            "error: PZ0235 .pz/state.duckdb: source 'src' dataset 'items': the watermark stored in "
            ".pz/state.duckdb"
        ), lines[0]
        assert cause in lines[0], lines[0]
        assert "pz run --full-refresh" in result.output
    run_ok(project, "--full-refresh")  # the way out: reads from the start and stores a fitting watermark
    assert state(project)[("src", "items")] == "30"
    run_ok(project)


def test_a_state_file_that_refuses_the_commit_is_pz0525_and_no_watermark_is_reported_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state file readable at the start but refusing the end-of-run commit (another process took its
    lock meanwhile, or it broke): nothing is committed, the run says so (PZ0525), no `watermark` line
    claims otherwise, and the next run reads the same delta again. Before, a StateFileError here fell
    through and the run reported the watermarks as committed."""
    from pipelinez.core.diagnostics import error
    from pipelinez.core.run_state import RunState, StateFileError

    project, _ = _incremental_project(tmp_path)
    before = state(project)
    with backend("duckdb_native", tmp_path) as src:
        src.insert(CURSORS["int"], [(4, 4), (5, 5)])

    def refuse(self: RunState, marks: object) -> None:
        raise StateFileError(
            [error("PZ0528", "the state file .pz/state.duckdb is held open by another process")]
        )

    monkeypatch.setattr(RunState, "commit_watermarks", refuse)
    result = pz(project, "run")
    assert "PZ0525" in result.output, result.output
    assert not any(line.startswith("watermark ") for line in result.lines), result.output
    node = next(n for n in result.run_results()["nodes"] if n["name"] == "src_src__items")
    assert node["watermark"]["committed"] is False, node["watermark"]
    monkeypatch.undo()
    assert state(project) == before
    run_ok(project)  # the same delta again: merged, so no duplicates
    assert sink_ids(project) == [1, 2, 3, 4, 5]
