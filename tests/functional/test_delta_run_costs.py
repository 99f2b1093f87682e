"""A delta run's fixed costs, counted (issue 22): how often an incremental run into a DuckDB file opens a
DuckDB instance of its own (each one 25-70 ms, whatever the rows), that the watermark is committed once, and
that a `pz` process leaving at once (`cli.entry`, `os._exit`) has lost no write."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from pipelinez.core import duck_connect, run_state
from pipelinez.core.memory_budget import BUDGET
from tests.conftest import pz, write_project


def _project(
    root: Path, strategy: str = "{ strategy: append, duplicates: accept }", sync: bool = True
) -> Path:
    project = write_project(
        root,
        {
            "project.yml": "name: delta\n",
            "sources/src.yml": """
                connector: localfiles
                connection: { root: data }
                datasets:
                  items:
                    format: csv
                    path: '*.csv'
                    columns: { id: bigint, c: bigint, v: varchar }
            """
            + ("        sync: { mode: incremental, cursor: c }\n" if sync else ""),
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: wh.duckdb }\n"
            f"outputs:\n  items: {strategy}\n",
            "pipelines/items.sql": "INSERT INTO {{ sink('wh', 'items') }}\n"
            "SELECT * FROM {{ source('src', 'items') }}\n",
        },
    )
    _add(project, range(1, 11))
    return project


def _add(project: Path, ids: range) -> None:
    folder = project / "data"
    folder.mkdir(exist_ok=True)
    name = f"part_{len(list(folder.iterdir())):03d}.csv"
    (folder / name).write_text("id,c,v\n" + "".join(f"{i},{i},v{i}\n" for i in ids), encoding="utf-8")


def _opens(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every DuckDB instance pz opens from now on, by the file's name (':memory:' for in-memory ones)."""
    opened: Counter[str] = Counter()
    real = duck_connect.connect

    def counting(database: str = ":memory:", **kwargs: object) -> duckdb.DuckDBPyConnection:
        opened[Path(database).name if database != ":memory:" else database] += 1
        return real(database, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(duck_connect, "connect", counting)
    return opened


def _sink_ids(project: Path) -> list[int]:
    with contextlib.closing(duckdb.connect(str(project / "wh.duckdb"), read_only=True)) as con:
        return [int(r[0]) for r in con.execute("SELECT id FROM items ORDER BY id").fetchall()]


def _watermark(project: Path) -> str:
    with contextlib.closing(duckdb.connect(str(project / ".pz" / "state.duckdb"), read_only=True)) as con:
        row = con.execute("SELECT value FROM watermarks").fetchone()
    assert row is not None
    return str(row[0])


def test_a_delta_append_opens_no_instance_of_the_sink_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The target's columns are read with the file attached to the helper instance (which the watermark
    read opened already); the write attaches the file to staging. The earlier runs' work tables are listed
    only for a replace, which sweeps them."""
    project = _project(tmp_path / "p")
    assert pz(project, "run").exit_code == 0
    _add(project, range(11, 14))
    opened = _opens(monkeypatch)
    shares: list[int] = []
    real_join = BUDGET.join

    def joining(con: duckdb.DuckDBPyConnection) -> None:
        shares.append(1)
        real_join(con)

    monkeypatch.setattr(BUDGET, "join", joining)
    result = pz(project, "run")
    assert result.exit_code == 0, result.output
    assert _sink_ids(project) == list(range(1, 14))
    assert opened["wh.duckdb"] == 0, opened
    # the state file is ATTACHed to the helper instance to read and to commit the watermark: no instance
    assert opened["state.duckdb"] == 0, opened
    # only staging takes a share of the memory budget: the file's catalog lookup moves no rows
    assert len(shares) == 1, shares


def test_a_replace_lists_the_leftover_work_tables_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _project(tmp_path / "p", "{ strategy: replace }", sync=False)
    assert pz(project, "run").exit_code == 0
    opened = _opens(monkeypatch)
    assert pz(project, "run").exit_code == 0
    assert _sink_ids(project) == list(range(1, 11))
    assert opened["wh.duckdb"] == 0, opened  # the sweep's listing attaches it to the helper instance


def test_the_watermark_is_committed_once_per_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = _project(tmp_path / "p")
    assert pz(project, "run").exit_code == 0
    _add(project, range(11, 13))
    commits: list[int] = []
    real = run_state.RunState.commit_watermarks

    def counting(self: run_state.RunState, marks: object) -> None:
        commits.append(1)
        real(self, marks)  # type: ignore[arg-type]

    monkeypatch.setattr(run_state.RunState, "commit_watermarks", counting)
    assert pz(project, "run").exit_code == 0
    assert len(commits) == 1
    assert _watermark(project) == "12"


def test_a_pz_process_that_leaves_at_once_has_lost_no_write(tmp_path: Path) -> None:
    """The console script ends with os._exit (no interpreter shutdown, no DuckDB destructor): the sink file
    and the state file are closed before, with nothing left in a write-ahead log."""
    project = _project(tmp_path / "p")
    entry = "from pipelinez.cli.entry import main; main()"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for ids in (None, range(11, 16)):
        if ids is not None:
            _add(project, ids)
        done = subprocess.run(
            [sys.executable, "-c", entry, "-p", str(project), "run"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    assert not (project / "wh.duckdb.wal").exists()
    assert not (project / ".pz" / "state.duckdb.wal").exists()
    assert _sink_ids(project) == list(range(1, 16))
    assert _watermark(project) == "15"


def test_the_sink_lookup_builds_none_of_duckdbs_builtin_views(tmp_path: Path) -> None:
    """An append's target columns come from `duckdb_tables()` and a DESCRIBE of the table, not from
    `duckdb_columns()`: its first call in a process builds every built-in view of the catalog
    (information_schema, pg_catalog: 15-25 ms of a delta run). The answer is the same: a NOT NULL column
    without a default is required, a collated one folds, a quoted name keeps its spelling."""
    from pipelinez.core.duck_types import helper

    project = _project(tmp_path / "p")
    assert pz(project, "run").exit_code == 0
    with contextlib.closing(duckdb.connect(str(project / "wh.duckdb"))) as con:
        con.execute('ALTER TABLE items ADD COLUMN "Odd ""name""" VARCHAR COLLATE nocase')
        con.execute("ALTER TABLE items ADD COLUMN made VARCHAR DEFAULT 'x'")
    _add(project, range(11, 13))
    log = helper().cursor()
    log.execute("CALL enable_logging('QueryLog')")
    try:
        log.execute("CALL truncate_duckdb_logs()")
        result = pz(project, "run")
        queries = [str(r[0]) for r in log.execute("SELECT message FROM duckdb_logs").fetchall()]
    finally:
        log.execute("CALL disable_logging()")
        log.execute("CALL truncate_duckdb_logs()")
        log.close()
    assert result.exit_code == 0, result.output
    assert any("duckdb_tables()" in q for q in queries), queries  # the lookup ran on the helper instance
    assert not [q for q in queries if "duckdb_columns" in q], queries
    with contextlib.closing(duckdb.connect(str(project / "wh.duckdb"), read_only=True)) as con:
        rows = con.execute('SELECT id, "Odd ""name""", made FROM items WHERE id > 10 ORDER BY id').fetchall()
    assert rows == [(11, None, "x"), (12, None, "x")]


def test_the_sink_lookup_reads_required_columns_and_collations(tmp_path: Path) -> None:
    """The target's columns as DESCRIBE tells them, with quoted names, a schema of their own, a NOT NULL
    column with and without a default, a collated column and a parameterized type."""
    from pipelinez.connectors.duckdb.connector import DuckDBConnector
    from pipelinez.connectors.sdk import ConnectorContext, OutputRequest, TargetColumn

    with contextlib.closing(duckdb.connect(str(tmp_path / "t.duckdb"))) as con:
        con.execute('CREATE SCHEMA "S.""q"')
        con.execute(
            'CREATE TABLE "S.""q"."T.""b" (a INTEGER NOT NULL, b VARCHAR NOT NULL DEFAULT \'x\', '
            '"C ""d" VARCHAR COLLATE nocase.noaccent, e DECIMAL(12,2))'
        )
    sink = DuckDBConnector(ConnectorContext("wh", tmp_path, {"path": "t.duckdb"}))
    output = OutputRequest("o", {"table": '"s.""Q"."t.""B"'}, "append")
    assert sink.target_columns(output) == [
        TargetColumn("a", "INTEGER", "INTEGER", required=True),
        TargetColumn("b", "VARCHAR", "VARCHAR"),
        TargetColumn('C "d', "VARCHAR", "VARCHAR", folds=("case", "accents")),
        TargetColumn("e", "DECIMAL(12,2)", "DECIMAL(12,2)"),
    ]
    missing = OutputRequest("o", {"table": '"S.""q".other'}, "append")
    assert sink.target_columns(missing) is None


def test_a_delta_whose_streamed_append_failed_commits_no_watermark_and_retry_appends_it_once(
    tmp_path: Path,
) -> None:
    """The delta's pipeline is streamed into the append (plan/streaming.py, `atomic_append`): a write that
    fails leaves the target and the committed watermark as they were; `pz retry` reuses the staged delta,
    appends it once and commits the watermark after the write."""
    project = _project(tmp_path / "p")
    assert pz(project, "run").exit_code == 0
    _add(project, range(11, 14))
    failed = pz(project, "run", env={"PZ_FAILPOINTS": "sink.write@wh.items"})
    assert failed.exit_code == 1, failed.output
    assert failed.node("items")["message"] == "streamed into wh.items, not stored in staging"
    assert _sink_ids(project) == list(range(1, 11))
    assert _watermark(project) == "10"
    _add(project, range(14, 16))  # new rows after the failed run: a retry that read again would see them
    retried = pz(project, "retry")
    assert retried.exit_code == 0, retried.output
    assert _sink_ids(project) == list(range(1, 14))  # the staged delta only: nothing extracted again
    assert _watermark(project) == "13"
    assert pz(project, "run").exit_code == 0  # the next run takes what came since, once
    assert _sink_ids(project) == list(range(1, 16))
    assert _watermark(project) == "15"
