"""A lease held in an object store: the lock of a shared state backend, over any store's conditional calls
(`files.conditional`), so it works the same on S3 and Azure Blob.

The lease is one small JSON object naming its holder (host, pid, run id, a token unique to this lease
instance), when the holder last wrote it (`written_at`, the holder's clock) and its length. Each step is
one conditional request, so the store decides every race:

- acquire: create the object with `If-None-Match: *`; when one exists and has expired, replace it with
  `If-Match` on the ETag read (of two racing takers exactly one wins, the other sees PZ0590);
- renew: rewrite it with `If-Match` on the ETag of our last write (from a heartbeat thread while held);
  a conflict means another holder took it over: the lease is lost (PZ0591), never shared;
- release: delete it with `If-Match` (a lease taken over meanwhile is left to its new holder).

Clocks. A lease expires at its writer's `written_at` plus its length, judged by the reader's clock. A live
holder renews every third of the length, so its lease is never older than a third of it (plus a request's
time): a taker whose clock is ahead of the holder's by less than two thirds of the length never takes over
a live lease. The holder judges its own deadline by its own clock only (no skew there), and stops calling
itself the holder once a whole length has passed without a successful renewal. Assumption: the clocks of
the machines sharing a lease differ by well under a third of its length (NTP keeps them within
milliseconds; leases last tens of seconds).

A call that got no answer may have taken effect: before concluding a conflict, the lease re-reads the
object, and one carrying its own token is its own write.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from types import TracebackType

from pipelinez.connectors.files.conditional import ConditionalObjects, Conflict, Versioned, Written
from pipelinez.connectors.sdk_errors import ObjectStoreError
from pipelinez.core.diagnostics import PzConnectorError

__all__ = ["LeaseError", "LeaseHolder", "ObjectLease"]

_ATTEMPTS = 3  # acquire: create, or take over, this many times before naming the holder that won


@dataclass(frozen=True)
class LeaseHolder:
    """What a lease object says: who holds it, since when (their clock) and for how long."""

    host: str
    pid: int
    run_id: str
    token: str
    written_at: float  # seconds since the epoch, the writer's clock
    seconds: float  # the lease's length

    @property
    def expires_at(self) -> float:
        return self.written_at + self.seconds

    def expired(self, now: float) -> bool:
        return now > self.expires_at

    def describe(self) -> str:
        until = datetime.fromtimestamp(self.expires_at, UTC).isoformat(timespec="seconds")
        return f"run {self.run_id or '?'} (host {self.host}, pid {self.pid}), until {until}"

    def encode(self) -> bytes:
        return json.dumps({"pz_lease": 1, **asdict(self)}, sort_keys=True).encode()


class LeaseError(PzConnectorError):
    """PZ0590 (held by `holder`), PZ0591 (lost) or PZ0594 (the object is not a lease)."""

    def __init__(self, message: str, code: str, holder: LeaseHolder | None = None):
        super().__init__(message, code=code)
        self.holder = holder


def decode(name: str, data: bytes) -> LeaseHolder:
    """The lease object's holder; PZ0594 when the bytes are not a lease pz wrote."""
    try:
        doc = json.loads(data)
        if not isinstance(doc, dict) or doc.get("pz_lease") != 1:
            raise ValueError("no pz_lease marker")
        return LeaseHolder(
            str(doc["host"]),
            int(doc["pid"]),
            str(doc["run_id"]),
            str(doc["token"]),
            float(doc["written_at"]),
            float(doc["seconds"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise LeaseError(
            f"{name} is not a pz lease object ({type(exc).__name__}): if no run is live, delete it",
            "PZ0594",
        ) from None


class ObjectLease:
    """The lease object `key` of `objects`, for run `run_id`, `seconds` long. Use as a context manager
    (acquire, renew from a heartbeat thread, release), or call the steps. `clock`: seconds since the epoch
    (tests pass a skewed one)."""

    def __init__(
        self,
        objects: ConditionalObjects,
        key: str,
        run_id: str,
        seconds: float = 60.0,
        *,
        clock: Callable[[], float] = time.time,
    ):
        if seconds <= 0:
            raise ValueError("a lease lasts a positive number of seconds")
        self.objects, self.key, self.run_id, self.seconds = objects, key, run_id, seconds
        self.clock = clock
        self.token = uuid.uuid4().hex
        self.host, self.pid = socket.gethostname(), os.getpid()  # who the lease object names as holder
        self.name = objects.name(key)
        self._etag: str | None = None
        self._written_at = 0.0
        self._lost: LeaseError | None = None
        self._renew_error = ""  # the store's last answer to a failed renewal
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- state -------------------------------------------------------------------------------------
    @property
    def held(self) -> bool:
        """Whether this lease is ours now: acquired, not lost, and renewed within its length (our clock)."""
        with self._lock:
            return self._etag is not None and self._lost is None and self.clock() <= self._deadline()

    def check(self) -> None:
        """Raise PZ0591 unless the lease is held (call before each step the lease guards)."""
        with self._lock:
            if self._lost is not None:
                raise self._lost
            if self._etag is None:
                raise LeaseError(f"the lease {self.name} is not held by this process", "PZ0591")
            if self.clock() > self._deadline():
                raise self._lose(self._overdue())

    def holder(self) -> LeaseHolder | None:
        """Who the lease object names now (None: nobody holds it)."""
        current = self.objects.read(self.key)
        return decode(self.name, current.data) if current is not None else None

    # -- steps -------------------------------------------------------------------------------------
    def acquire(self) -> None:
        """Create the lease, or take it over when it has expired; PZ0590 naming the holder otherwise."""
        last: LeaseHolder | None = None
        for _ in range(_ATTEMPTS):
            written_at = self.clock()
            result = self.objects.put_if_absent(self.key, self._doc(written_at))
            if isinstance(result, Written):
                return self._took(result.etag, written_at)
            current = self.objects.read(self.key)
            if current is None:
                continue  # released meanwhile: create it again
            last = decode(self.name, current.data)
            if last.token == self.token:  # our own create, whose answer was lost
                return self._took(current.etag, last.written_at)
            if not last.expired(self.clock()):
                break
            written_at = self.clock()
            result = self.objects.put_if_match(self.key, self._doc(written_at), current.etag)
            if isinstance(result, Written):
                return self._took(result.etag, written_at)
        raise self._held_by(last)

    def renew(self) -> None:
        """Rewrite the lease with a new `written_at` (If-Match on our last write); PZ0591 when another
        holder took it over. A store error propagates (the heartbeat tries again until the deadline)."""
        with self._lock:
            if self._lost is not None:
                raise self._lost
            etag = self._etag
        if etag is None:
            raise LeaseError(f"the lease {self.name} is not held by this process", "PZ0591")
        written_at = self.clock()
        result = self.objects.put_if_match(self.key, self._doc(written_at), etag)
        if isinstance(result, Conflict):
            current = self._own(self.objects.read(self.key))
            if current is None:
                with self._lock:
                    raise self._lose("another holder took it over (or deleted it)")
            result = self.objects.put_if_match(self.key, self._doc(written_at), current.etag)
            if isinstance(result, Conflict):
                with self._lock:
                    raise self._lose("another holder took it over")
        with self._lock:
            self._etag, self._written_at, self._renew_error = result.etag, written_at, ""

    def release(self) -> bool:
        """Stop renewing and delete the lease if it is still ours; False when it was not (taken over)."""
        self.stop_heartbeat()
        with self._lock:
            etag, self._etag = self._etag, None
        if etag is None:
            return False
        if isinstance(self.objects.delete_if_match(self.key, etag), Written):
            return True
        current = self._own(self.objects.read(self.key))  # our last renewal's answer may have been lost
        return current is not None and isinstance(
            self.objects.delete_if_match(self.key, current.etag), Written
        )

    # -- heartbeat ---------------------------------------------------------------------------------
    def start_heartbeat(self, every: float | None = None) -> None:
        """Renew from a daemon thread every `every` seconds (a third of the length unless given)."""
        interval = every if every is not None else self.seconds / 3
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._beat, args=(interval,), name=f"pz-lease-{self.key}", daemon=True
        )
        self._thread.start()

    def stop_heartbeat(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._thread = None

    def _beat(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.renew()
            except LeaseError:
                return  # lost: `check` and `held` say so
            except ObjectStoreError as exc:  # try again next beat, until the deadline passes
                with self._lock:
                    self._renew_error = str(exc)
                    if self.clock() > self._deadline():
                        self._lose(self._overdue())
                        return

    def __enter__(self) -> ObjectLease:
        self.acquire()
        self.start_heartbeat()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    # -- helpers -----------------------------------------------------------------------------------
    def _doc(self, written_at: float) -> bytes:
        holder = LeaseHolder(self.host, self.pid, self.run_id, self.token, written_at, self.seconds)
        return holder.encode()

    def _took(self, etag: str, written_at: float) -> None:
        with self._lock:
            self._etag, self._written_at, self._lost = etag, written_at, None

    def _own(self, current: Versioned | None) -> Versioned | None:
        """`current` when it carries our token (our own write), else None."""
        if current is None:
            return None
        return current if decode(self.name, current.data).token == self.token else None

    def _overdue(self) -> str:
        why = "it was not renewed within its length"
        return f"{why} (the last renewal failed: {self._renew_error})" if self._renew_error else why

    def _deadline(self) -> float:
        return self._written_at + self.seconds

    def _lose(self, why: str) -> LeaseError:
        """Mark the lease lost (the caller holds `_lock`) and return the PZ0591 error."""
        if self._lost is None:
            self._lost = LeaseError(
                f"the lease {self.name} is no longer held by run {self.run_id}: {why}; stop the work it "
                "guards and start it again",
                "PZ0591",
            )
        return self._lost

    def _held_by(self, holder: LeaseHolder | None) -> LeaseError:
        who = holder.describe() if holder is not None else "another holder"
        return LeaseError(
            f"the lease {self.name} is held by {who}: wait for that run to end (a dead holder's lease is "
            "taken over once it expires)",
            "PZ0590",
            holder,
        )
