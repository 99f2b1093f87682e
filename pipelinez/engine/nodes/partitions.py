"""The partitions of a source load, for every backend: how a partition is named (`SourceLoadNode.part_table`),
fingerprinted, landed (`land_one`), how many are read at once (`ReadLease`: the instance's `max_concurrency`
counts every read against it once, the load's own slot included), and what an earlier attempt of the same
run landed (`LandedParts`: a transient failure of one partition of a thousand re-reads that one, not the
thousand). The thread backend lands a load's partitions here (`load_partitions`, on partition workers of its
own); the Ray backend fans them out as one task each and lands each with `land_one` on its worker.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Generic, TypeVar

from pipelinez.compile.ids import canonical, digest
from pipelinez.compile.nodes import SourceLoadNode
from pipelinez.compile.work import Endpoint
from pipelinez.connectors.sdk import Connector, Partition
from pipelinez.core import failpoints
from pipelinez.core.sqlnames import quote_ident
from pipelinez.core.vocabulary import NodeStatus, Provenance, Tier
from pipelinez.engine.nodes.landing import (
    NodeContext,
    NodeOutput,
    capture_watermark,
    count_rows,
    drop_quietly,
    land_partition,
    make_connector,
)
from pipelinez.engine.staging.staging_store import Reuse, ReuseUnavailable, StagedPart
from pipelinez.engine.state.run_results import PartitionResult

if TYPE_CHECKING:
    import duckdb

PARTITION_WORKERS = 4  # parallel partition reads per local load when the instance sets no max_concurrency
COMBINE_CHUNK = 64  # partition tables appended per INSERT when combining

T = TypeVar("T")


def partition_fingerprint(partition: Partition) -> str:
    """What a partition reads, hashed: a landed partition is kept or reused only for the same slice."""
    return digest(canonical(partition))


def land_one(
    ctx: NodeContext,
    node: SourceLoadNode,
    connector: Connector,
    cur: duckdb.DuckDBPyConnection,
    partition: Partition,
    tier: Tier,
) -> PartitionResult:
    """Land one partition of `node` into its own table (`node.part_table`), whichever backend runs it."""
    table = node.part_table(partition.index)
    cur.execute(f"DROP TABLE IF EXISTS {quote_ident(table)}")
    land_partition(ctx, connector, cur, node.work.request, partition, table, tier)
    failpoints.hit("source.landed", f"{node.name}#{partition.index}")
    rows = count_rows(cur, quote_ident(table))
    return PartitionResult(partition.index, rows, fingerprint=partition_fingerprint(partition))


class ReadLease:
    """How many partitions of one load are read at once: the load's own slot of its instance plus what it
    could borrow of the instance's free slots (never waiting for one), up to `cap`. Given back by `release`
    (once); a context manager for the local loader."""

    def __init__(self, ctx: NodeContext, node: SourceLoadNode, parts: int, cap: int):
        self._ctx, self._group = ctx, node.instance or ""
        wanted = max(0, min(parts, cap) - 1)
        self._borrowed = ctx.borrow(self._group, wanted) if wanted else 0
        self.width = 1 + self._borrowed

    def release(self) -> None:
        borrowed, self._borrowed = self._borrowed, 0
        if borrowed:
            self._ctx.give_back(self._group, borrowed)

    def __enter__(self) -> ReadLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class LandedParts(Generic[T]):
    """What landed of each partitioned load in this run, by partition, with the fingerprint of the slice it
    read: the load's next attempt keeps a partition only when it still reads the same slice. The thread
    backend keeps the partition's result (its table stays in staging), the Ray backend its manifest."""

    def __init__(self) -> None:
        self._landed: dict[tuple[str, int], tuple[str, T]] = {}
        self._lock = threading.Lock()

    def keep(self, node: str, index: int, fingerprint: str, value: T) -> None:
        with self._lock:
            self._landed[(node, index)] = (fingerprint, value)

    def kept(self, node: str, partition: Partition) -> T | None:
        with self._lock:
            found = self._landed.get((node, partition.index))
        if found is None or found[0] != partition_fingerprint(partition):
            return None
        return found[1]

    def count(self, node: str) -> int:
        with self._lock:
            return sum(1 for name, _ in self._landed if name == node)

    def forget(self, node: str) -> None:
        with self._lock:
            for key in [k for k in self._landed if k[0] == node]:
                del self._landed[key]


class PartitionsFailed(Exception):
    """Some partitions failed; `results` holds how every partition ended (landed ones keep their tables)."""

    def __init__(self, first: BaseException, results: list[PartitionResult]):
        super().__init__(str(first))
        self.first = first
        self.results = results


def load_partitions(
    ctx: NodeContext,
    node: SourceLoadNode,
    attempt: int,
    reuse: Reuse | None,
    cur: duckdb.DuckDBPyConnection,
    partitions: list[Partition],
    tier: Tier,
) -> NodeOutput:
    """Land a partitioned load on this process's partition workers. Each partition lands in its own table,
    then they are combined into the staging table: the first is renamed (no copy), the others appended by
    column name. A partition that landed stays in staging when another fails, so the next attempt (or a
    retry) can resume past it. Raises PartitionsFailed when any failed, after all ended."""
    landed = _landed_parts(partitions, reuse)
    if reuse is not None and len(landed) < len(reuse.staged.parts):
        ctx.note(
            f"{len(reuse.staged.parts) - len(landed)} partition(s) of {node.name} that landed in run "
            f"{reuse.staged.run_id} no longer match this run's partitions; reading them again"
        )
    kept = ctx.landed.count(node.name)
    if kept:
        ctx.note(
            f"attempt {attempt} of {node.name} keeps the {kept} partition(s) that landed in its "
            "earlier attempt(s) and reads the others"
        )
    cap = node.work.endpoint.max_concurrency or PARTITION_WORKERS
    with ReadLease(ctx, node, len(partitions), cap) as lease:
        pool = _Workers(ctx, node.work.endpoint)
        try:
            results = _land_all(_lander(ctx, node, pool, tier, reuse, landed), partitions, lease.width)
        finally:
            pool.close()
    ctx.landed.forget(node.name)
    target = quote_ident(node.table)
    _combine(cur, target, [node.part_table(p.index) for p in partitions])
    failpoints.hit("source.landed", node.name)
    capture = capture_watermark(ctx, cur, node.table, node.work.request)
    rows = count_rows(cur, target) if capture is not None else sum(r.rows for r in results)
    return NodeOutput(rows=rows, tier=tier, partitions=results, watermark=capture)


def _lander(
    ctx: NodeContext,
    node: SourceLoadNode,
    pool: _Workers,
    tier: Tier,
    reuse: Reuse | None,
    landed: dict[int, StagedPart],
) -> Callable[[Partition], PartitionResult]:
    """The job that lands one partition on a worker of `pool`: the table an earlier attempt of this run
    landed when it still holds the same slice and rows, else a copy of the failed run's landed partition
    (`landed`, on a retry), else a fresh extraction."""

    def land(partition: Partition) -> PartitionResult:
        table = node.part_table(partition.index)
        worker = pool.mine()
        part_cur = worker.cursor
        try:
            earlier = ctx.landed.kept(node.name, partition)
            if earlier is not None and _kept_rows(part_cur, table) == earlier.rows:
                return PartitionResult(partition.index, earlier.rows, fingerprint=earlier.fingerprint)
            if reuse is not None and partition.index in landed:
                rows = _copy_part(ctx, part_cur, reuse, landed[partition.index], table)
                if rows is not None:
                    fingerprint = partition_fingerprint(partition)
                    result = PartitionResult(
                        partition.index, rows, fingerprint=fingerprint, provenance=Provenance.REUSED
                    )
                    ctx.landed.keep(node.name, partition.index, fingerprint, result)
                    return result
            result = land_one(ctx, node, worker.connector(), part_cur, partition, tier)
            ctx.landed.keep(node.name, partition.index, result.fingerprint or "", result)
            return result
        except Exception:
            drop_quietly(part_cur, quote_ident(table))
            raise

    return land


def _kept_rows(cur: duckdb.DuckDBPyConnection, table: str) -> int | None:
    """The rows of a partition table an earlier attempt landed; None when it is gone."""
    try:
        return count_rows(cur, quote_ident(table))
    except Exception:  # dropped meanwhile: read the partition again
        return None


def _land_all(
    land: Callable[[Partition], PartitionResult], partitions: list[Partition], workers: int
) -> list[PartitionResult]:
    """Land every partition, `workers` at a time; when any fails, PartitionsFailed after all have ended."""
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pz-partition") as pool:
        futures = [pool.submit(land, p) for p in partitions]
        wait(futures)
    results: list[PartitionResult] = []
    first: BaseException | None = None
    for partition, future in zip(partitions, futures, strict=True):
        exc = future.exception()
        if exc is None:
            results.append(future.result())
        else:
            first = first or exc
            results.append(PartitionResult(partition.index, 0, NodeStatus.FAILED))
    if first is not None:
        raise PartitionsFailed(first, results)
    return results


def _landed_parts(partitions: list[Partition], reuse: Reuse | None) -> dict[int, StagedPart]:
    """The failed run's landed partitions that read exactly what this run's partition of that index reads."""
    if reuse is None or reuse.whole:
        return {}
    now = {p.index: partition_fingerprint(p) for p in partitions}
    return {p.index: p for p in reuse.staged.parts if now.get(p.index) == p.fingerprint}


def _copy_part(
    ctx: NodeContext, cur: duckdb.DuckDBPyConnection, reuse: Reuse, part: StagedPart, table: str
) -> int | None:
    """Copy one landed partition; None (with a note) when it cannot be reused and must be extracted."""
    staged = reuse.staged
    try:
        rows = reuse.store.copy(cur, staged.run_id, part.table, table)
    except ReuseUnavailable as exc:
        ctx.note(
            f"partition {part.index} of {staged.table} from run {staged.run_id}: {exc}; extracting it again"
        )
        return None
    if rows != part.rows:
        drop_quietly(cur, quote_ident(table))
        ctx.note(
            f"partition {part.index} of {staged.table} from run {staged.run_id}: copied {rows} rows, the run "
            f"recorded {part.rows}; extracting it again"
        )
        return None
    return rows


class _Worker:
    """What one partition worker thread keeps for every partition it takes: a cursor of staging and a
    connector (opened at its first extraction). A thousand small partitions cost a thousand reads, not a
    thousand connections, ATTACHes and catalog lookups as well; the connector may keep state in staging
    (an ATTACH) through the cursor, which lives until the connector is closed."""

    def __init__(self, ctx: NodeContext, point: Endpoint):
        self._ctx, self._point = ctx, point
        self.cursor = ctx.cursor()
        self._connector: Connector | None = None

    def connector(self) -> Connector:
        if self._connector is None:
            self._connector = make_connector(self._ctx, self._point)
        return self._connector

    def close(self) -> None:
        try:
            if self._connector is not None:
                self._connector.close()
        finally:
            self._ctx.release(self.cursor)


class _Workers:
    """The partition workers of one load, one `_Worker` per thread. Each partition first passes the run's
    interrupt gate (`ctx.cursor()` refuses once the run was interrupted), so after Ctrl-C or a fail-fast
    no worker starts another partition; a partition already reading is interrupted through its worker's
    cursor."""

    def __init__(self, ctx: NodeContext, point: Endpoint):
        self._ctx, self._point = ctx, point
        self._local = threading.local()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()

    def mine(self) -> _Worker:
        self._ctx.release(self._ctx.cursor())  # the interrupt gate: PZ0514 once the run was interrupted
        worker: _Worker | None = getattr(self._local, "worker", None)
        if worker is None:
            worker = self._local.worker = _Worker(self._ctx, self._point)
            with self._lock:
                self._all.append(worker)
        return worker

    def close(self) -> None:
        for worker in self._all:
            with contextlib.suppress(Exception):
                worker.close()


def _combine(cur: duckdb.DuckDBPyConnection, target: str, tables: list[str]) -> None:
    """The partition tables become the staging table, in partition order, in one transaction (one commit
    instead of two per partition): the first is renamed (no copy), the others appended by column name,
    COMBINE_CHUNK tables per INSERT (a UNION ALL BY NAME keeps their order)."""
    cur.execute("BEGIN TRANSACTION")
    try:
        cur.execute(f"ALTER TABLE {quote_ident(tables[0])} RENAME TO {target}")
        rest = tables[1:]
        for start in range(0, len(rest), COMBINE_CHUNK):
            chunk = rest[start : start + COMBINE_CHUNK]
            union = " UNION ALL BY NAME ".join(f"SELECT * FROM {quote_ident(t)}" for t in chunk)
            cur.execute(f"INSERT INTO {target} BY NAME {union}")
            for table in chunk:
                cur.execute(f"DROP TABLE {quote_ident(table)}")
        cur.execute("COMMIT")
    except BaseException:
        cur.execute("ROLLBACK")
        raise
