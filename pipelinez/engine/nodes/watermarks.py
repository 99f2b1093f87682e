"""Watermarks inside a run: trimming a bounded load's staging table, capturing the new watermark from the
staged rows, and deciding at the end of the run which watermarks to commit to `.pz/state.duckdb`.

- Trim (`trim_and_capture`): one DELETE keeps the staged rows inside `(lower, upper]` (and the NULL-cursor
  rows). For a connector that pushed the bounds down it deletes nothing; it is what makes staging correct
  when a connector ignored them (the universal-path backstop, applied on both tiers).
- Capture: the new watermark is MAX(cursor) over the staged rows themselves (the same snapshot the read saw,
  never a second query against the source), capped at the window's upper bound, never below the committed one,
  printed by DuckDB at the column's full precision. Nothing staged above the committed watermark: unchanged.
  A window that staged nothing and lies wholly in the past advances to its upper bound (else backfill would
  stop at the first empty window).
- Commit (`decide`): a watermark is committed only when its load succeeded and every sink write downstream of
  it (in the whole project, not only the selection) committed in this run. A sink carried forward by a retry
  counts only when the load itself was reused from the failed run's staging.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipelinez.compile.graph import descendants
from pipelinez.compile.incremental_yaml import utc_text
from pipelinez.compile.nodes import Node, SinkWriteNode, SourceLoadNode
from pipelinez.compile.watermark_literal import ZONED
from pipelinez.connectors.sdk import ReadBounds, bounds_predicate
from pipelinez.core import duck_catalog
from pipelinez.core.diagnostics import PzConnectorError, PzError
from pipelinez.core.run_state import Watermark
from pipelinez.core.sqlnames import quote_ident, quote_literal
from pipelinez.core.state.backend import StateBackend
from pipelinez.core.vocabulary import NodeStatus, Provenance
from pipelinez.engine.state.run_results import WatermarkRecord

if TYPE_CHECKING:
    import duckdb

_FINITE_CHECKED = ("DATE", "TIMESTAMP", "FLOAT", "DOUBLE")  # types that hold infinity (and NaN)


@dataclass(frozen=True)
class Capture:
    """What one incremental load staged, as far as its watermark is concerned."""

    cursor: str
    low: str | None  # the lower bound the read used
    upper: str | None  # the window's upper bound, if any
    previous: str | None  # the committed watermark the bounds came from
    high: str | None  # the new watermark; None: unchanged (nothing new staged)
    null_rows: int = 0  # staged rows whose cursor is NULL
    trimmed: int = 0  # rows the connector delivered outside the bounds, deleted by the backstop

    def record(self, committed: bool, reason: str | None = None) -> WatermarkRecord:
        """The load's watermark entry in run_results.json."""
        return WatermarkRecord(
            self.cursor,
            self.low,
            self.high,
            self.previous,
            committed,
            self.upper,
            reason,
            self.null_rows,
            self.trimmed,
        )


def _column_type(cur: duckdb.DuckDBPyConnection, table: str, column: str) -> str:
    found = dict(duck_catalog.columns_of(cur, quote_ident(table)) or [])
    if column not in found:
        raise LookupError(f"the cursor column '{column}' is not a column of the staged data")
    return found[column]


def trim_and_capture(
    cur: duckdb.DuckDBPyConnection, table: str, bounds: ReadBounds, now: dt.datetime | None = None
) -> Capture:
    """Trim the staging table `table` (unquoted) to `bounds`, then capture its new watermark."""
    cursor = str(bounds.cursor)
    typ = _column_type(cur, table, cursor)
    target, col = quote_ident(table), quote_ident(cursor)

    def literal(text: str) -> str:
        return f"CAST({quote_literal(text)} AS {typ})"

    predicate = bounds_predicate(col, bounds, literal)
    trimmed = 0
    if predicate:
        deleted = cur.execute(f"DELETE FROM {target} WHERE NOT {predicate}").fetchone()
        trimmed = int(deleted[0]) if deleted else 0
    _refuse_non_finite(cur, target, cursor, typ)
    highest = f"timezone('UTC', max({col}))" if typ == ZONED else f"max({col})"  # its text in UTC
    found = cur.execute(
        f"SELECT CAST({highest} AS VARCHAR), count(*) FILTER (WHERE {col} IS NULL) FROM {target}"
    ).fetchone()
    high = None if found is None or found[0] is None else str(found[0])
    if high is not None and typ == ZONED:
        high = utc_text(high)  # stored with its zone: +00:00
    nulls = int(found[1]) if found is not None else 0
    if high is not None and bounds.upper is not None and _greater(cur, high, bounds.upper, typ):
        high = bounds.upper
    if high is None and bounds.upper is not None and _past(cur, bounds.upper, typ, now):
        high = bounds.upper
    if high is not None and bounds.committed is not None and not _greater(cur, high, bounds.committed, typ):
        high = None
    return Capture(cursor, bounds.lower, bounds.upper, bounds.committed, high, nulls, trimmed)


def _refuse_non_finite(cur: duckdb.DuckDBPyConnection, target: str, cursor: str, typ: str) -> None:
    """PZ0529 when a staged cursor value is infinite or NaN (a PostgreSQL 'infinity' timestamp): it would
    become the watermark and every later row would lie below it forever."""
    if not typ.startswith(_FINITE_CHECKED):
        return  # integers and decimals are always finite
    col = quote_ident(cursor)
    found = cur.execute(
        f"SELECT CAST({col} AS VARCHAR), count(*) OVER () FROM {target} WHERE NOT isfinite({col}) LIMIT 1"
    ).fetchone()
    if found is None:
        return
    raise PzConnectorError(
        f"{found[1]} staged row(s) have the cursor value '{found[0]}' in column '{cursor}', which pz cannot "
        "order against a watermark (committing it would skip every later row); nothing was committed",
        code="PZ0529",
    )


def _greater(cur: duckdb.DuckDBPyConnection, a: str, b: str, typ: str) -> bool:
    row = cur.execute(f"SELECT CAST(? AS {typ}) > CAST(? AS {typ})", [a, b]).fetchone()
    return bool(row and row[0])


def _past(cur: duckdb.DuckDBPyConnection, value: str, typ: str, now: dt.datetime | None) -> bool:
    """Whether `value` lies before this moment (UTC) in the cursor's type."""
    moment = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).replace(tzinfo=None)
    text = moment.isoformat(sep=" ")
    if "TIME ZONE" in typ:
        text += "+00"
    row = cur.execute(f"SELECT CAST(? AS {typ}) <= CAST(? AS {typ})", [value, text]).fetchone()
    return bool(row and row[0])


# -- commit decision -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class LoadOutcome:
    """An incremental load at the end of a run: its status, how it got its rows, its capture."""

    name: str
    status: NodeStatus
    capture: Capture | None
    provenance: Provenance | None = None


@dataclass(frozen=True)
class Decision:
    commit: bool
    reason: str  # why not, or what was committed


def decide(
    load: LoadOutcome, downstream_sinks: Sequence[str], sink_status: Mapping[str, NodeStatus]
) -> Decision:
    """Whether `load`'s new watermark is committed. `downstream_sinks` are every sink write that reads the
    dataset (directly or through pipelines) in the whole project; `sink_status` holds the statuses of the
    nodes of this run (a sink not in it did not commit in this run)."""
    if load.status != NodeStatus.SUCCESS or load.capture is None:
        return Decision(False, "the load did not succeed")
    if load.capture.high is None:
        return Decision(False, "nothing newer than the watermark was staged")
    if not downstream_sinks:
        return Decision(False, "no sink write reads this dataset, so nothing delivered its rows")
    for sink in downstream_sinks:
        status = sink_status.get(sink)
        if status == NodeStatus.SUCCESS:
            continue
        if status == NodeStatus.CARRIED_FORWARD and load.provenance == Provenance.REUSED:
            continue
        if status is None:
            return Decision(False, f"sink write {sink} did not run in this run")
        if status == NodeStatus.CARRIED_FORWARD:
            return Decision(False, f"sink write {sink} was carried forward, but the load was re-extracted")
        return Decision(False, f"sink write {sink} did not commit ({status})")
    return Decision(True, f"committed {load.capture.high}")


def downstream_sinks(nodes: Mapping[str, Node], load: str) -> list[str]:
    """Every sink write that reads `load` through any chain of nodes (`nodes`: the whole project's DAG)."""
    edges = {name: list(node.deps) for name, node in nodes.items()}
    return sorted(n for n in descendants(edges, [load]) if isinstance(nodes[n], SinkWriteNode))


@dataclass(frozen=True)
class RunCommit:
    """What the end of a run did with its incremental loads' watermarks."""

    committed: dict[str, Watermark]  # load name -> the watermark recorded
    skipped: dict[str, str]  # load name -> why its new watermark was not committed
    error: str | None = None  # the state file could not be written (nothing was committed)


def commit_run(
    nodes: Mapping[str, Node],
    statuses: Mapping[str, NodeStatus],
    provenance: Mapping[str, Provenance | None],
    captures: Mapping[str, Capture],
    state: StateBackend,
    run_id: str,
) -> RunCommit:
    """Decide each captured load's watermark (`decide`) and record the committed ones in one transaction."""
    marks: dict[str, Watermark] = {}
    skipped: dict[str, str] = {}
    for name, capture in sorted(captures.items()):
        node = nodes[name]
        assert isinstance(node, SourceLoadNode)
        load = LoadOutcome(name, statuses.get(name, NodeStatus.PENDING), capture, provenance.get(name))
        decision = decide(load, downstream_sinks(nodes, name), statuses)
        if decision.commit and capture.high is not None:
            marks[name] = Watermark(node.source, node.dataset, capture.cursor, capture.high, run_id)
        else:
            skipped[name] = decision.reason
    try:
        state.commit_watermarks(marks.values())
    except Exception as exc:  # broken, another process holding the file (StateFileError); the disk; a
        # shared backend unreachable (StateBackendError)
        reason = exc.diagnostics[0].message if isinstance(exc, PzError) else f"{type(exc).__name__}: {exc}"
        what = "the state backend" if state.remote else "the state file"
        unwritten = dict.fromkeys(marks, f"{what} could not be written")
        return RunCommit({}, {**skipped, **unwritten}, reason)
    return RunCommit(marks, skipped)
