"""Client-side pacing of a dataset's requests (`rate_limit: { requests: N, per: <duration> }`): before each
request, wait until fewer than N requests started in the last `per` seconds. Pacing, not retrying: a request
is never sent twice here; a throttled answer is still the engine's transient error.

Pacers live for the process and are shared by every read of the same URL with the same limit, so the
schema fetch and the load of one dataset (or a retried attempt) count against one window.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from pipelinez.connectors.http.settings import RateLimit


class Pacer:
    def __init__(
        self,
        limit: RateLimit,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.limit = limit
        self._clock = clock
        self._sleep = sleep
        self._starts: deque[float] = deque()
        self._lock = threading.Lock()

    def wait(self) -> float:
        """Block until one more request may start, record its start, and return the seconds waited."""
        waited = 0.0
        with self._lock:
            now = self._clock()
            while self._starts and now - self._starts[0] >= self.limit.per:
                self._starts.popleft()
            if len(self._starts) >= self.limit.requests:
                # the oldest start leaves the window at oldest + per: start then, never earlier
                oldest = self._starts.popleft()
                waited = max(0.0, oldest + self.limit.per - now)
                if waited > 0:
                    self._sleep(waited)
                now = max(self._clock(), oldest + self.limit.per)
            self._starts.append(now)
            return waited


_PACERS: dict[tuple[str, RateLimit], Pacer] = {}
_PACERS_LOCK = threading.Lock()


def pacer_for(url: str, limit: RateLimit) -> Pacer:
    """The process's pacer of `url` under `limit`."""
    with _PACERS_LOCK:
        return _PACERS.setdefault((url, limit), Pacer(limit))
