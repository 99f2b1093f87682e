"""Project run state that outlives a run: `.pz/state.duckdb`. Today it holds each dataset's committed
watermark, which `watermark()` rendering (compile) reads and a successful run writes, so it sits below every
layer that needs it.

Reading never creates the file (`pz validate` writes nothing); writing commits every change of a run in one
transaction. Connections are opened per call and closed at once, so no process holds the file between runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

STATE_FILE = "state.duckdb"
SCHEMA_VERSION = 1

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)",
    "CREATE TABLE IF NOT EXISTS watermarks (source VARCHAR NOT NULL, dataset VARCHAR NOT NULL, "
    "column_name VARCHAR NOT NULL, value VARCHAR NOT NULL, run_id VARCHAR NOT NULL, "
    "updated_at TIMESTAMPTZ NOT NULL DEFAULT now(), PRIMARY KEY (source, dataset))",
)


@dataclass(frozen=True)
class Watermark:
    """The highest value of `column` a run committed for one dataset, as the text of its SQL literal."""

    source: str
    dataset: str
    column: str
    value: str
    run_id: str


class RunState:
    """Access to `.pz/state.duckdb` for one project."""

    def __init__(self, state_dir: Path):
        self.path = state_dir / STATE_FILE

    def watermarks(self) -> dict[tuple[str, str], Watermark]:
        """Every committed watermark by (source, dataset); empty when there is no state yet."""
        if not self.path.exists():
            return {}
        con = self._connect(read_only=True)
        try:
            rows = con.execute(
                "SELECT source, dataset, column_name, value, run_id FROM watermarks ORDER BY source, dataset"
            ).fetchall()
        finally:
            con.close()
        return {(r[0], r[1]): Watermark(*(str(v) for v in r)) for r in rows}

    def watermark(self, source: str, dataset: str) -> Watermark | None:
        return self.watermarks().get((source, dataset))

    def commit_watermarks(self, marks: Iterable[Watermark]) -> None:
        """Record `marks` (replacing each dataset's previous one) in one transaction: all or none."""
        marks = list(marks)
        if not marks:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = self._connect(read_only=False)
        try:
            con.execute("BEGIN TRANSACTION")
            for m in marks:
                con.execute(
                    "INSERT OR REPLACE INTO watermarks (source, dataset, column_name, value, run_id) "
                    "VALUES (?, ?, ?, ?, ?)",
                    [m.source, m.dataset, m.column, m.value, m.run_id],
                )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        finally:
            con.close()

    def _connect(self, read_only: bool) -> duckdb.DuckDBPyConnection:
        import duckdb

        con = duckdb.connect(str(self.path), read_only=read_only)
        if not read_only:
            for statement in _SCHEMA:
                con.execute(statement)
            con.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
        return con
