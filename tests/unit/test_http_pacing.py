"""The http source's client-side pacing on a fake clock: at most N request starts in any window."""

from __future__ import annotations

from pipelinez.connectors.http.pacing import Pacer
from pipelinez.connectors.http.settings import RateLimit


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_at_most_n_starts_in_any_window() -> None:
    clock = FakeClock()
    pacer = Pacer(RateLimit(3, 1.0), clock=clock, sleep=clock.sleep)
    starts = []
    for _ in range(10):
        pacer.wait()
        starts.append(clock.now)
        clock.now += 0.01  # each request takes 10 ms
    for i in range(len(starts) - 3):
        assert starts[i + 3] - starts[i] >= 1.0 - 1e-9
    assert starts[:3] == [0.0, 0.01, 0.02]  # the first N go at once


def test_no_wait_when_requests_are_slower_than_the_limit() -> None:
    clock = FakeClock()
    pacer = Pacer(RateLimit(2, 1.0), clock=clock, sleep=clock.sleep)
    for _ in range(5):
        assert pacer.wait() == 0.0
        clock.now += 0.6
    assert clock.slept == []
