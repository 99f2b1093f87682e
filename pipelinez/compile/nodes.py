"""The nodes of a compiled project. Frozen; one class per node kind."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipelinez.config.model import CheckSpec, RetrySpec
from pipelinez.core.diagnostics import Place
from pipelinez.core.vocabulary import NodeKind

SOURCE_LOAD = NodeKind.SOURCE_LOAD
PIPELINE = NodeKind.PIPELINE
CHECK = NodeKind.CHECK
SINK_WRITE = NodeKind.SINK_WRITE


@dataclass(frozen=True)
class Node:
    name: str
    kind: NodeKind
    id: str
    deps: tuple[str, ...]  # names of nodes this one needs
    place: Place
    tags: tuple[str, ...] = ()

    @property
    def instance(self) -> str | None:
        """`source:<name>` / `sink:<name>` for nodes that use an external instance."""
        return None


@dataclass(frozen=True)
class SourceLoadNode(Node):
    source: str = ""
    dataset: str = ""
    table: str = ""  # staging table name (unquoted)
    retry: tuple[RetrySpec, ...] = ()  # nearest last: instance, dataset

    @property
    def instance(self) -> str | None:
        return f"source:{self.source}"


@dataclass(frozen=True)
class PipelineNode(Node):
    pipeline: str = ""
    sql: str = ""  # the runnable query (refs resolved), line layout of the file
    display_sql: str = ""  # the same with secrets masked
    sinks: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class CheckNode(Node):
    target: str = ""  # the pipeline or source load it checks (node name)
    check: CheckSpec | None = None
    sql: str = ""  # returns (failing BIGINT, detail VARCHAR)


@dataclass(frozen=True)
class SinkWriteNode(Node):
    sink: str = ""
    output: str = ""
    pipeline: str = ""  # the pipeline whose table it writes
    retry: tuple[RetrySpec, ...] = field(default_factory=tuple)

    @property
    def instance(self) -> str | None:
        return f"sink:{self.sink}"
