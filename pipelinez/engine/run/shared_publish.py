"""The local executor with a shared staging (`--staging URL`, `PZ_STAGING_URL` or `engine.staging.url`): a
retry on another worker reuses what this run loaded.

Nodes run on the local thread pool and read the run's own staging.duckdb as always; in addition, each source
load that lands is published to the shared staging as Parquet plus `_manifest.json` (`StagingRoot.publish`,
the Ray tasks' layout: `<staging>/<run-id>/<table>/`), inside DuckDB, in the node's attempt, before the node
counts as done (zstd at its fastest level: the publishing is on the node's path). A load whose table cannot
be published fails (PZ0712, transient when the store says so), so run_results.json never calls a load
reusable that the shared staging does not hold. A partitioned load that fails part-way publishes its landed
partitions, which a retry resumes past.

`pz retry` on another worker (its run history hydrated from the shared state backend) finds the staging in
the failed run's `args.staging` and reads the loads back with `SharedStagingStore`.
"""

from __future__ import annotations

from pipelinez.compile.nodes import SourceLoadNode
from pipelinez.core.vocabulary import NodeStatus
from pipelinez.engine.distributed.remote_task import versions
from pipelinez.engine.run.backend import Attempt, AttemptResult, ThreadBackend, run_attempt
from pipelinez.engine.run.context import RunContext
from pipelinez.engine.run.failures import NodeFailure
from pipelinez.engine.staging.manifest import ManifestPartition
from pipelinez.engine.staging.shared_staging import ZSTD_FAST, StagingRoot, transient_io


class PublishingBackend(ThreadBackend):
    """The thread backend, publishing each landed source load to the shared staging `root`."""

    def __init__(self, ctx: RunContext, threads: int, root: StagingRoot):
        super().__init__(ctx, threads)
        self.root = root
        cur = ctx.staging.cursor()
        try:
            root.attach(cur)  # an s3:// staging: httpfs and its secret in the run's staging database
        finally:
            cur.close()

    def run(self, item: Attempt) -> AttemptResult:
        result = run_attempt(self.ctx, item)
        node = item.planned.node
        if not isinstance(node, SourceLoadNode):
            return result
        if result.failure is not None:
            self._publish_landed(item, node, result.failure)
            return result
        if result.output is None:
            return result
        partitions = tuple(
            ManifestPartition(p.index, p.rows, p.fingerprint) for p in (result.output.partitions or [])
        )
        try:
            self._publish(item, node.table, partitions)
        except Exception as exc:
            failure = NodeFailure(
                "PZ0712",
                f"{item.name}: its staged data could not be published on the shared staging "
                f"{self.root.location}: {type(exc).__name__}: {exc}",
                transient=isinstance(exc, OSError) and transient_io(exc),
            )
            return AttemptResult(item.name, item.attempt, failure=failure)
        return result

    def _publish(self, item: Attempt, table: str, partitions: tuple[ManifestPartition, ...] = ()) -> None:
        node = item.planned.node
        cur = self.ctx.cursor()
        try:
            self.root.publish(
                cur,
                item.run_id,
                table,
                node=node.name,
                node_id=node.id,
                partitions=partitions,
                versions=versions(),
                compression=ZSTD_FAST,  # the node waits for it: zstd's fastest level (about 1.5x the size)
            )
        finally:
            self.ctx.release(cur)

    def _publish_landed(self, item: Attempt, node: SourceLoadNode, failure: NodeFailure) -> None:
        """A partitioned load that failed part-way: its landed partitions, for a retry to resume past. One
        that cannot be published is extracted again by that retry."""
        for part in failure.partitions or ():
            if part.status != NodeStatus.SUCCESS:
                continue
            try:
                self._publish(item, node.part_table(part.index))
            except Exception as exc:
                self.ctx.note(
                    f"partition {part.index} of {item.name} could not be published on the shared staging "
                    f"{self.root.location} ({type(exc).__name__}); a retry on another worker reads it again"
                )
