"""Turning whatever a node raised into a NodeFailure: code, message, transient, retry_after.

Rules: a PzConnectorError says itself whether it is transient. A DuckDB error from the native tier is
transient only when the closed list in `core.transient` matches its summary. Anything else is terminal:
an unknown exception is never silently retried.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from pipelinez.connectors.sdk_delivery import DeliveryCheckpoint
from pipelinez.connectors.sdk_errors import ConnectorError
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.duck_messages import condense
from pipelinez.core.json_types import JsonObject
from pipelinez.core.printable import printable
from pipelinez.core.transient import is_transient_native
from pipelinez.core.vocabulary import NodeError
from pipelinez.engine.state.run_results import PartitionResult

# what a node error message leaves out (a DuckDB error's full text); a run writes it to .pz/runs/<id>/pz.log
DEBUG_LOG = logging.getLogger("pipelinez.node_errors")


@dataclass(frozen=True)
class StreamedQuery:
    """How a streamed pipeline's query ended, as the sink write that ran it found out: the rows it computed,
    or its error (the pipeline's own status follows this, never the write's view creation)."""

    rows: int = 0
    error: NodeError | None = None


@dataclass(frozen=True)
class NodeFailure(Exception):
    code: str
    message: str
    transient: bool = False
    retry_after: float | None = None
    batches_committed: int | None = None
    rows: int = 0  # rows the failed node reports (a failed check: its offending rows)
    checkpoint: DeliveryCheckpoint | None = None  # checkpointed delivery: the batches acknowledged so far
    partitions: tuple[PartitionResult, ...] | None = None  # a partitioned load: which partitions landed
    # the worker running the attempt was lost (a remote backend's node died): such a failure may be transient
    # for the retry policy, but it says nothing about the source/sink instance, so a breaker never counts it
    worker_lost: bool = False
    # a sink write reading a streamed pipeline: whether that pipeline's query computed (None: never run)
    streamed: StreamedQuery | None = None

    @property
    def blames_instance(self) -> bool:
        """A transient failure of the external system itself: what a circuit breaker counts."""
        return self.transient and not self.worker_lost

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", printable(self.message))  # one line, whatever names it quotes

    @property
    def error(self) -> NodeError:
        """What run_results.json and the events record of this failure."""
        return NodeError(self.code, self.message, self.transient)

    def to_dict(self) -> JsonObject:
        return self.error.to_dict()

    def __reduce__(self) -> tuple[Any, ...]:
        # a frozen dataclass exception does not survive pickle by default (a remote worker returns it)
        return (
            NodeFailure,
            (
                self.code,
                self.message,
                self.transient,
                self.retry_after,
                self.batches_committed,
                self.rows,
                self.checkpoint,
                self.partitions,
                self.worker_lost,
                self.streamed,
            ),
        )

    def __str__(self) -> str:
        return self.message


def duck_summary(message: str) -> str:
    """A DuckDB message condensed to its first meaningful line (plus DuckDB's suggestion, if any)."""
    return condense(message)


def _one_line(what: str, message: str) -> str:
    """A multi-line message condensed for the user; the full text goes to the run's debug log."""
    if "\n" not in message:
        return message
    DEBUG_LOG.info("%s: full message:\n%s", what, message)
    return duck_summary(message)


def _about(what: str, message: str) -> str:
    """`what: message`, unless the message already names `what` (connectors often do)."""
    return message if message.startswith(what) else f"{what}: {message}"


def _is_duck_error(exc: BaseException) -> bool:
    import duckdb

    return isinstance(exc, duckdb.Error)


BUDGET_EXHAUSTED = "out of memory within its share of engine.memory_limit, with nothing DuckDB could spill"
OUT_OF_MEMORY = (
    "Out of Memory Error"  # DuckDB's OutOfMemoryException, also inside a connector's wrapped error
)


def _checkpoint_of(exc: BaseException) -> DeliveryCheckpoint | None:
    return exc.checkpoint if isinstance(exc, ConnectorError) else None


def classify(exc: BaseException, default_code: str, what: str) -> NodeFailure:
    """`what` names the node for the message, e.g. "sink 'warehouse' output 'orders'"."""
    failure = _classified(exc, default_code, what)
    if not isinstance(exc, NodeFailure) and out_of_memory(exc):
        # PZ0714: DuckDB could neither fit the node's work in its share of engine.memory_limit nor spill it
        message = f"{failure.message}; {BUDGET_EXHAUSTED}"
        return dataclasses.replace(failure, code="PZ0714", message=message, transient=False)
    return failure


def out_of_memory(exc: BaseException) -> bool:
    """DuckDB's OutOfMemoryException, raised as such or inside a connector's wrapped error."""
    import duckdb

    if isinstance(exc, duckdb.OutOfMemoryException):
        return True
    return isinstance(exc, PzConnectorError | duckdb.Error) and OUT_OF_MEMORY in str(exc)


def _classified(exc: BaseException, default_code: str, what: str) -> NodeFailure:
    if isinstance(exc, NodeFailure):
        return exc
    if isinstance(exc, PzConnectorError):
        return NodeFailure(
            exc.code if exc.code and (exc.code.startswith("PZ05") or exc.code == "PZ0312") else default_code,
            _about(what, _one_line(what, exc.message)),
            exc.is_transient,
            exc.retry_after,
            exc.batches_committed if isinstance(exc, ConnectorError) else None,
            exc.rows_committed if isinstance(exc, ConnectorError) else 0,  # a failed append: what landed
            _checkpoint_of(exc),
        )
    if _is_duck_error(exc):
        message = str(exc)
        return NodeFailure(default_code, _about(what, _one_line(what, message)), is_transient_native(message))
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        return NodeFailure(default_code, f"{what}: {exc.strerror or exc}{where}")
    return NodeFailure(default_code, f"{what}: {type(exc).__name__}: {exc}")
