"""Which pipelines are streamed into their sink instead of being stored in staging.

A pipeline's result is stored as a staging table only when something needs it stored. It is streamed (kept as
a view the sink write reads, so the rows are computed once, while they are written) when:

- its only consumer in the whole project is one sink write, and that write is in the plan;
- no check reads it (checks gate the write, so they and the write must see the same stored rows);
- its SQL holds no secret value (a view's definition is kept, in plain text, in the staging file; a table
  keeps only rows);
- the write is a replace into a connector that swaps it in atomically (`capabilities.atomic_replace`), or an
  append into one that appends in one transaction (`capabilities.atomic_append`: the DuckDB file): a query
  that fails half way (a cast that fails on some row) then fails the write with nothing written, as it would
  have failed the pipeline before the write. Merge checks its keys (PZ0520, PZ0516) on the result before it
  writes, so those passes and the write must read the same stored rows. An append into a connector that
  does not declare `atomic_append` keeps its pipeline stored: postgres and mysql commit batch by batch, and
  localfiles, s3 and azureblob (which add nothing after a failed write either) have not declared it. Any
  other strategy keeps it stored too.

Every other pipeline is materialized, and the plan says why.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from pipelinez.compile.nodes import CheckNode, Node, PipelineNode, SinkWriteNode
from pipelinez.core.vocabulary import Strategy


@dataclass(frozen=True)
class Storage:
    """How a pipeline's result is kept in a run: streamed into `into` (a sink write's name), or stored."""

    into: str | None
    why: str

    @property
    def streamed(self) -> bool:
        return self.into is not None


def consumers_of(nodes: Mapping[str, Node]) -> dict[str, list[Node]]:
    """Every node's readers: the nodes that list it as a dependency."""
    out: dict[str, list[Node]] = {name: [] for name in nodes}
    for node in nodes.values():
        for dep in node.deps:
            if dep in out:
                out[dep].append(node)
    return out


def storage(pipeline: PipelineNode, readers: list[Node], planned: Collection[str]) -> Storage:
    """Whether `pipeline` is streamed, and the reason the plan shows either way."""
    if pipeline.work.display_sql and pipeline.work.display_sql != pipeline.sql:
        return Storage(None, "stored in staging: its SQL holds a secret, which a view would keep in the file")
    checks = [r for r in readers if isinstance(r, CheckNode)]
    if checks:
        return Storage(None, f"stored in staging: {len(checks)} check(s) read it before its sink writes do")
    if not readers:
        return Storage(None, "stored in staging: no sink write or pipeline reads it")
    if len(readers) > 1:
        return Storage(None, f"stored in staging: {len(readers)} nodes read it, so it is computed once")
    reader = readers[0]
    if not isinstance(reader, SinkWriteNode):
        return Storage(None, f"stored in staging: pipeline '{reader.name}' reads it")
    if reader.name not in planned:
        return Storage(None, f"stored in staging: its sink write {reader.name} is not selected")
    strategy = reader.work.strategy
    if strategy == Strategy.VIEW:
        return Storage(None, f"stored in staging: {reader.name} creates a view in its sink, it reads no rows")
    if strategy == Strategy.MERGE:
        return Storage(None, "stored in staging: merge checks its keys on the stored result first")
    if strategy not in (Strategy.REPLACE, Strategy.APPEND):  # a strategy streaming was not judged for
        return Storage(None, f"stored in staging: {reader.name} writes with {strategy}")
    caps = reader.work.endpoint.caps
    if strategy == Strategy.APPEND and not caps.atomic_append:
        return Storage(None, f"stored in staging: {strategy} may commit part of a result that fails half way")
    if strategy == Strategy.REPLACE and not caps.atomic_replace:
        return Storage(None, f"stored in staging: {reader.name} does not replace atomically")
    return Storage(reader.name, f"streamed into {reader.name}: its only reader, so not stored in staging")
