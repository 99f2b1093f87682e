"""Checkpointed delivery (sdk_delivery.deliver) and the http connector's small parsers."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pipelinez.connectors.http.client import retry_after, shown, with_params
from pipelinez.connectors.http.settings import json_path
from pipelinez.connectors.http.sink import BodyEncoder, rechunk
from pipelinez.connectors.http.source import next_link
from pipelinez.connectors.sdk_delivery import (
    AckedBatch,
    DeliveryCheckpoint,
    deliver,
    failed_with,
    fingerprint,
)
from pipelinez.core.diagnostics import PzConnectorError


def bodies(*texts: str) -> list[tuple[int, bytes]]:
    return [(len(t), t.encode()) for t in texts]


class Destination:
    def __init__(self, fail_at: int | None = None):
        self.got: list[bytes] = []
        self.fail_at = fail_at

    def send(self, body: bytes) -> None:
        if self.fail_at is not None and len(self.got) == self.fail_at:
            self.fail_at = None
            raise PzConnectorError("HTTP 503", is_transient=True, retry_after=2)
        self.got.append(body)


def test_a_failure_carries_the_batches_acknowledged_before_it() -> None:
    dest = Destination(fail_at=2)
    with pytest.raises(PzConnectorError) as caught:
        deliver(bodies("aa", "bb", "cc", "dd"), dest.send, 2, None, lambda _m: None)
    checkpoint = caught.value.checkpoint  # type: ignore[attr-defined]
    assert [b.index for b in checkpoint.batches] == [0, 1]
    assert checkpoint.batches[1].fingerprint == fingerprint(b"bb")
    assert caught.value.batches_committed == 2  # type: ignore[attr-defined]
    assert caught.value.retry_after == 2 and caught.value.is_transient


def test_matching_fingerprints_resume_past_the_acknowledged_batches() -> None:
    first = Destination(fail_at=2)
    with pytest.raises(PzConnectorError) as caught:
        deliver(bodies("aa", "bb", "cc", "dd"), first.send, 2, None, lambda _m: None)
    notes: list[str] = []
    again = Destination()
    done = deliver(bodies("aa", "bb", "cc", "dd"), again.send, 2, caught.value.checkpoint, notes.append)  # type: ignore[attr-defined]
    assert again.got == [b"cc", b"dd"]
    assert [b.index for b in done.batches] == [0, 1, 2, 3]
    assert notes and "resuming past 2 acknowledged batch(es) (4 rows)" in notes[0]


@pytest.mark.parametrize(
    "now",
    [("aa", "XX", "cc"), ("aa",), ("ZZ", "bb", "cc")],
    ids=["second-differs", "fewer-batches", "first-differs"],
)
def test_any_difference_sends_everything_again(now: tuple[str, ...]) -> None:
    acked = DeliveryCheckpoint(
        2, (AckedBatch(0, 2, fingerprint(b"aa")), AckedBatch(1, 2, fingerprint(b"bb")))
    )
    notes: list[str] = []
    dest = Destination()
    done = deliver(bodies(*now), dest.send, 2, acked, notes.append)
    assert dest.got == [t.encode() for t in now]  # in order, the spooled ones first
    assert [b.fingerprint for b in done.batches] == [fingerprint(t.encode()) for t in now]
    assert "sending every batch again" in notes[0]


def test_a_changed_batch_size_sends_everything_again() -> None:
    acked = DeliveryCheckpoint(3, (AckedBatch(0, 2, fingerprint(b"aa")),))
    notes: list[str] = []
    dest = Destination()
    deliver(bodies("aa", "bb"), dest.send, 2, acked, notes.append)
    assert dest.got == [b"aa", b"bb"]
    assert "batch size changed (3 -> 2 rows)" in notes[0]


def test_checkpoint_round_trips_and_ignores_garbage() -> None:
    cp = DeliveryCheckpoint(5, (AckedBatch(0, 5, "sha256:x"),))
    assert DeliveryCheckpoint.from_dict(cp.to_dict()) == cp
    assert DeliveryCheckpoint.from_dict(None) is None
    assert DeliveryCheckpoint.from_dict({"batches": [{"index": "?"}]}) is None


def test_rechunk_cuts_exact_batches_in_order() -> None:
    batches = [pa.record_batch({"i": list(range(s, s + n))}) for s, n in ((0, 3), (3, 0), (3, 7), (10, 1))]
    reader = pa.RecordBatchReader.from_batches(batches[0].schema, batches)
    cut = list(rechunk(reader, 4))
    assert [t.num_rows for t in cut] == [4, 4, 3]
    assert [v for t in cut for v in t.column("i").to_pylist()] == list(range(11))


def test_bodies_keep_row_order_and_types() -> None:
    table = pa.table({"id": [2, 1], "name": ["b", None]})
    enc = BodyEncoder("json")
    assert enc.encode(table) == b'[{"id":2,"name":"b"},{"id":1,"name":null}]'
    enc.close()
    nd = BodyEncoder("ndjson")
    assert nd.encode(table) == b'{"id":2,"name":"b"}\n{"id":1,"name":null}\n'
    nd.close()


def test_small_parsers() -> None:
    assert (
        next_link(('<https://a/x?page=2>; rel="next", <https://a/x?page=9>; rel="last"',))
        == "https://a/x?page=2"
    )
    assert next_link(('<https://a/x?page=1>; rel="prev"',)) is None
    assert next_link(("</p?page=3>; rel=next",)) == "/p?page=3"
    assert retry_after("7") == 7.0
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert retry_after("soon") is None and retry_after(None) is None
    assert (
        shown("https://user:pw@api.example.org:8443/v1/x?api_key=SECRET")
        == "https://api.example.org:8443/v1/x"
    )
    assert with_params("http://h/p?a=1&b=2", {"b": "3"}) == "http://h/p?a=1&b=3"
    assert with_params("http://h/p?k=old", {"k": "new", "z": "1"}, keep=True) == "http://h/p?k=old&z=1"
    assert json_path("data.items") == "$.data.items" and json_path("$") is None and json_path("[0]") == "$[0]"


def test_a_failure_and_a_work_item_carry_their_checkpoint_across_a_pickle() -> None:
    import pickle

    from pipelinez.engine.run.failures import NodeFailure, classify

    cp = DeliveryCheckpoint(2, (AckedBatch(0, 2, "sha256:ab"),))
    exc = failed_with(PzConnectorError("HTTP 503", is_transient=True, retry_after=1.5), cp)  # typed fields
    failure = classify(exc, "PZ0501", "sink 'api' output 'events'")
    assert failure.checkpoint == cp and failure.retry_after == 1.5
    back = pickle.loads(pickle.dumps(failure))
    assert isinstance(back, NodeFailure) and back.checkpoint == cp


def test_nan_and_infinity_are_refused_not_sent_as_invalid_json() -> None:
    enc = BodyEncoder("json")
    assert enc.encode(pa.table({"x": [1.5, None]})) == b'[{"x":1.5},{"x":null}]'
    with pytest.raises(PzConnectorError, match="'x' hold NaN or Infinity"):
        enc.encode(pa.table({"x": [1.0, float("nan")], "y": [1, 2]}))
    enc.close()
