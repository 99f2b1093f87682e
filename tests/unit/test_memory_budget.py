"""The process's one DuckDB memory budget (core/memory_budget.py): shares of the database instances open at
once, the helper cap, the default's rule, and PZ0713 for a budget too small to run."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from pipelinez.connectors.duckdb.files import connected
from pipelinez.core import duck_connect, memory_budget
from pipelinez.core.memory_budget import Budget, default_limit, size_bytes
from pipelinez.engine.run.context import close_staging, open_staging
from tests.conftest import pz

MIB = 1024**2


def limit_of(con: duckdb.DuckDBPyConnection) -> int:
    """The instance's memory_limit in bytes, as DuckDB reports it ('183.1 MiB')."""
    row = con.execute("SELECT current_setting('memory_limit')").fetchone()
    assert row is not None
    number, unit = str(row[0]).split()
    return int(float(number) * {"KiB": 1024, "MiB": MIB, "GiB": 1024 * MIB}[unit])


def near(value: int, expected: int) -> bool:
    return abs(value - expected) <= MIB  # DuckDB rounds what it reports to 0.1 MiB


def test_size_bytes_reads_duckdb_units() -> None:
    assert size_bytes("512MB") == 512_000_000
    assert size_bytes(" 2 GiB ") == 2 * 1024**3
    assert size_bytes("1.5GB") == 1_500_000_000
    with pytest.raises(ValueError):
        size_bytes("80%")


def test_instances_open_at_once_split_the_budget_and_get_it_back() -> None:
    budget = Budget()
    budget.set_total("384MB")
    first, second, third = duckdb.connect(), duckdb.connect(), duckdb.connect()
    try:
        budget.join(first)
        assert near(limit_of(first), 384_000_000)
        budget.join(second)
        assert near(limit_of(first), 192_000_000) and near(limit_of(second), 192_000_000)
        budget.leave(second)
        assert near(limit_of(first), 384_000_000)
        # an instance closed without leaving gives its share back at the next change
        budget.join(second)
        second.close()
        budget.join(third)
        assert near(limit_of(first), 192_000_000) and near(limit_of(third), 192_000_000)
        assert budget.share() == 192_000_000
    finally:
        for con in (first, second, third):
            con.close()


def test_a_share_never_drops_below_half_the_minimum() -> None:
    budget = Budget()
    budget.set_total("64MB")
    cons = [duckdb.connect() for _ in range(4)]
    try:
        for con in cons:
            budget.join(con)
        assert budget.share() == memory_budget.MINIMUM_BYTES // 2
        assert near(limit_of(cons[0]), memory_budget.MINIMUM_BYTES // 2)
    finally:
        for con in cons:
            con.close()


def test_a_helper_instance_is_capped_at_the_budget() -> None:
    con = duck_connect.connect()
    try:
        assert near(limit_of(con), memory_budget.BUDGET.total)
    finally:
        con.close()


def test_a_duckdb_file_opened_beside_staging_shares_its_budget(tmp_path: Path) -> None:
    """The universal tier's DuckDB sink write: staging's buffer pool halves while the file's instance is open,
    and returns to the whole budget after."""
    staging = open_staging(tmp_path / "staging.duckdb", "300MB")
    try:
        assert near(limit_of(staging), 300_000_000)
        with connected(tmp_path / "sink.duckdb", read_only=False) as sink:
            assert near(limit_of(staging), 150_000_000) and near(limit_of(sink), 150_000_000)
        assert near(limit_of(staging), 300_000_000)
    finally:
        close_staging(staging)
        memory_budget.BUDGET.set_total(default_limit())


@pytest.mark.parametrize(
    ("machine", "expected"),
    [(24 * 1024**3, "320MB"), (1_000_000_000, "250MB"), (100_000_000, "64MB"), (0, "320MB")],
)
def test_the_default_is_320mb_or_a_quarter_of_the_machine(
    monkeypatch: pytest.MonkeyPatch, machine: int, expected: str
) -> None:
    monkeypatch.setattr(memory_budget, "machine_memory", lambda: machine)
    assert default_limit() == expected


def test_a_budget_too_small_to_run_is_pz0713(tmp_path: Path) -> None:
    (tmp_path / "project.yml").write_text("name: tiny\nengine:\n  memory_limit: 32MB\n", encoding="utf-8")
    result = pz(tmp_path, "validate")
    assert result.exit_code != 0
    assert "PZ0713" in result.output
    assert "project.yml:3:17" in result.output
    assert "64MB or more" in result.output
    (tmp_path / "project.yml").write_text("name: tiny\nengine:\n  memory_limit: 64MB\n", encoding="utf-8")
    assert "PZ0713" not in pz(tmp_path, "validate").output


def test_work_that_outgrows_the_budget_is_pz0714(tmp_path: Path) -> None:
    """A list aggregate cannot spill: at the minimum budget the streamed pipeline and its sink write fail as
    PZ0714 with the budget's next step, and nothing is written."""
    (tmp_path / "project.yml").write_text("name: oom\nengine:\n  memory_limit: 64MB\n", encoding="utf-8")
    (tmp_path / "sinks").mkdir()
    (tmp_path / "sinks" / "wh.yml").write_text("connector: duckdb\nconnection: { path: out.duckdb }\n")
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "big.sql").write_text(
        "INSERT INTO {{ sink('wh', 'big') }}\nSELECT list(i) AS l FROM range(40000000) t(i)\n"
    )
    result = pz(tmp_path, "run")
    assert result.exit_code != 0
    assert "PZ0714: pipeline 'big'" in result.output
    assert "raise engine.memory_limit in project.yml" in result.output
    assert not (tmp_path / "out.duckdb").exists() or "big" not in str(
        duckdb.connect(str(tmp_path / "out.duckdb"), read_only=True).execute("SHOW TABLES").fetchall()
    )


def test_a_staging_that_fails_its_set_up_gives_its_share_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a staging that failed after it opened must not hold a share for the process's life: the next
    # staging (the next run of a Python API process) then has the whole budget, not half of it
    monkeypatch.setenv("PZ_FAILPOINTS", "staging.set_up")
    with pytest.raises(RuntimeError, match=r"failpoint staging\.set_up"):
        open_staging(tmp_path / "failed.duckdb", "256MB")
    monkeypatch.delenv("PZ_FAILPOINTS")
    staging = open_staging(tmp_path / "staging.duckdb", "256MB")
    try:
        assert near(limit_of(staging), 256 * 1000**2)
    finally:
        close_staging(staging)
        memory_budget.BUDGET.set_total(default_limit())
