"""The circuit breaker of one source/sink instance, as a pure state machine: every method takes the clock
time `now` and returns what changed, so the unit tests drive it with a fake clock.

Closed: attempts go; `failure_threshold` transient failures in a row trip it Open. Open: nothing is
admitted until `cool_down` has elapsed, and never before the latest deadline a connector's `retry_after` set
since the last success (an early failure's `Retry-After: 120` still holds when a later one trips it), then the
breaker turns Half-Open and admits exactly one probe. The probe's success closes it; its transient failure
reopens it for a fresh cool-down. Only failures that blame the instance count (`Outcome.FAILED`): a terminal
failure (bad SQL, a type error) or a lost worker says nothing about the instance's health and neither trips
nor closes the breaker.

Waiting never spends a node's attempts: a node the breaker holds back is told when to ask again. Each time
the breaker opens is a new *cycle*; a node that has already waited through `max_cycles` cycles and would
need another is refused (the engine turns that into the retryable PZ0506).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from pipelinez.compile.policy import BreakerPolicy
from pipelinez.core.vocabulary import BreakerState as State


@dataclass(frozen=True)
class Transition:
    """A state change, published as a `breaker_state_changed` event."""

    instance: str
    from_state: State
    to_state: State
    reason: str
    retry_in: float | None = None  # Open: seconds until the next probe may go


@dataclass(frozen=True)
class Go:
    """Admitted; `probe`: this attempt is the one Half-Open probe."""

    probe: bool = False


@dataclass(frozen=True)
class Wait:
    """Not yet: ask again at clock time `until` (or sooner, when another attempt of the instance ends)."""

    until: float


@dataclass(frozen=True)
class GiveUp:
    """The node waited through `cycles` cool-down cycles and the breaker is open again."""

    cycles: int
    last_error: str | None


Admission = Go | Wait | GiveUp


class Outcome(StrEnum):
    OK = "ok"  # the attempt succeeded: the instance works
    FAILED = "failed"  # a transient failure that blames the instance
    NEUTRAL = "neutral"  # terminal failure, lost worker, cancelled: says nothing about the instance


@dataclass
class Breaker:
    instance: str  # `source:<name>` / `sink:<name>`
    policy: BreakerPolicy
    state: State = State.CLOSED
    failures: int = 0  # consecutive transient failures while Closed
    open_until: float = 0.0
    cycle: int = 0  # how many times the breaker opened
    probe: object | None = None  # the node holding the Half-Open probe
    last_error: str | None = None  # the failure that opened it last, for PZ0506
    not_before: float = 0.0  # the latest deadline a connector's retry_after set since the last success
    _waited: dict[object, set[int]] = field(default_factory=dict)  # node -> cycles it waited through

    # -- admission ---------------------------------------------------------------------------------------
    def admit(self, key: object, now: float) -> tuple[Admission, Transition | None]:
        """May node `key` start an attempt now?"""
        if self.state == State.CLOSED:
            return Go(), None
        if self.state == State.OPEN:
            if now < self.open_until:
                return self._hold(key, self.open_until)
            change = self._move(State.HALF_OPEN, "cool-down elapsed: one probe may go")
            self.probe = key
            return Go(probe=True), change
        if self.probe is None or self.probe == key:
            self.probe = key
            return Go(probe=True), None
        # a probe is in flight: wait for its outcome (the engine asks again when it ends)
        return self._hold(key, now + max(self.policy.cool_down, 1.0))

    def _hold(self, key: object, until: float) -> tuple[Admission, Transition | None]:
        waited = self._waited.setdefault(key, set())
        if self.cycle not in waited and len(waited) >= self.policy.max_cycles:
            return GiveUp(len(waited), self.last_error), None
        waited.add(self.cycle)
        return Wait(until), None

    # -- outcomes ----------------------------------------------------------------------------------------
    def record(
        self,
        key: object,
        outcome: Outcome,
        now: float,
        retry_after: float | None = None,
        error: str | None = None,
    ) -> Transition | None:
        """An attempt of node `key` on this instance ended."""
        was_probe = self.probe == key
        if was_probe:
            self.probe = None
        if outcome == Outcome.OK:
            self.failures = 0
            self.not_before = 0.0
            self._waited.pop(key, None)
            if self.state != State.CLOSED:
                return self._move(
                    State.CLOSED, "the probe succeeded" if was_probe else "an attempt succeeded"
                )
            return None
        if outcome == Outcome.NEUTRAL:
            return None
        self.last_error = error or self.last_error
        if retry_after:
            self.not_before = max(self.not_before, now + retry_after)
        if self.state == State.CLOSED:
            self.failures += 1
            if self.failures >= self.policy.failure_threshold:
                return self._open(now, f"{self.failures} transient failures in a row")
            return None
        if self.state == State.HALF_OPEN and was_probe:
            return self._open(now, "the probe failed")
        # an attempt that started before the breaker opened: it only floors the cool-down
        if self.state == State.OPEN:
            self.open_until = max(self.open_until, self.not_before)
        return None

    def _open(self, now: float, reason: str) -> Transition:
        """Open for `cool_down`, and never sooner than any retry_after of the failure streak asked."""
        self.open_until = max(now + self.policy.cool_down, self.not_before)
        wait = self.open_until - now
        self.cycle += 1
        self.failures = 0
        return self._move(State.OPEN, reason, retry_in=wait)

    def _move(self, to: State, reason: str, retry_in: float | None = None) -> Transition:
        change = Transition(self.instance, self.state, to, reason, retry_in)
        self.state = to
        return change
