"""A sink write reads its source once: a pipeline streamed into the write is a view in staging, so each read
of the source computes the pipeline's query again. The native writes of the duckdb and file connectors count
what they write instead of counting the source first (merge, which reads its source more than once, is always
stored, see plan.streaming). The query here counts the rows it computes through a Python function."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from pipelinez.connectors.duckdb.connector import DuckDBConnector
from pipelinez.connectors.localfiles.connector import LocalFilesConnector
from pipelinez.connectors.sdk import ConnectorContext, OutputRequest, Strategy
from pipelinez.core.diagnostics import PzConnectorError

ROWS = 5_000


def _staging_with_view(tmp_path: Path, rows: int = ROWS) -> duckdb.DuckDBPyConnection:
    """Staging with `t` (`rows` rows) and the view `v` over it, as a streamed pipeline is."""
    con = duckdb.connect(str(tmp_path / "staging.duckdb"))
    con.execute(f"CREATE TABLE t AS SELECT range AS id, 'x' || (range % 7) AS v FROM range({rows})")
    con.execute("CREATE VIEW v AS SELECT id, v FROM t WHERE id >= 0")
    return con


class Recording:
    """A DuckDB connection (or cursor) that records every statement run through it or its cursors."""

    def __init__(self, con: duckdb.DuckDBPyConnection, log: list[str] | None = None):
        self._con = con
        self.log: list[str] = [] if log is None else log

    def cursor(self) -> Recording:
        return Recording(self._con.cursor(), self.log)

    def execute(self, sql: str, *args: object) -> Recording:
        self.log.append(" ".join(sql.split()))
        self._con.execute(sql, *args)
        return self

    def __getattr__(self, name: str) -> object:
        return getattr(self._con, name)


def full_reads(log: list[str]) -> list[str]:
    """The statements that compute the view `v` whole: not a DESCRIBE, a look at its first row or a table
    created from its columns only."""
    shape_only = ("DESCRIBE", "LIMIT 0", "LIMIT 1", "WITH NO DATA")
    return [s for s in log if " FROM v" in s and not any(part in s for part in shape_only)]


@pytest.mark.parametrize("strategy", [Strategy.REPLACE, Strategy.APPEND])
def test_the_duckdb_sink_computes_a_streamed_pipeline_once(tmp_path: Path, strategy: Strategy) -> None:
    con = _staging_with_view(tmp_path)
    staging = Recording(con)
    sink = DuckDBConnector(ConnectorContext("wh", tmp_path, {"path": "wh.duckdb"}))
    result = sink.write_native(staging, OutputRequest("orders", {}, strategy, run_id="r1"), "v")  # type: ignore[arg-type]
    assert result.rows == ROWS
    assert len(full_reads(staging.log)) == 1, staging.log
    with duckdb.connect(str(tmp_path / "wh.duckdb")) as wh:
        assert wh.execute("SELECT count(*), sum(id) FROM orders").fetchone() == (ROWS, ROWS * (ROWS - 1) // 2)


@pytest.mark.parametrize(
    ("strategy", "options"),
    [
        (Strategy.REPLACE, {"format": "parquet"}),
        (Strategy.REPLACE, {"format": "parquet", "partition_by": ["v"]}),
        (Strategy.APPEND, {"format": "parquet"}),
        (Strategy.APPEND, {"format": "csv", "partition_by": ["v"]}),
    ],
)
def test_the_file_sink_computes_a_streamed_pipeline_once(
    tmp_path: Path, strategy: Strategy, options: dict[str, object]
) -> None:
    con = _staging_with_view(tmp_path)
    staging = Recording(con)
    sink = LocalFilesConnector(ConnectorContext("lake", tmp_path, {"root": "lake"}))
    result = sink.write_native(staging, OutputRequest("orders", options, strategy, run_id="r1"), "v")  # type: ignore[arg-type]
    assert result.rows == ROWS
    assert len(full_reads(staging.log)) == 1, staging.log
    fmt = options["format"]
    read = f"read_{fmt}('{tmp_path}/lake/orders.{fmt}/**/*.{fmt}')"
    assert con.execute(f"SELECT count(*), sum(id::BIGINT) FROM {read}").fetchone() == (
        ROWS,
        ROWS * (ROWS - 1) // 2,
    )


def test_an_empty_streamed_replace_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    con = _staging_with_view(tmp_path, 0)
    duck = DuckDBConnector(ConnectorContext("wh", tmp_path, {"path": "wh.duckdb"}))
    with pytest.raises(PzConnectorError) as caught:
        duck.write_native(con, OutputRequest("orders", {}, Strategy.REPLACE, run_id="r1"), "v")
    assert caught.value.code == "PZ0509" and not (tmp_path / "wh.duckdb").exists()
    files = LocalFilesConnector(ConnectorContext("lake", tmp_path, {"root": "lake"}))
    out = OutputRequest("orders", {"format": "parquet"}, Strategy.REPLACE, run_id="r1")
    with pytest.raises(PzConnectorError) as caught:
        files.write_native(con, out, "v")
    assert caught.value.code == "PZ0509" and not list(tmp_path.glob("lake/**/*.parquet"))
    append = OutputRequest("orders", {"format": "parquet"}, Strategy.APPEND, run_id="r1")
    assert files.write_native(con, append, "v").rows == 0 and not list(tmp_path.glob("lake/**/*.parquet"))
