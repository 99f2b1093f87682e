"""The mysql connector's reads through ConnectorX: `read_sql(..., return_type="arrow_stream")` yields Arrow
record batches straight from the server; nothing is materialised in Python. A read is streamed, or fetched
whole in one call that waits for the server with the GIL released (see `MySQLSource._small_parts`).

ConnectorX prints to fd 2 (a panic of its producer thread, its connection pool's own retries): fd 2 is
captured while Rust runs, and the pool's retries are reported as notes of the attempt. A failed read is
reported as a PzConnectorError (a lost connection is transient; a value it cannot convert is diagnosed)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.mysql.session import connect
from pipelinez.connectors.mysql.settings import Settings, connector_error, is_transient
from pipelinez.connectors.mysql.types import ColumnPlan, convert_batch
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.native_stderr import Captured, native_stderr

if TYPE_CHECKING:
    import pyarrow as pa

BATCH_ROWS = 65_536  # rows per Arrow batch read from ConnectorX
POOL_FAILURE = " ERROR r2d2]"  # how ConnectorX's pool (r2d2) logs a failed connect to stderr


def stream(
    settings: Settings,
    note: Callable[[str], None],
    sql: str,
    plans: list[ColumnPlan],
    schema: pa.Schema,
    where: str,
    source: str,
    *,
    whole: bool = False,
) -> Iterator[pa.RecordBatch]:
    """The rows of `sql` as converted batches: streamed (ConnectorX's arrow_stream), or, `whole`, fetched
    in one call that waits for the server with the GIL released (see _small_parts)."""
    reader: Any = None
    # ConnectorX's producer thread may panic at any moment while the stream is alive (between two
    # batches too), printing to fd 2: fd 2 stays captured until the reader is gone
    alive = contextlib.ExitStack()
    alive.enter_context(native_stderr())
    try:
        reader = _start_read(settings, note, sql, where, whole=whole)
        yielded = False
        while (batch := _next_batch(reader)) is not None:
            if batch.num_rows:
                yielded = True
                yield convert_batch(batch, plans, schema, where)
        if not yielded:  # an empty read still tells the engine its columns
            yield _empty(schema)
    except PzConnectorError:
        raise
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as exc:  # ConnectorX raises RuntimeError, and pyo3 PanicException (a BaseException)
        raise _read_error(settings, exc, plans, source, where) from None
    finally:
        _close_reader(reader)
        reader = None  # the stream and its producer thread go here, then fd 2 is given back
        alive.close()


def _start_read(settings: Settings, note: Callable[[str], None], sql: str, where: str, *, whole: bool) -> Any:
    """ConnectorX's reader of `sql`: of the rows streamed (arrow_stream), or, `whole`, of the rows fetched
    in one call. The pool's connection retries print to fd 2 as well: captured on their own while the
    read starts, to be reported as notes (see _report_pool_retries)."""
    import connectorx as cx

    reader: Any = None
    captured: Captured | None = None
    try:
        with native_stderr() as captured:
            if whole:
                fetched = cx.read_sql(
                    settings.connectorx_url(),
                    sql,
                    return_type="arrow",
                    pre_execution_query=settings.session_statements(),
                )
                reader = fetched.to_reader(max_chunksize=BATCH_ROWS)
            else:
                reader = cx.read_sql(
                    settings.connectorx_url(),
                    sql,
                    return_type="arrow_stream",
                    batch_size=BATCH_ROWS,
                    pre_execution_query=settings.session_statements(),
                )
    finally:
        if captured is not None:
            try:
                _report_pool_retries(settings, note, captured.text, where)
            except BaseException:
                _close_reader(reader)  # the caller never gets the reader to close
                reader = None
                raise
    return reader


def _read_error(
    settings: Settings, exc: BaseException, plans: list[ColumnPlan], source: str, where: str
) -> PzConnectorError:
    """The error a failed ConnectorX read of `source` is reported as."""
    if type(exc).__name__ == "PanicException" and is_transient(exc):
        # ConnectorX panics when the server connection is lost mid-read ("cx writer failed: ...
        # Connection reset by peer"): a lost connection, not a value it cannot convert
        return connector_error(settings, f"{where}: read failed", exc, code="PZ0505")
    if type(exc).__name__ == "PanicException":
        bad = _impossible_dates(settings, plans, source, where)
        if bad:
            return PzConnectorError(
                f"column(s) {', '.join(bad)} hold dates no calendar has (zero dates such as "
                "'0000-00-00', a zero month or day), which the staging database cannot hold; nothing "
                "was staged. Read the dataset with a query: that maps them (e.g. "
                f"NULLIF({bad[0]}, '0000-00-00'), or a WHERE that leaves them out)",
                code="PZ0518",
            )
        return PzConnectorError(
            settings.redact(
                f"{where}: the MySQL reader cannot convert a value: {_first_line(exc)}; zero dates "
                "('0000-00-00') and values outside the documented types fail; select them through a "
                "query: with NULLIF/CAST"
            ),
            code="PZ0505",
        )
    return connector_error(settings, f"{where}: read failed", exc, code="PZ0505")


def _impossible_dates(settings: Settings, plans: list[ColumnPlan], source: str, where: str) -> list[str]:
    """The date/datetime/timestamp columns of `source` holding a date no calendar has (a zero date
    '0000-00-00', a zero month or day, an invalid date). Asked only after the reader failed, so a
    healthy read pays nothing; [] when the question itself fails."""
    dated = [p for p in plans if p.duckdb.startswith(("DATE", "TIMESTAMP"))]
    if not dated:
        return []
    tests = ", ".join(
        f"COALESCE(SUM({p.select_sql} IS NOT NULL AND (MONTH({p.select_sql}) = 0 OR "
        f"DAYOFMONTH({p.select_sql}) = 0 OR LAST_DAY({p.select_sql}) IS NULL)), 0)"
        for p in dated
    )
    try:
        con = connect(settings, where, "PZ0505")
        try:
            with con.cursor() as cur:
                cur.execute(f"SELECT {tests} FROM {source}")
                row = cur.fetchone() or ()
        finally:
            con.close()
    except Exception:  # the diagnosis is best effort: the read has failed either way
        return []
    return [p.name for p, hits in zip(dated, row, strict=False) if hits]


def _report_pool_retries(settings: Settings, note: Callable[[str], None], stderr: str, where: str) -> None:
    """ConnectorX builds an r2d2 connection pool, which retries a failed connect on its own (after 0.4s,
    then doubling, for up to 30s) and logs each failure to stderr. pz cannot switch that off (no setting
    reaches the pool), so it makes every such hidden retry visible as a note of the attempt."""
    failures = [line for line in stderr.splitlines() if POOL_FAILURE in line]
    if not failures:
        return
    cause = failures[-1].split(POOL_FAILURE, 1)[1].strip()
    note(
        settings.redact(
            f"{where}: ConnectorX's connection pool retried connecting on its own {len(failures)} "
            f"time(s) within this attempt (last failure: {cause[:200]}); a third-party retry pz cannot "
            "switch off, see Resilience > Connectors never retry"
        )
    )


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    import pyarrow as pa

    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _close_reader(reader: Any) -> None:
    """Close a ConnectorX reader (when there is one and it can be closed); a failing close is ignored."""
    if reader is not None and hasattr(reader, "close"):
        with contextlib.suppress(Exception):
            reader.close()


def _next_batch(reader: Any) -> Any:
    """The reader's next batch (None at the end), with native stderr captured only while Rust runs."""
    with native_stderr():
        try:
            return reader.read_next_batch()
        except StopIteration:
            return None
