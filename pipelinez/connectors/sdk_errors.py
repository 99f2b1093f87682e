"""The typed errors of the connector SDK: what a connector failure tells the engine, as fields.

`ConnectorError` is a `PzConnectorError` that also says what landed before the failure: the batches and
rows a write committed (`batches_committed`, `rows_committed`) and, with checkpointed delivery, the
checkpoint of the batches the destination acknowledged (`checkpoint`). The engine reads these fields (see
`engine/failures.py`); nothing is patched onto an exception after the fact. `ObjectStoreError` is an
object store's failed call (an `OSError`, as the file system layer raises), with `transient`.

Both pickle with every field, so they cross a process boundary (a process pool, a Ray task) unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipelinez.core.diagnostics import PzConnectorError, reduce_exception

if TYPE_CHECKING:
    from pipelinez.connectors.sdk_delivery import DeliveryCheckpoint


class ConnectorError(PzConnectorError):
    """A connector failure with what landed before it. `batches_committed` is None when the write commits
    no batches of its own (replace, merge: all or nothing)."""

    def __init__(
        self,
        message: str,
        *,
        is_transient: bool = False,
        retry_after: float | None = None,
        code: str | None = None,
        batches_committed: int | None = None,
        rows_committed: int = 0,
        checkpoint: DeliveryCheckpoint | None = None,
    ):
        super().__init__(message, is_transient=is_transient, retry_after=retry_after, code=code)
        self.batches_committed = batches_committed
        self.rows_committed = rows_committed
        self.checkpoint = checkpoint

    @classmethod
    def after_commits(
        cls,
        error: PzConnectorError,
        *,
        batches_committed: int,
        rows_committed: int,
        checkpoint: DeliveryCheckpoint | None = None,
        message: str | None = None,
    ) -> ConnectorError:
        """`error` (its message, or `message`; its transience, retry_after and code) with what was committed
        before it: `error` itself when it is a ConnectorError already (its class kept), else a new one."""
        if isinstance(error, ConnectorError):
            typed = error
        else:
            typed = ConnectorError(
                error.message, is_transient=error.is_transient, retry_after=error.retry_after, code=error.code
            )
        if message is not None:
            typed.message = message
            typed.args = (message,)
        typed.batches_committed = batches_committed
        typed.rows_committed = rows_committed
        typed.checkpoint = checkpoint
        return typed


class ObjectStoreError(OSError):
    """An object store call failed. `transient`: another attempt may succeed."""

    def __init__(self, message: str, transient: bool):
        super().__init__(message)
        self.transient = transient

    def __reduce__(self) -> tuple[Any, ...]:
        return reduce_exception(self)


def is_transient_store_error(exc: BaseException) -> bool:
    """Whether `exc` is an object store's failed call that another attempt may get through."""
    return isinstance(exc, ObjectStoreError) and exc.transient
