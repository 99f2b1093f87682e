"""The nodes of a compiled project: frozen, picklable, one class per node kind.

A node is its place in the graph (name, kind, deps, where it is declared, tags) plus its work item
(`compile.work`): what it does, resolved once at compile. Its `id` is the content hash of exactly that
(`compile.ids`). The properties below are views of the work item, never a second copy of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipelinez.compile.work import CheckWork, Endpoint, PipelineWork, SinkWriteWork, SourceLoadWork
from pipelinez.config.model import CheckSpec
from pipelinez.core.diagnostics import Place
from pipelinez.core.vocabulary import NodeKind

SOURCE_LOAD = NodeKind.SOURCE_LOAD
PIPELINE = NodeKind.PIPELINE
CHECK = NodeKind.CHECK
SINK_WRITE = NodeKind.SINK_WRITE

NOT_HASHED: dict[str, str] = {"id": "exclude"}  # graph and display fields: not part of what the node does


@dataclass(frozen=True)
class Node:
    """A node of the compiled graph: its name, kind, content id, dependencies and place."""

    name: str
    kind: NodeKind
    id: str = field(metadata=NOT_HASHED)
    deps: tuple[str, ...] = field(metadata=NOT_HASHED)  # names of nodes this one needs (their ids are hashed)
    place: Place = field(metadata=NOT_HASHED)
    tags: tuple[str, ...] = field(default=(), metadata=NOT_HASHED)

    @property
    def instance(self) -> str | None:
        """`source:<name>` / `sink:<name>` for nodes that use an external instance."""
        return None

    @property
    def endpoint(self) -> Endpoint | None:
        """The external instance the node reads or writes (its connector, connection, capabilities)."""
        return None


@dataclass(frozen=True)
class SourceLoadNode(Node):
    """A node loading one source dataset into staging."""

    work: SourceLoadWork = field(kw_only=True)

    @property
    def source(self) -> str:
        return self.work.endpoint.instance

    @property
    def dataset(self) -> str:
        return self.work.request.name

    @property
    def table(self) -> str:
        return self.work.table

    @property
    def instance(self) -> str | None:
        return f"source:{self.source}"

    @property
    def endpoint(self) -> Endpoint | None:
        return self.work.endpoint

    def part_table(self, index: int) -> str:
        """The staging table of partition `index` of a partitioned load (every backend, retries too)."""
        return f"{self.table}__part{index}"


@dataclass(frozen=True)
class PipelineNode(Node):
    """A node running one pipeline's query in staging."""

    work: PipelineWork = field(kw_only=True)
    sinks: tuple[tuple[str, str], ...] = field(default=(), kw_only=True, metadata=NOT_HASHED)

    @property
    def pipeline(self) -> str:
        return self.name

    @property
    def sql(self) -> str:
        return self.work.sql

    @property
    def display_sql(self) -> str:
        return self.work.display_sql


@dataclass(frozen=True)
class CheckNode(Node):
    """A node running one data check."""

    work: CheckWork = field(kw_only=True)

    @property
    def target(self) -> str:
        return self.work.target

    @property
    def check(self) -> CheckSpec:
        return self.work.check

    @property
    def sql(self) -> str:
        return self.work.sql


@dataclass(frozen=True)
class SinkWriteNode(Node):
    """A node writing one pipeline's result to a sink output."""

    work: SinkWriteWork = field(kw_only=True)

    @property
    def sink(self) -> str:
        return self.work.endpoint.instance

    @property
    def output(self) -> str:
        return self.work.request.name

    @property
    def pipeline(self) -> str:
        return self.work.source_table

    @property
    def instance(self) -> str | None:
        return f"sink:{self.sink}"

    @property
    def endpoint(self) -> Endpoint | None:
        return self.work.endpoint
