"""The connector SDK's typed errors: what landed before a failure travels as fields the engine reads, and
every field survives a process boundary (a process pool, a Ray task)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from pipelinez.connectors.azureblob.rest import AzureRestError
from pipelinez.connectors.http.client import HttpStatusError
from pipelinez.connectors.s3.rest import S3RestError
from pipelinez.connectors.sdk_delivery import AckedBatch, DeliveryCheckpoint, deliver, failed_with
from pipelinez.connectors.sdk_errors import ConnectorError, ObjectStoreError, is_transient_store_error
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.engine.run.failures import classify

CHECKPOINT = DeliveryCheckpoint(10, (AckedBatch(0, 10, "sha256:aa"), AckedBatch(1, 4, "sha256:bb")))


def _round_trip(value: Any) -> Any:
    return pickle.loads(pickle.dumps(value))


def test_a_connector_error_keeps_every_field_across_a_pickle() -> None:
    error = ConnectorError(
        "reset",
        is_transient=True,
        retry_after=2.0,
        code="PZ0501",
        batches_committed=2,
        rows_committed=14,
        checkpoint=CHECKPOINT,
    )
    back = _round_trip(error)
    assert type(back) is ConnectorError and isinstance(back, PzConnectorError)
    fields = ("message", "is_transient", "retry_after", "code", "batches_committed", "rows_committed")
    assert [getattr(back, f) for f in fields] == ["reset", True, 2.0, "PZ0501", 2, 14]
    assert back.checkpoint == CHECKPOINT and str(back) == "reset"


def test_after_commits_wraps_a_plain_error_and_keeps_a_typed_one() -> None:
    plain = PzConnectorError("lost", is_transient=True, retry_after=3.0, code="PZ0505")
    typed = ConnectorError.after_commits(
        plain, batches_committed=1, rows_committed=5, message="lost (1 batch)"
    )
    assert type(typed) is ConnectorError
    assert (typed.message, str(typed), typed.is_transient, typed.retry_after, typed.code) == (
        "lost (1 batch)",
        "lost (1 batch)",
        True,
        3.0,
        "PZ0505",
    )
    status = HttpStatusError("HTTP 503", 503, is_transient=True)
    same = failed_with(status, CHECKPOINT)
    assert same is status and same.status == 503  # a connector's own error class is kept
    assert (same.batches_committed, same.rows_committed, same.checkpoint) == (2, 14, CHECKPOINT)


def test_the_engine_reads_a_failed_delivery_from_the_fields() -> None:
    sent: list[bytes] = []

    def send(body: bytes) -> None:
        if len(sent) == 2:
            raise PzConnectorError("HTTP 500", is_transient=True)
        sent.append(body)

    with pytest.raises(ConnectorError) as caught:
        deliver([(3, b"a"), (3, b"b"), (2, b"c")], send, 3, None, lambda _note: None)
    failure = classify(_round_trip(caught.value), "PZ0501", "sink 'api' output 'events'")
    assert (failure.transient, failure.batches_committed, failure.rows) == (True, 2, 6)
    assert failure.checkpoint is not None and [b.rows for b in failure.checkpoint.batches] == [3, 3]


def test_a_plain_connector_error_reports_nothing_committed() -> None:
    failure = classify(PzConnectorError("boom", code="PZ0501"), "PZ0501", "sink 'wh' output 'o'")
    assert (failure.batches_committed, failure.rows, failure.checkpoint) == (None, 0, None)


@pytest.mark.parametrize(
    "error",
    [
        S3RestError("S3 copy: HTTP 503 SlowDown", True, "SlowDown"),
        AzureRestError("Azure put", False, 409, "X"),
    ],
    ids=["s3", "azure"],
)
def test_object_store_errors_are_typed_and_pickle(error: ObjectStoreError) -> None:
    back = _round_trip(error)
    assert type(back) is type(error) and isinstance(back, OSError)
    assert (str(back), back.transient, back.code) == (str(error), error.transient, error.code)
    assert is_transient_store_error(back) is error.transient
    assert not is_transient_store_error(OSError("disk full"))
