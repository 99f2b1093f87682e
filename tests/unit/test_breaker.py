"""The circuit breaker's state machine and the retry-policy cascade, table-driven with a fake clock; then the
breaker on the generic scheduler (fake nodes, virtual time): held nodes hold no worker, spend no attempt,
and end PZ0506 after the bounded wait."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from pipelinez.compile.policy import (
    ENGINE_DEFAULT,
    BreakerPolicy,
    RetryPolicy,
    breaker_policy,
    declares_retry,
    effective_policy,
)
from pipelinez.config.model import BreakerSpec, RetrySpec
from pipelinez.engine.resilience.breaker import Breaker, GiveUp, Go, Outcome, State, Transition, Wait
from pipelinez.engine.resilience.breaker_gate import outcome_of
from pipelinez.engine.resilience.retry import backoff_delay, retry_delay
from pipelinez.engine.run.failures import NodeFailure
from pipelinez.engine.run.scheduler import Defer, Finished, Graph, Refuse, RetryIn, Scheduler, Verdict
from tests.unit.test_scheduler import FakeClock

# --- the state machine ------------------------------------------------------------------------------------
# steps: (operation, node, time, expected)
#   ("admit", key, t, "go" | "probe" | ("wait", until) | "give_up")
#   ("ok" | "fail" | "neutral", key, t, expected state after) ; "fail" may carry retry_after as ("fail", ra)
Step = tuple[Any, str, float, Any]

SCENARIOS: dict[str, tuple[BreakerPolicy, list[Step]]] = {
    "closed admits everything and a success resets the count": (
        BreakerPolicy(3, 10.0),
        [
            ("admit", "a", 0, "go"),
            ("fail", "a", 1, State.CLOSED),
            ("fail", "a", 2, State.CLOSED),
            ("ok", "b", 3, State.CLOSED),  # resets: the next two failures do not trip it
            ("fail", "a", 4, State.CLOSED),
            ("fail", "a", 5, State.CLOSED),
            ("admit", "c", 6, "go"),
        ],
    ),
    "threshold consecutive transient failures trip it; held nodes wait for the cool-down": (
        BreakerPolicy(2, 10.0),
        [
            ("fail", "a", 0, State.CLOSED),
            ("fail", "b", 1, State.OPEN),
            ("admit", "c", 2, ("wait", 11.0)),
            ("admit", "a", 10.9, ("wait", 11.0)),
        ],
    ),
    "terminal failures and lost workers neither trip nor reset it": (
        BreakerPolicy(2, 10.0),
        [
            ("fail", "a", 0, State.CLOSED),
            ("neutral", "b", 1, State.CLOSED),
            ("neutral", "b", 2, State.CLOSED),
            ("fail", "a", 3, State.OPEN),
        ],
    ),
    "after the cool-down exactly one probe goes; its success closes it": (
        BreakerPolicy(1, 5.0),
        [
            ("fail", "a", 0, State.OPEN),
            ("admit", "b", 5, "probe"),
            ("admit", "c", 5, ("wait", 10.0)),  # a probe is in flight
            ("admit", "b", 6, "probe"),  # the probe's own node may ask again
            ("ok", "b", 7, State.CLOSED),
            ("admit", "c", 7, "go"),
        ],
    ),
    "a failed probe reopens it for a fresh cool-down": (
        BreakerPolicy(1, 5.0),
        [
            ("fail", "a", 0, State.OPEN),
            ("admit", "a", 5, "probe"),
            ("fail", "a", 6, State.OPEN),
            ("admit", "b", 7, ("wait", 11.0)),
            ("admit", "b", 11, "probe"),
        ],
    ),
    "retry_after floors the cool-down, also from an attempt ending while open": (
        BreakerPolicy(1, 5.0),
        [
            (("fail", 60.0), "a", 0, State.OPEN),
            ("admit", "b", 30, ("wait", 60.0)),
            (("fail", 90.0), "c", 40, State.OPEN),  # started before the breaker opened
            ("admit", "b", 61, ("wait", 130.0)),
            ("admit", "b", 130, "probe"),
        ],
    ),
    "an earlier failure's retry_after still holds when a later failure trips it": (
        BreakerPolicy(2, 10.0),
        [
            (("fail", 120.0), "a", 0, State.CLOSED),
            ("fail", "b", 1, State.OPEN),
            ("admit", "c", 2, ("wait", 120.0)),
            ("admit", "c", 119, ("wait", 120.0)),
            ("admit", "c", 120, "probe"),
        ],
    ),
    "a success forgets the streak's retry_after": (
        BreakerPolicy(2, 10.0),
        [
            (("fail", 120.0), "a", 0, State.CLOSED),
            ("ok", "a", 1, State.CLOSED),
            ("fail", "a", 2, State.CLOSED),
            ("fail", "b", 3, State.OPEN),
            ("admit", "c", 4, ("wait", 13.0)),
        ],
    ),
    "a failed probe's fresh cool-down keeps a retry_after deadline still ahead": (
        BreakerPolicy(1, 5.0),
        [
            (("fail", 8.0), "a", 0, State.OPEN),
            ("admit", "a", 8, "probe"),
            (("fail", 30.0), "a", 9, State.OPEN),
            ("admit", "b", 10, ("wait", 39.0)),
        ],
    ),
    "a shorter retry_after never shortens the cool-down": (
        BreakerPolicy(1, 30.0),
        [
            (("fail", 2.0), "a", 0, State.OPEN),
            ("admit", "b", 3, ("wait", 30.0)),
        ],
    ),
    "a probe that ends with a terminal failure frees the probe slot, the breaker stays half-open": (
        BreakerPolicy(1, 5.0),
        [
            ("fail", "a", 0, State.OPEN),
            ("admit", "b", 5, "probe"),
            ("neutral", "b", 6, State.HALF_OPEN),
            ("admit", "c", 6, "probe"),
        ],
    ),
    "a success from an attempt that started before the trip closes it": (
        BreakerPolicy(1, 5.0),
        [
            ("fail", "a", 0, State.OPEN),
            ("ok", "b", 1, State.CLOSED),
            ("admit", "c", 1, "go"),
        ],
    ),
    "a node waits through at most max_cycles cool-downs, then gives up": (
        BreakerPolicy(1, 5.0, max_cycles=2),
        [
            ("fail", "a", 0, State.OPEN),  # cycle 1
            ("admit", "w", 1, ("wait", 5.0)),
            ("admit", "a", 5, "probe"),
            ("admit", "w", 5, ("wait", 10.0)),  # still cycle 1 (probe in flight)
            ("fail", "a", 6, State.OPEN),  # cycle 2
            ("admit", "w", 7, ("wait", 11.0)),
            ("admit", "a", 11, "probe"),
            ("fail", "a", 12, State.OPEN),  # cycle 3: w already waited through 2
            ("admit", "w", 13, "give_up"),
            ("admit", "fresh", 13, ("wait", 17.0)),  # a node that never waited still may
        ],
    ),
}


def _admission(result: Any) -> Any:
    if isinstance(result, Go):
        return "probe" if result.probe else "go"
    if isinstance(result, Wait):
        return ("wait", result.until)
    assert isinstance(result, GiveUp)
    return "give_up"


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_breaker_state_machine(name: str) -> None:
    policy, steps = SCENARIOS[name]
    breaker = Breaker("source:pg", policy)
    for i, (op, key, t, expected) in enumerate(steps):
        if op == "admit":
            admission, _ = breaker.admit(key, t)
            assert _admission(admission) == expected, f"step {i}"
            continue
        kind, retry_after = op if isinstance(op, tuple) else (op, None)
        outcome = {"ok": Outcome.OK, "fail": Outcome.FAILED, "neutral": Outcome.NEUTRAL}[kind]
        breaker.record(key, outcome, t, retry_after, "boom")
        assert breaker.state == expected, f"step {i}"


def test_every_transition_is_reported_once_with_its_reason() -> None:
    breaker = Breaker("sink:wh", BreakerPolicy(2, 30.0))
    changes: list[Transition | None] = [
        breaker.record("a", Outcome.FAILED, 0),
        breaker.record("a", Outcome.FAILED, 1, retry_after=45.0),
        breaker.admit("b", 10)[1],
        breaker.admit("b", 46)[1],
        breaker.record("b", Outcome.FAILED, 47),
        breaker.admit("b", 77)[1],
        breaker.record("b", Outcome.OK, 78),
    ]
    assert [(c.from_state, c.to_state, c.reason, c.retry_in) if c else None for c in changes] == [
        None,
        (State.CLOSED, State.OPEN, "2 transient failures in a row", 45.0),
        None,
        (State.OPEN, State.HALF_OPEN, "cool-down elapsed: one probe may go", None),
        (State.HALF_OPEN, State.OPEN, "the probe failed", 30.0),
        (State.OPEN, State.HALF_OPEN, "cool-down elapsed: one probe may go", None),
        (State.HALF_OPEN, State.CLOSED, "the probe succeeded", None),
    ]


@pytest.mark.parametrize(
    ("failure", "outcome"),
    [
        (None, Outcome.OK),
        (NodeFailure("PZ0505", "connection reset", transient=True), Outcome.FAILED),
        (NodeFailure("PZ0505", "syntax error"), Outcome.NEUTRAL),
        (NodeFailure("PZ0505", "worker died", transient=True, worker_lost=True), Outcome.NEUTRAL),
    ],
)
def test_what_an_attempt_tells_the_breaker(failure: NodeFailure | None, outcome: Outcome) -> None:
    assert outcome_of(failure) == outcome


def test_a_lost_worker_is_transient_for_retry_but_not_for_the_breaker() -> None:
    lost = NodeFailure("PZ0505", "the worker running the node was lost", transient=True, worker_lost=True)
    assert retry_delay(RetryPolicy(3, 1.0, 1.0), 1, lost, rand=lambda: 0.5) == 0.5
    assert not lost.blames_instance
    import pickle

    assert pickle.loads(pickle.dumps(lost)).worker_lost


# --- the retry-policy cascade -----------------------------------------------------------------------------
E, INST, D = "engine.retry", "source 'pg'", "dataset 'orders'"
CASCADE: list[tuple[str, list[RetrySpec | None], tuple[int, float, float], tuple[str, str, str], bool]] = [
    ("nothing declared", [None, None, None], (3, 1.0, 30.0), ("engine default",) * 3, False),
    ("empty blocks", [RetrySpec(), RetrySpec(), RetrySpec()], (3, 1.0, 30.0), ("engine default",) * 3, False),
    ("engine only", [RetrySpec(5, 2.0, 10.0), None, None], (5, 2.0, 10.0), (E, E, E), False),
    (
        "instance over engine",
        [RetrySpec(5), RetrySpec(7), None],
        (7, 1.0, 30.0),
        (INST, "engine default", "engine default"),
        True,
    ),
    (
        "each field its nearest level",
        [RetrySpec(max_delay=60.0), RetrySpec(max_attempts=4, base_delay=0.5), RetrySpec(max_attempts=9)],
        (9, 0.5, 60.0),
        (D, INST, E),
        True,
    ),
    (
        "dataset only",
        [None, None, RetrySpec(base_delay=0.0)],
        (3, 0.0, 30.0),
        ("engine default", D, "engine default"),
        True,
    ),
    (
        "one attempt: never retried",
        [None, RetrySpec(max_attempts=1), None],
        (1, 1.0, 30.0),
        (INST, "engine default", "engine default"),
        True,
    ),
]


@pytest.mark.parametrize(
    ("name", "levels", "values", "origin", "declared"), CASCADE, ids=[c[0] for c in CASCADE]
)
def test_retry_cascade_nearest_wins_per_field(
    name: str,
    levels: list[RetrySpec | None],
    values: tuple[int, float, float],
    origin: tuple[str, str, str],
    declared: bool,
) -> None:
    labelled = list(zip((E, INST, D), levels, strict=True))
    policy = effective_policy(labelled)
    assert (policy.max_attempts, policy.base_delay, policy.max_delay) == values
    assert policy.origin == origin
    assert declares_retry(labelled[1:]) is declared


def test_the_engine_default_is_three_attempts_1s_30s() -> None:
    assert RetryPolicy(3, 1.0, 30.0) == ENGINE_DEFAULT
    assert effective_policy([]).render(origins=True) == (
        "max_attempts 3 (engine default), base_delay 1s (engine default), max_delay 30s (engine default)"
    )


@pytest.mark.parametrize(
    ("attempt", "rand", "retry_after", "expected"),
    [
        (1, 1.0, None, 1.0),  # base_delay * 2^0, full jitter at its top
        (2, 1.0, None, 2.0),
        (3, 0.5, None, 2.0),
        (10, 1.0, None, 30.0),  # capped at max_delay
        (1, 0.0, None, 0.0),  # full jitter: may be zero
        (1, 0.5, 7.0, 7.0),  # retry_after is a floor
        (10, 1.0, 45.0, 30.0),  # a retry_after above max_delay is capped by it: the policy bounds a wait
        (1, 0.0, 100000.0, 30.0),  # a server's Retry-After of 28 hours waits max_delay
    ],
)
def test_backoff_is_exponential_with_full_jitter_floored_by_retry_after_capped_by_max_delay(
    attempt: int, rand: float, retry_after: float | None, expected: float
) -> None:
    assert backoff_delay(ENGINE_DEFAULT, attempt, retry_after, rand=lambda: rand) == expected


@pytest.mark.parametrize(
    ("spec", "rendered"),
    [
        (BreakerSpec(), "failure_threshold 5 (engine default), cool_down 30s (engine default)"),
        (
            BreakerSpec(5, 2.0, frozenset({"cool_down"})),
            "failure_threshold 5 (engine default), cool_down 2s (engine.breaker)",
        ),
    ],
)
def test_breaker_policy_says_where_each_field_came_from(spec: BreakerSpec, rendered: str) -> None:
    policy = breaker_policy(spec)
    assert policy is not None and policy.render(origins=True) == rendered
    assert breaker_policy(None) is None


# --- the breaker on the scheduler -------------------------------------------------------------------------
@dataclass
class InstanceNodes:
    """Fake nodes of one or more instances; `down` instances fail every attempt transiently. Settles go
    through a real Breaker per instance, like the executor's BreakerGate."""

    clock: FakeClock
    groups: dict[str, str]
    down: set[str]
    policy: BreakerPolicy
    max_attempts: int = 3
    retry_delay: float = 1.0

    def __post_init__(self) -> None:
        self.breakers = {g: Breaker(g, self.policy) for g in set(self.groups.values())}
        self.starts: list[tuple[str, int, float]] = []
        self.outcomes: dict[str, str] = {}
        self.reasons: dict[str, str] = {}
        self.events: list[tuple[str, str, str, float]] = []

    def gate(self, key: str, now: float) -> Defer | Refuse | None:
        admission, change = self.breakers[self.groups[key]].admit(key, now)
        self._log(change, now)
        if isinstance(admission, Wait):
            return Defer(admission.until)
        if isinstance(admission, GiveUp):
            return Refuse(f"PZ0506 after {admission.cycles} cycles")
        return None

    def _log(self, change: Transition | None, now: float) -> None:
        if change:
            self.events.append((change.instance, change.from_state, change.to_state, now))

    def submit(self, key: str, attempt: int, done: Callable[[Any], None]) -> None:
        self.starts.append((key, attempt, self.clock.now()))
        done("fail" if self.groups[key] in self.down else "ok")

    def settle(self, key: str, attempt: int, result: Any, may_retry: bool) -> Verdict:
        outcome = Outcome.OK if result == "ok" else Outcome.FAILED
        self._log(self.breakers[self.groups[key]].record(key, outcome, self.clock.now()), self.clock.now())
        if result != "ok" and may_retry and attempt < self.max_attempts:
            return RetryIn(self.retry_delay)
        self.outcomes[key] = "ok" if result == "ok" else "failed"
        return Finished(result == "ok")

    def settle_interrupted(self, key: str, attempt: int, result: Any) -> None:
        self.outcomes[key] = "cancelled"

    def refuse(self, key: str, reason: object) -> None:
        self.outcomes[key] = "refused"
        self.reasons[key] = str(reason)

    def give_up(self, key: str, status: str, reason: str) -> None:
        self.outcomes[key] = status

    def interrupt(self) -> None:
        return None


def _run_instances(
    deps: dict[str, Sequence[str]], groups: dict[str, str], down: set[str], policy: BreakerPolicy, **kw: Any
) -> InstanceNodes:
    clock = FakeClock()
    nodes = InstanceNodes(clock, groups, down, policy, **kw)
    graph = Graph(list(deps), deps, group=lambda k: groups.get(k))
    Scheduler(graph, nodes, slots=1, gate=nodes.gate, clock=clock).run()
    return nodes


def test_a_dead_instance_trips_its_breaker_and_independent_branches_finish() -> None:
    groups = {"pg_a": "source:pg", "pg_b": "source:pg", "pg_c": "source:pg", "files": "source:files"}
    deps: dict[str, Sequence[str]] = {"pg_a": [], "pg_b": [], "pg_c": [], "files": [], "after_a": ["pg_a"]}
    nodes = _run_instances(deps, groups, {"source:pg"}, BreakerPolicy(2, 30.0, max_cycles=2))
    assert nodes.outcomes == {
        "files": "ok",
        "pg_a": "failed",  # ran out of attempts as the probe: its own error
        "after_a": "skipped",
        "pg_b": "refused",  # waited through 2 cycles: PZ0506
        "pg_c": "refused",
    }
    assert nodes.reasons == {"pg_b": "PZ0506 after 2 cycles", "pg_c": "PZ0506 after 2 cycles"}
    # nothing of pg starts while the breaker is open; after each cool-down one probe goes, alone
    assert nodes.starts == [
        ("pg_a", 1, 0.0),
        ("pg_b", 1, 0.0),  # trips it (2 in a row)
        ("files", 1, 0.0),  # the other instance is not held
        ("pg_a", 2, 30.0),  # probe 1
        ("pg_a", 3, 60.0),  # probe 2
    ]
    closed, half, opened = State.CLOSED, State.HALF_OPEN, State.OPEN
    assert [(f, to, t) for (_i, f, to, t) in nodes.events] == [
        (closed, opened, 0.0),
        (opened, half, 30.0),
        (half, opened, 30.0),
        (opened, half, 60.0),
        (half, opened, 60.0),
    ]


def test_nodes_waiting_on_a_probe_go_as_soon_as_it_closes_the_breaker() -> None:
    """The flaky node fails twice (tripping the breaker), then the instance recovers: the probe succeeds
    and the held nodes start right then, not a cool-down later."""
    clock = FakeClock()
    groups = {"a": "sink:wh", "b": "sink:wh", "c": "sink:wh"}
    nodes = InstanceNodes(clock, groups, {"sink:wh"}, BreakerPolicy(2, 10.0), max_attempts=5, retry_delay=0.5)
    recovered_at = 10.0
    real_submit = nodes.submit

    def submit(key: str, attempt: int, done: Callable[[Any], None]) -> None:
        if clock.now() >= recovered_at:
            nodes.down.clear()
        real_submit(key, attempt, done)

    nodes.submit = submit  # type: ignore[method-assign]
    graph = Graph(["a", "b", "c"], {"a": [], "b": [], "c": []}, group=lambda k: groups[k])
    Scheduler(graph, nodes, slots=3, gate=nodes.gate, clock=clock).run()
    assert nodes.outcomes == {"a": "ok", "b": "ok", "c": "ok"}
    probe_start = min(t for _k, _a, t in nodes.starts if t >= recovered_at)
    assert probe_start == pytest.approx(10.0)
    after = sorted(t for _k, _a, t in nodes.starts if t >= recovered_at)
    assert after[-1] == pytest.approx(10.0)  # the held nodes woke when the probe settled
    assert len(after) == 3
