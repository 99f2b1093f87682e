"""Tier 4 creates a source dataset's staging table only when a bind reads it, once the bind cache knows that
DuckDB makes it from that very statement (issue 22, lane edit3): after one edit only the tables the edited
pipeline reads are created, and the answer is the one of a validate without any cache. A contract DuckDB
refuses is never cached: PZ0302 every time."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelinez.api import Project
from pipelinez.compile.batched_ddl import BatchedDdl
from pipelinez.core.diagnostics import PzError
from pipelinez.engine.run.compile_cache import COMPILES
from tests.conftest import write_project

COLUMNS = "{ id: bigint, amount: 'decimal(12,2)' }"
FILES = {
    "project.yml": "name: lazy\n",
    "sources/files.yml": (
        "connector: localfiles\nconnection: { root: data }\ndatasets:\n"
        + "".join(f"  raw_{x}: {{ format: parquet, path: {x}.parquet, columns: {COLUMNS} }}\n" for x in "abc")
    ),
    "sinks/lake.yml": "connector: localfiles\nconnection: { root: out }\noutputs:\n  c: {}\n",
    "pipelines/a.sql": "SELECT id, amount FROM {{ source('files', 'raw_a') }}\n",
    "pipelines/b.sql": "SELECT id, amount FROM {{ source('files', 'raw_b') }}\n",
    "pipelines/c.sql": (
        "INSERT INTO {{ sink('lake', 'c') }}\nSELECT a.id, a.amount + b.amount AS amount\n"
        "FROM {{ ref('a') }} AS a JOIN {{ ref('b') }} AS b ON b.id = a.id\n"
        "JOIN {{ source('files', 'raw_c') }} AS r ON r.id = a.id\n"
    ),
}


@pytest.fixture
def created(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The tables tier 4's batched statements create, in order."""
    tables: list[str] = []
    execute = BatchedDdl.execute

    def recording(self: BatchedDdl, sql: str, table: str) -> None:
        tables.append(table)
        execute(self, sql, table)

    monkeypatch.setattr(BatchedDdl, "execute", recording)
    yield tables


def _validate(root: Path) -> tuple[int, list[str]]:
    COMPILES.clear()  # each validate as a new process runs it
    try:
        report = Project(root).validate()
    except PzError as exc:
        return -1, sorted(d.code for d in exc.diagnostics)
    return report.nodes, sorted(d.code for d in report.warnings)


def test_an_edit_creates_only_the_source_tables_its_bind_reads(tmp_path: Path, created: list[str]) -> None:
    root = write_project(tmp_path / "p", FILES)
    cold = _validate(root)
    assert {"src_files__raw_a", "src_files__raw_b", "src_files__raw_c"} <= set(created)
    created.clear()
    (root / "pipelines" / "a.sql").write_text(FILES["pipelines/a.sql"].replace("\n", " WHERE id > 0\n"))
    assert _validate(root) == cold
    assert "src_files__raw_a" in created  # a binds again: its source's table is made
    assert "src_files__raw_b" not in created and "src_files__raw_c" not in created
    # the same answer as without any cache
    shutil.rmtree(root / ".pz" / "target")
    assert _validate(root) == cold


def test_a_contract_duckdb_refuses_is_refused_every_time(tmp_path: Path, created: list[str]) -> None:
    files = {
        **FILES,
        "sources/files.yml": FILES["sources/files.yml"].replace("'decimal(12,2)'", "nosuchtype", 1),
    }
    root = write_project(tmp_path / "p", files)
    first = _validate(root)
    assert first[0] == -1 and "PZ0302" in first[1]
    created.clear()
    assert _validate(root) == first
    assert "src_files__raw_a" in created  # tried again, never taken from the cache
