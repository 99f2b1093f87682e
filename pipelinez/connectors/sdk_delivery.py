"""Checkpointed delivery: what a sink records of the batches its destination acknowledged, so that a retry
resumes past them.

A connector with the `checkpointed_delivery` capability cuts its input into batches of `batch_rows` rows in
the order the engine streams them, and records each batch the destination acknowledged as an `AckedBatch`
with a fingerprint of exactly what was sent. A failed write raises a `ConnectorError` carrying the
`DeliveryCheckpoint` so far (its field `checkpoint`); a successful one returns it in `WriteResult`. The
engine writes it to run_results.json, and the next attempt, or a `pz retry` of the same node, hands it back
as `OutputRequest.resume_from`. The connector then skips the acknowledged batches only when the
fingerprints of what it would send now are the same, in order; otherwise it sends everything again.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pipelinez.connectors.sdk_errors import ConnectorError
from pipelinez.core.diagnostics import PzConnectorError


@dataclass(frozen=True)
class AckedBatch:
    """One batch the destination acknowledged: its position, its rows, a digest of the bytes sent."""

    index: int
    rows: int
    fingerprint: str  # "sha256:<hex>" of the request body, which holds the batch's rows in order

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "rows": self.rows, "fingerprint": self.fingerprint}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> AckedBatch:
        return AckedBatch(int(data["index"]), int(data["rows"]), str(data["fingerprint"]))


@dataclass(frozen=True)
class DeliveryCheckpoint:
    """The acknowledged batches of one write, in order (always a prefix: batches 0..n-1)."""

    batch_rows: int
    batches: tuple[AckedBatch, ...] = ()

    @property
    def rows(self) -> int:
        return sum(b.rows for b in self.batches)

    def acknowledged(self, batch: AckedBatch) -> DeliveryCheckpoint:
        return DeliveryCheckpoint(self.batch_rows, (*self.batches, batch))

    def to_dict(self) -> dict[str, Any]:
        return {"batch_rows": self.batch_rows, "batches": [b.to_dict() for b in self.batches]}

    @staticmethod
    def from_dict(data: Any) -> DeliveryCheckpoint | None:
        """The checkpoint a run recorded, or None when `data` is not one (absent, or unreadable)."""
        if not isinstance(data, dict):
            return None
        try:
            batches = tuple(AckedBatch.from_dict(b) for b in data.get("batches") or ())
            return DeliveryCheckpoint(int(data["batch_rows"]), batches)
        except (KeyError, TypeError, ValueError):
            return None


def failed_with(error: PzConnectorError, checkpoint: DeliveryCheckpoint) -> ConnectorError:
    """`error`, carrying the batches acknowledged before it (what the engine records of a failed write)."""
    return ConnectorError.after_commits(
        error,
        batches_committed=len(checkpoint.batches),
        rows_committed=checkpoint.rows,
        checkpoint=checkpoint,
    )


def fingerprint(body: bytes) -> str:
    """The fingerprint of one batch: a digest of the bytes sent, which hold its rows in order."""
    return "sha256:" + hashlib.sha256(body).hexdigest()


def deliver(
    batches: Iterable[tuple[int, bytes]],
    send: Callable[[bytes], None],
    batch_rows: int,
    resume: DeliveryCheckpoint | None,
    note: Callable[[str], None],
) -> DeliveryCheckpoint:
    """Send each `(rows, body)` in order with `send` (which returns once the destination acknowledged it, or
    raises PzConnectorError), and return the checkpoint of everything acknowledged. A failure is re-raised
    carrying the checkpoint so far.

    With `resume`, the batches it acknowledged are skipped only when the batches that would be sent now
    have the same fingerprints, all of them, in order; otherwise everything is sent again, with a note.
    The bodies of the batches under comparison are spooled to a temporary file (not memory) until the
    comparison is decided, so a mismatch found at batch k can still send batches 0..k-1.
    """
    expected: tuple[AckedBatch, ...] = ()
    if resume is not None and resume.batches:
        if resume.batch_rows == batch_rows:
            expected = resume.batches
        else:
            note(
                f"sending every batch again: the batch size changed ({resume.batch_rows} -> {batch_rows} "
                f"rows) since {len(resume.batches)} batch(es) were acknowledged"
            )
    delivery = _Delivery(send, batch_rows, expected, note)
    try:
        for rows, body in batches:
            delivery.offer(rows, body)
        if delivery.spool is not None:  # fewer batches now than were acknowledged
            delivery.mismatch()
    finally:
        if delivery.spool is not None:
            delivery.spool.close()
    return delivery.checkpoint


class _Delivery:
    """One write's delivery: the checkpoint so far and, while a resume is being decided, the spool of the
    batches that matched the acknowledged ones."""

    def __init__(
        self,
        send: Callable[[bytes], None],
        batch_rows: int,
        expected: tuple[AckedBatch, ...],
        note: Callable[[str], None],
    ):
        self.send = send
        self.batch_rows = batch_rows
        self.expected = expected
        self.note = note
        self.checkpoint = DeliveryCheckpoint(batch_rows)
        self.spool: _Spool | None = _Spool() if expected else None

    def offer(self, rows: int, body: bytes) -> None:
        """Send one batch, or spool it while it matches the acknowledged batch at its position."""
        digest = fingerprint(body)
        if self.spool is not None:
            ack = self.expected[self.spool.count]
            if ack.fingerprint == digest and ack.rows == rows:
                self.spool.add(rows, body, digest)
                if self.spool.count == len(self.expected):
                    self.checkpoint = DeliveryCheckpoint(self.batch_rows, self.expected)
                    self.note(
                        f"resuming past {len(self.expected)} acknowledged batch(es) ({self.checkpoint.rows} "
                        "rows): what would be sent matches their fingerprints"
                    )
                    self.spool.close()
                    self.spool = None
                return
            self.mismatch()
        self.send_one(rows, body, digest)

    def send_one(self, rows: int, body: bytes, digest: str) -> None:
        try:
            self.send(body)
        except PzConnectorError as exc:
            raise failed_with(exc, self.checkpoint) from None
        self.checkpoint = self.checkpoint.acknowledged(AckedBatch(len(self.checkpoint.batches), rows, digest))

    def mismatch(self) -> None:
        """Send every spooled batch after all: what would be sent differs from what was acknowledged."""
        spool = self.spool
        assert spool is not None
        self.note(
            f"sending every batch again: what would be sent no longer matches the {len(self.expected)} "
            "batch(es) acknowledged before (their fingerprints differ)"
        )
        for rows, body, digest in spool.replay():
            self.send_one(rows, body, digest)
        spool.close()
        self.spool = None


class _Spool:
    """Batch bodies kept on disk while a resume is being decided."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="pz-delivery-")  # noqa: SIM115 (closed by close())
        self._entries: list[tuple[int, int, str]] = []  # rows, length, fingerprint

    @property
    def count(self) -> int:
        return len(self._entries)

    def add(self, rows: int, body: bytes, digest: str) -> None:
        self._file.write(body)
        self._entries.append((rows, len(body), digest))

    def replay(self) -> Iterable[tuple[int, bytes, str]]:
        self._file.seek(0)
        for rows, length, digest in self._entries:
            yield rows, self._file.read(length), digest

    def close(self) -> None:
        self._file.close()
