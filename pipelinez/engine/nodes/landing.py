"""Landing data in staging, shared by every runner and backend: the context a runner works in (`NodeContext`),
what an attempt returns (`NodeOutput`), Arrow batches into a staging table, one partition of a dataset
landed in either tier, and an incremental load's watermark capture. Data moves inside DuckDB or as Arrow
batches, never row by row in Python."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pipelinez.compile.work import Endpoint, SourceLoadWork
from pipelinez.connectors.sdk import NATIVE, Connector, DatasetRequest, Partition, choose_tier
from pipelinez.connectors.sdk_delivery import DeliveryCheckpoint
from pipelinez.connectors.sdk_feed import ArrowFeed
from pipelinez.connectors.sdk_sql import create_staging_table
from pipelinez.core import duck_catalog
from pipelinez.core.diagnostics import ConnectorHostError
from pipelinez.core.sqlnames import quote_ident
from pipelinez.core.vocabulary import NodeStatus, Provenance, Tier
from pipelinez.engine.nodes.watermarks import Capture, trim_and_capture
from pipelinez.engine.run.failures import NodeFailure
from pipelinez.engine.state.run_results import PartitionResult

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from pipelinez.engine.nodes.partitions import LandedParts


class NodeContext(Protocol):
    """All a runner needs besides its node: the run's id, cursors of the staging database (released when
    done), a way to publish a note. `RunContext` is the local one; a remote worker builds its own around its
    copy of staging."""

    @property
    def run_id(self) -> str: ...

    def cursor(self) -> duckdb.DuckDBPyConnection: ...

    def release(self, cur: duckdb.DuckDBPyConnection) -> None: ...

    def note(self, message: str) -> None: ...

    @property
    def interrupted(self) -> bool: ...

    @property
    def landed(self) -> LandedParts[PartitionResult]:
        """The partitions of partitioned loads that landed in this run's earlier attempts (their tables
        stay in staging), for a load's next attempt to keep."""

    def borrow(self, group: str, wanted: int) -> int:
        """Take up to `wanted` more slots of `group` (a source instance's `max_concurrency`, which the
        running node already holds one of) that are free now; returns how many. A remote worker lends none:
        its node's partitions are then read one at a time."""

    def give_back(self, group: str, n: int) -> None:
        """Return slots `borrow` took."""


@dataclass
class NodeOutput:
    rows: int = 0
    tier: Tier | None = None
    status: NodeStatus = NodeStatus.SUCCESS
    message: str | None = None
    partitions: list[PartitionResult] | None = None
    batches_committed: int | None = None
    checkpoint: DeliveryCheckpoint | None = None
    provenance: Provenance | None = None  # reused: copied from an earlier run's staging
    reused_from: str | None = None
    watermark: Capture | None = None  # an incremental load's capture


def attempt_tier(connector: Connector, work: SourceLoadWork) -> Tier:
    """The tier a load's attempt extracts in. Planned at compile (`work.tier`, from the manifest: what
    `pz plan` shows); when an attempt starts its connector has the last word, asked here only, once per
    attempt (it refuses a native-only format under force_universal with PZ0312, as the plan's note says). A
    fanned-out partition's task gets the answer with the task instead of asking again. A connector that keeps
    the SDK's rule (the manifest's tiers) is answered from the capabilities its work item carries, without
    reading its manifest again."""
    if type(connector).source_tier is Connector.source_tier:
        return choose_tier(work.endpoint.caps.source_tiers, work.request.force_universal)
    return Tier(connector.source_tier(work.request))


def make_connector(ctx: NodeContext, point: Endpoint) -> Connector:
    try:
        return point.connect(note=ctx.note, run_id=ctx.run_id)
    except ConnectorHostError as exc:
        d = exc.diagnostics[0]
        raise NodeFailure(d.code, d.message) from exc


def count_rows(cur: duckdb.DuckDBPyConnection, table: str) -> int:
    row = cur.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(row[0]) if row else 0


def is_empty(cur: duckdb.DuckDBPyConnection, relation: str) -> bool:
    """Whether a table or a streamed pipeline's view has no row; stops at the first row it finds."""
    return cur.execute(f"SELECT 1 FROM {relation} LIMIT 1").fetchone() is None


def table_exists(cur: duckdb.DuckDBPyConnection, name: str) -> bool:
    """One lookup in staging: never an enumeration that would reach other nodes' attachments."""
    return duck_catalog.table_exists(cur, quote_ident(name))


def ingest_batches(
    cur: duckdb.DuckDBPyConnection,
    batches: Iterable[pa.RecordBatch],
    table: str,
    exists: bool,
    columns: dict[str, str] | None,
    view_name: str,
    compression: str = "auto",
    interrupted: Callable[[], bool] = lambda: False,
) -> None:
    """Stream Arrow record batches into the staging table `table` (unquoted), casting to the contract, in
    one transaction of bounded statements (see ArrowFeed). An interrupt that comes between two statements
    (DuckDB forgets it once its query ended) stops the load before the next one."""
    import pyarrow as pa

    iterator = iter(batches)
    first = next(iterator, None)
    target = quote_ident(table)
    if first is None:
        if not exists:
            if not columns:
                raise NodeFailure(
                    "PZ0505",
                    "the source returned no data and the dataset declares no columns: "
                    "cannot create its staging table",
                )
            cols = ", ".join(f"{quote_ident(c)} {t}" for c, t in columns.items())
            cur.execute(f"CREATE TABLE {target} ({cols})")
        return
    raised: list[BaseException] = []

    def rest() -> Iterator[pa.RecordBatch]:
        # DuckDB pulls the batches: an error the connector raises mid-stream reaches us wrapped in a DuckDB
        # error that lost its class (and is_transient, retry_after). Keep the original to re-raise it.
        try:
            yield from iterator
        except BaseException as exc:
            raised.append(exc)
            raise

    reader = pa.RecordBatchReader.from_batches(first.schema, itertools.chain([first], rest()))
    select = "*"
    if columns:
        missing = [c for c in columns if c not in first.schema.names]
        if missing:
            raise NodeFailure(
                "PZ0505",
                f"columns {', '.join(missing)} of the contract are missing from the data "
                f"(found: {', '.join(first.schema.names)})",
            )
        select = ", ".join(f"CAST({quote_ident(c)} AS {t}) AS {quote_ident(c)}" for c, t in columns.items())
    feed = ArrowFeed(reader, view_name)
    cur.execute("BEGIN TRANSACTION")
    try:
        if not exists:
            cur.register(view_name, first.slice(0, 0))  # (empty_table() fails on extension types)
            try:
                shape = f"SELECT {select} FROM {quote_ident(view_name)}"
                if not create_staging_table(cur, target, shape, compression):
                    cur.execute(f"CREATE TABLE {target} AS {shape} WITH NO DATA")
            finally:
                cur.unregister(view_name)
        feed.insert_into(cur, target, by_name=exists, select=select, before_each=_stop_if(interrupted))
        cur.execute("COMMIT")
    except BaseException:  # any exit: a partition worker reuses this cursor for its next partition
        with contextlib.suppress(Exception):
            cur.execute("ROLLBACK")
        if raised:
            raise raised[0] from None
        raise


def _stop_if(interrupted: Callable[[], bool]) -> Callable[[], None]:
    def check() -> None:
        if interrupted():
            raise NodeFailure("PZ0514", "interrupted while it loaded")

    return check


def capture_watermark(
    ctx: NodeContext, cur: duckdb.DuckDBPyConnection, table: str, request: DatasetRequest
) -> Capture | None:
    """An incremental load's staging trimmed to its bounds and its new watermark (see engine.watermarks)."""
    if not request.bounds.incremental:
        return None
    capture = trim_and_capture(cur, table, request.bounds)
    if capture.null_rows:
        ctx.note(
            f"{table}: {capture.null_rows} staged row(s) have a NULL {capture.cursor}; every incremental run "
            "reads such rows again (they cannot be placed against the watermark)"
        )
    return capture


def land_partition(
    ctx: NodeContext,
    connector: Connector,
    cur: duckdb.DuckDBPyConnection,
    request: DatasetRequest,
    partition: Partition,
    table: str,
    tier: str,
) -> None:
    """Land one partition (the whole dataset when it has one) into the staging table `table` (unquoted)."""
    if tier == NATIVE:
        connector.extract_native(cur, request, partition, quote_ident(table))
    else:
        ingest_batches(
            cur,
            connector.extract_batches(request, partition),
            table,
            table_exists(cur, table),
            request.columns,
            f"__pz_ingest_{table}",
            request.staging_compression,
            lambda: ctx.interrupted,
        )


def drop_quietly(cur: duckdb.DuckDBPyConnection, target: str) -> None:
    try:
        cur.execute(f"DROP TABLE IF EXISTS {target}")
    except Exception:  # the staging db itself may be the failure; the table is dropped on the next attempt
        return
