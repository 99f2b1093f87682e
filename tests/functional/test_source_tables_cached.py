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


BARE_TEST = (
    "SELECT a.id FROM {{ source('files', 'raw_a') }} AS a\n"
    "JOIN src_files__raw_b AS b ON b.amount = a.amount WHERE a.id < 0\n"
)


def test_a_singular_test_naming_a_source_table_bare_binds_after_an_edit(tmp_path: Path) -> None:
    """A singular test that reads a source's staging table by its name (not through source()): the table is
    made for it when only the test was edited (the source's table is otherwise left out once cached)."""
    root = write_project(tmp_path / "p", {**FILES, "tests/t.sql": BARE_TEST})
    cold = _validate(root)
    assert cold[0] > 0, cold
    (root / "tests" / "t.sql").write_text(BARE_TEST.replace("a.id < 0", "a.id < 1"))
    assert _validate(root) == cold


def test_a_check_naming_a_table_bare_is_never_answered_from_the_cache(tmp_path: Path) -> None:
    """The bind cache's key holds a check's inputs' columns only: a check that names another table bare is
    bound every time, so renaming that table's column is found as without a cache (it was once answered
    from the cache: project is valid)."""
    root = write_project(tmp_path / "p", {**FILES, "tests/t.sql": BARE_TEST})
    assert _validate(root)[0] > 0
    renamed = FILES["sources/files.yml"].replace(
        "raw_b: { format: parquet, path: b.parquet, columns: { id: bigint, amount:",
        "raw_b: { format: parquet, path: b.parquet, columns: { id: bigint, amt:",
    )
    assert renamed != FILES["sources/files.yml"]
    (root / "sources" / "files.yml").write_text(renamed)
    (root / "pipelines" / "b.sql").write_text(
        "SELECT id, amt AS amount FROM {{ source('files', 'raw_b') }}\n"
    )
    warm = _validate(root)
    shutil.rmtree(root / ".pz" / "target")
    assert warm == _validate(root)
    assert warm[0] == -1 and "PZ0405" in warm[1], warm
