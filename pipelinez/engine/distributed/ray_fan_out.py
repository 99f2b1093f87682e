"""A partitioned source load on Ray: one task per partition.

As many partitions run at once as its instance has free slots of `max_concurrency`, its own included
(`partitions.ReadLease`); each publishes its partition's table, and the load's table is then a manifest
listing their files (no row copied). A partition that landed stays landed for the node's next attempt in the
run (`partitions.LandedParts`), so a worker lost mid-partition costs one `node_retry` that re-reads only the
partitions that had not landed.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from concurrent.futures import Future
from typing import TYPE_CHECKING

from pipelinez.compile.nodes import SourceLoadNode
from pipelinez.connectors.sdk import Partition
from pipelinez.core.vocabulary import NodeStatus, Tier
from pipelinez.engine.distributed.ray_results import UNREADABLE, lost, unreadable
from pipelinez.engine.distributed.remote_task import RemoteResult
from pipelinez.engine.nodes.landing import NodeOutput, attempt_tier, make_connector
from pipelinez.engine.nodes.partitions import ReadLease, partition_fingerprint
from pipelinez.engine.run.backend import Attempt, AttemptResult, Done
from pipelinez.engine.run.failures import NodeFailure, classify
from pipelinez.engine.staging.manifest import TableManifest
from pipelinez.engine.state.run_results import PartitionResult

if TYPE_CHECKING:
    from pipelinez.engine.distributed.ray_backend import RayBackend


def fan_out(backend: RayBackend, item: Attempt, done: Done) -> None:
    """Ask the source for the load's partitions (on a driver thread: not the scheduler's), then run one task
    per partition; a load of one partition (or none) is one task."""
    node = item.planned.node
    assert isinstance(node, SourceLoadNode)
    request = node.work.request
    try:
        connector = make_connector(backend.ctx, node.work.endpoint)
        try:
            parts = connector.partitions(request)
            tier = attempt_tier(connector, node.work)
        finally:
            connector.close()
    except Exception as exc:
        failure = classify(exc, "PZ0505", f"source '{node.source}' dataset '{node.dataset}'")
        done(AttemptResult(item.name, item.attempt, failure=failure))
        return
    if len(parts) <= 1:
        backend.submit_task(item, done)
        return
    lease = ReadLease(backend.ctx, node, len(parts), node.work.endpoint.max_concurrency or len(parts))
    FanOut(backend, item, done, parts, tier, lease).start()


class FanOut:
    """One attempt of a partitioned load: its partitions' tasks, as many at once as its lease of the
    instance's slots allows; `done` once."""

    def __init__(
        self,
        backend: RayBackend,
        item: Attempt,
        done: Done,
        parts: list[Partition],
        tier: Tier,
        lease: ReadLease,
    ):
        self.backend = backend
        self.item = item
        self.done = done
        self.parts = parts
        self.tier = tier
        self.lease = lease
        self.limit = lease.width
        node = item.planned.node
        assert isinstance(node, SourceLoadNode)
        self.node = node
        self.pending: deque[Partition] = deque()
        self.landed: dict[int, TableManifest] = {}
        self.failed: dict[int, NodeFailure] = {}
        self.running = 0
        self.finished = False  # `done` was called (exactly once)
        self.lock = threading.Lock()

    def start(self) -> None:
        for part in self.parts:  # landed in an earlier attempt of this run, reading the same slice: kept
            kept = self.backend.landed.kept(self.node.name, part)
            if kept is not None:
                self.landed[part.index] = kept
            else:
                self.pending.append(part)
        self._launch_more()

    def _launch_more(self) -> None:
        while True:
            with self.lock:
                if self.backend.interrupted or not self.pending or self.running >= self.limit:
                    over = self.running == 0 and (not self.pending or self.backend.interrupted)
                    finished = over and not self.finished
                    self.finished = self.finished or finished
                    break
                part = self.pending.popleft()
                self.running += 1
            try:
                task = self.backend.task(self.item, part, self.tier)
            except NodeFailure as failure:
                self._one_ended(part, failure=failure)
                continue
            key = f"{self.item.name}#{part.index}"
            self.backend.launch(key, task, lambda f, p=part: self._task_ended(p, f))  # type: ignore[misc]
        if finished:
            self._finish()

    def _task_ended(self, part: Partition, future: Future[RemoteResult]) -> None:
        try:
            remote = future.result()
        except BaseException as exc:
            self._one_ended(part, failure=lost(self.item, exc, self.backend.cluster.redactor))
            return
        for note in remote.notes:
            self.backend.ctx.note(note)
        if remote.result.failure is not None:
            self._one_ended(part, failure=remote.result.failure)
        elif not remote.published:
            self._one_ended(part, failure=NodeFailure("PZ0712", f"{self.item.name}: partition not published"))
        else:
            self._one_ended(part, manifest=remote.published[0])

    def _one_ended(
        self, part: Partition, manifest: TableManifest | None = None, failure: NodeFailure | None = None
    ) -> None:
        with self.lock:
            self.running -= 1
            if manifest is not None:
                self.landed[part.index] = manifest
                self.backend.landed.keep(self.node.name, part.index, partition_fingerprint(part), manifest)
            else:
                assert failure is not None
                self.failed[part.index] = failure
        self._launch_more()

    def _finish(self) -> None:
        self.lease.release()  # no partition of this attempt reads any more
        results = [
            PartitionResult(
                p.index,
                self.landed[p.index].rows,
                fingerprint=partition_fingerprint(p),
            )
            if p.index in self.landed
            else PartitionResult(p.index, 0, NodeStatus.FAILED)
            for p in self.parts
        ]
        if self.failed or len(self.landed) < len(self.parts):
            self._fail(results)
        else:
            self._combine(results)

    def _fail(self, results: list[PartitionResult]) -> None:
        """Some partition failed (or the run was interrupted): the attempt fails with the first failure."""
        first = self.failed[min(self.failed)] if self.failed else NodeFailure("PZ0514", "interrupted")
        for manifest in self.landed.values():  # landed partitions stay staged: a retry resumes past them
            try:
                self.backend.views.register(manifest)
            except UNREADABLE:
                continue
        failure = dataclasses.replace(first, partitions=tuple(results))
        self.done(AttemptResult(self.item.name, self.item.attempt, failure=failure))

    def _combine(self, results: list[PartitionResult]) -> None:
        """Every partition landed: the load's table is a manifest listing their files."""
        backend, item = self.backend, self.item
        try:
            manifest = backend.root.combine(
                item.run_id,
                self.node.table,
                [self.landed[p.index] for p in self.parts],
                node=self.node.name,
                node_id=self.node.id,
            )
            backend.views.register(manifest)
        except UNREADABLE as exc:
            message = f"{item.name}: its partitions could not be combined"
            failure = unreadable(message, exc, backend.cluster.redactor)
            self.done(AttemptResult(item.name, item.attempt, failure=failure))
            return
        output = NodeOutput(rows=manifest.rows, tier=self.tier, partitions=results)
        self.done(AttemptResult(item.name, item.attempt, output=output))
