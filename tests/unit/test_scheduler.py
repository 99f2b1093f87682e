"""The generic scheduler with a fake clock and fake runners: ordering, max_concurrency, fail-fast, skip
propagation, gates and retry back-offs that hold no worker, cancellation of waiting nodes."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from pipelinez.engine.run.scheduler import (
    FAIL_FAST,
    INTERRUPTED,
    Defer,
    Finished,
    GateDecision,
    Graph,
    GroupSlots,
    Refuse,
    RetryIn,
    Scheduler,
    Unschedulable,
    Verdict,
)

M = TypeVar("M")


class FakeClock:
    """Virtual time. Work takes no virtual time: while something runs, wait for it; when only timers are
    left, jump to the next one instead of sleeping."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def next_message(self, inbox: queue.Queue[M], timeout: float | None, busy: bool) -> M | None:
        if busy or timeout is None:
            return inbox.get(timeout=10)
        try:
            return inbox.get_nowait()
        except queue.Empty:
            self.t += max(timeout, 0.0)
            return None


class CtrlCWhenWaiting(FakeClock):
    """Ctrl-C arrives the first time the coordinator would wait for a timer."""

    def next_message(self, inbox: queue.Queue[M], timeout: float | None, busy: bool) -> M | None:
        if timeout is not None:
            raise KeyboardInterrupt
        return super().next_message(inbox, timeout, busy)


# a script per node: one entry per attempt: "ok", "fail", or ("transient", delay)
Script = Mapping[str, Sequence[Any]]


@dataclass
class FakeNodes:
    """Fake runners and a recorder of everything the scheduler decided."""

    clock: FakeClock
    script: Script = field(default_factory=dict)
    groups: Mapping[str, str] = field(default_factory=dict)
    pool: ThreadPoolExecutor | None = None  # None: attempts complete inline
    starts: list[tuple[str, int, float]] = field(default_factory=list)
    outcomes: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    interrupts: int = 0
    active: set[str] = field(default_factory=set)
    peak: dict[str, int] = field(default_factory=dict)  # most nodes running at once, per group and "*"
    worker_threads: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _step(self, key: str, attempt: int) -> Any:
        steps = self.script.get(key, ["ok"])
        return steps[min(attempt, len(steps)) - 1]

    def submit(self, key: str, attempt: int, done: Callable[[Any], None]) -> None:
        self.starts.append((key, attempt, self.clock.now()))
        self.active.add(key)
        for group in ("*", self.groups.get(key)):
            if group:
                running = sum(1 for k in self.active if group == "*" or self.groups.get(k) == group)
                self.peak[group] = max(self.peak.get(group, 0), running)
        step = self._step(key, attempt)
        if self.pool is None:
            done(step)
            return

        def work() -> None:
            with self._lock:
                self.worker_threads.add(threading.current_thread().name)
            done(step)

        self.pool.submit(work)

    def settle(self, key: str, attempt: int, result: Any, may_retry: bool) -> Verdict:
        self.active.discard(key)
        if isinstance(result, tuple) and may_retry:
            return RetryIn(result[1])
        self.outcomes[key] = "ok" if result == "ok" else "failed"
        return Finished(result == "ok")

    def settle_interrupted(self, key: str, attempt: int, result: Any) -> None:
        self.active.discard(key)
        self.outcomes[key] = "ok" if result == "ok" else "cancelled"

    def refuse(self, key: str, reason: object) -> None:
        self.outcomes[key] = "failed"
        self.reasons[key] = str(reason)

    def give_up(self, key: str, status: str, reason: str) -> None:
        self.outcomes[key] = status
        self.reasons[key] = reason

    def interrupt(self) -> None:
        self.interrupts += 1


def _graph(
    deps: dict[str, list[str]], groups: Mapping[str, str] = {}, limits: Mapping[str, int] = {}
) -> Graph[str]:
    return Graph(list(deps), deps, group=lambda k: groups.get(k), limits=limits)


def _run(
    deps: dict[str, list[str]],
    *,
    slots: int = 4,
    script: Script | None = None,
    fail_fast: bool = False,
    gate: Callable[[str, float], GateDecision] | None = None,
    groups: Mapping[str, str] = {},
    limits: Mapping[str, int] = {},
    clock: FakeClock | None = None,
    pool: ThreadPoolExecutor | None = None,
    settled: Mapping[str, bool] | None = None,
) -> FakeNodes:
    clock = clock or FakeClock()
    nodes = FakeNodes(clock, script or {}, groups, pool)
    sched: Scheduler[str, Any] = Scheduler(
        _graph(deps, groups, limits),
        nodes,
        slots=slots,
        fail_fast=fail_fast,
        gate=gate,
        clock=clock,
        settled=settled,
    )
    sched.run()
    return nodes


def _gate_once(delays: dict[str, float]) -> Callable[[str, float], GateDecision]:
    """Each named node is told "not yet" once, to come back at the given time."""
    asked: set[str] = set()

    def gate(key: str, now: float) -> GateDecision:
        if key in delays and key not in asked:
            asked.add(key)
            return Defer(now + delays[key])
        return None

    return gate


def test_nodes_start_after_their_dependencies_in_plan_order() -> None:
    nodes = _run({"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"], "e": []}, slots=1)
    assert [s[0] for s in nodes.starts] == ["a", "b", "c", "d", "e"]
    assert all(v == "ok" for v in nodes.outcomes.values()) and len(nodes.outcomes) == 5


def test_independent_nodes_run_side_by_side_up_to_the_slots() -> None:
    with ThreadPoolExecutor(2) as pool:
        nodes = _run({"a": [], "b": [], "c": [], "d": []}, slots=2, pool=pool)
    assert nodes.peak["*"] == 2 and len(nodes.starts) == 4


def test_max_concurrency_caps_each_group_while_others_go_on() -> None:
    deps: dict[str, list[str]] = {"p1": [], "p2": [], "p3": [], "p4": [], "m1": []}
    groups = {"p1": "pg", "p2": "pg", "p3": "pg", "p4": "pg", "m1": "maria"}
    nodes = _run(deps, slots=4, groups=groups, limits={"pg": 2})
    assert nodes.peak["pg"] == 2
    assert nodes.peak["*"] == 3  # the maria node did not wait for a pg slot
    assert [s[0] for s in nodes.starts][:3] == ["p1", "p2", "m1"]
    assert set(nodes.outcomes) == set(deps)


def test_slots_a_running_node_borrowed_count_against_its_group() -> None:
    # a group's slots are shared with what a running node borrows for itself (a load's partition reads): one
    # slot of pg's two is borrowed, so pg's nodes run one at a time
    shared = GroupSlots({"pg": 2})
    assert shared.take("pg", 3) == 2 and shared.take("pg") == 0  # never more than the limit, never waits
    shared.give("pg", 1)
    deps: dict[str, list[str]] = {"p1": [], "p2": [], "p3": []}
    groups = {k: "pg" for k in deps}
    with ThreadPoolExecutor(4) as pool:
        nodes = FakeNodes(FakeClock(), {}, groups, pool)
        graph = Graph(list(deps), deps, group=lambda k: groups.get(k), slots=shared)
        Scheduler(graph, nodes, slots=4).run()
    assert nodes.peak["pg"] == 1 and set(nodes.outcomes) == set(deps)
    assert shared.taken("pg") == 1  # every node gave its slot back; the borrowed one is still out


def test_failure_skips_every_descendant_naming_the_root_and_independent_branches_finish() -> None:
    deps = {"a": [], "b": ["a"], "c": ["b"], "d": [], "e": ["d"]}
    nodes = _run(deps, script={"a": ["fail"]})
    assert nodes.outcomes == {"a": "failed", "b": "skipped", "c": "skipped", "d": "ok", "e": "ok"}
    assert nodes.reasons == {"b": "upstream a failed", "c": "upstream a failed"}
    assert nodes.interrupts == 0


def test_fail_fast_cancels_ready_and_waiting_nodes_at_once() -> None:
    # r waits out a 50s retry back-off and g a gate until t=100 when a fails at t=0
    deps: dict[str, list[str]] = {"x": [], "r": [], "g": [], "a": [], "later": ["x", "a"]}
    clock = FakeClock()
    nodes = _run(
        deps,
        slots=2,
        script={"r": [("transient", 50.0), "ok"], "a": ["fail"]},
        gate=_gate_once({"g": 100.0}),
        fail_fast=True,
        clock=clock,
    )
    assert clock.t == 0.0  # nobody waited for a timer
    assert nodes.outcomes == {
        "x": "ok",
        "r": "cancelled",
        "g": "cancelled",
        "a": "failed",
        "later": "cancelled",
    }
    assert {nodes.reasons[k] for k in ("r", "g", "later")} == {FAIL_FAST}
    assert nodes.interrupts == 1
    assert [s[0] for s in nodes.starts] == ["x", "r", "a"]


def test_a_gated_node_holds_no_worker_while_it_waits() -> None:
    with ThreadPoolExecutor(1, thread_name_prefix="only") as pool:
        nodes = _run({"a": [], "b": [], "c": []}, slots=1, gate=_gate_once({"a": 100.0}), pool=pool)
    assert nodes.starts == [("b", 1, 0.0), ("c", 1, 0.0), ("a", 1, 100.0)]
    assert nodes.peak["*"] == 1 and len(nodes.worker_threads) == 1


def test_a_retry_back_off_is_a_timer_not_a_sleeping_worker() -> None:
    with ThreadPoolExecutor(1) as pool:
        nodes = _run(
            {"r": [], "s": [], "t": ["r"]}, slots=1, script={"r": [("transient", 30.0), "ok"]}, pool=pool
        )
    assert nodes.starts == [("r", 1, 0.0), ("s", 1, 0.0), ("r", 2, 30.0), ("t", 1, 30.0)]
    assert nodes.outcomes == {"r": "ok", "s": "ok", "t": "ok"}


def test_a_gate_that_is_still_not_ready_is_asked_again_later() -> None:
    asked: list[float] = []

    def gate(key: str, now: float) -> GateDecision:
        asked.append(now)
        return Defer(now + 10.0) if now < 25.0 else None

    nodes = _run({"a": []}, gate=gate)
    assert asked == [0.0, 10.0, 20.0, 30.0] and nodes.starts == [("a", 1, 30.0)]


def test_a_gate_refusal_fails_the_node_and_skips_its_descendants() -> None:
    def gate(key: str, now: float) -> GateDecision:
        return Refuse("breaker open too long") if key == "a" else None

    nodes = _run({"a": [], "b": ["a"], "c": []}, gate=gate)
    assert nodes.outcomes == {"a": "failed", "b": "skipped", "c": "ok"}
    assert nodes.reasons["a"] == "breaker open too long"
    assert [s[0] for s in nodes.starts] == ["c"]


def test_ctrl_c_cancels_waiting_nodes_at_once_and_records_the_running_ones() -> None:
    deps: dict[str, list[str]] = {"wait": [], "run": [], "after": ["wait"]}
    nodes = FakeNodes(CtrlCWhenWaiting(), {"run": ["ok"]}, {})
    clock = nodes.clock

    def gate(key: str, now: float) -> GateDecision:
        return Defer(now + 100.0) if key == "wait" else None

    sched: Scheduler[str, Any] = Scheduler(_graph(deps), nodes, slots=2, gate=gate, clock=clock)
    # "run" completes inline, so its result is in the inbox when Ctrl-C arrives
    with pytest.raises(KeyboardInterrupt):
        sched.run()
    assert clock.t == 0.0
    assert nodes.outcomes == {"run": "ok", "wait": "cancelled", "after": "cancelled"}
    assert nodes.reasons == {"wait": INTERRUPTED, "after": INTERRUPTED}
    assert nodes.interrupts >= 1


def test_nodes_settled_before_the_run_are_not_run_and_still_gate_their_children() -> None:
    deps: dict[str, list[str]] = {"a": [], "b": ["a"], "c": [], "d": ["c"]}
    nodes = _run(deps, settled={"a": True, "c": False})
    assert [s[0] for s in nodes.starts] == ["b"]
    assert nodes.outcomes == {"b": "ok", "d": "skipped"}


# -- the invariant: every node is scheduled or reported, never dropped -------------------------------------
@pytest.mark.parametrize(
    ("deps", "problem", "listed"),
    [
        # a cycle and what sits behind it: refused before anything starts, every such node named
        ({"a": [], "b": ["a", "c"], "c": ["b"], "d": ["c"], "e": []}, "dependency cycle", ["b", "c", "d"]),
        # a dependency the graph does not hold (some future edge kind): never ignored
        ({"a": [], "b": ["a", "gone"]}, "does not hold", ["b"]),
    ],
)
def test_a_graph_with_nodes_that_could_never_start_is_refused_naming_them(
    deps: dict[str, list[str]], problem: str, listed: list[str]
) -> None:
    nodes = FakeNodes(FakeClock())
    with pytest.raises(Unschedulable) as err:
        Scheduler(_graph(deps), nodes, slots=2, clock=nodes.clock)
    assert problem in str(err.value) and err.value.keys == listed
    assert nodes.starts == []


def test_a_dependency_settled_before_the_run_is_known() -> None:
    nodes = _run({"b": ["a"]}, settled={"a": True})
    assert nodes.outcomes == {"b": "ok"}


def test_every_node_ends_with_an_outcome_whatever_fails() -> None:
    """Random DAGs with random failures, fail-fast or not: each node ran (ok or failed) or was reported
    (skipped or cancelled), and run() returns an outcome for every one."""
    import random

    rng = random.Random(20)
    for _ in range(200):
        size = rng.randint(1, 12)
        names = [f"n{i}" for i in range(size)]
        deps = {n: rng.sample(names[:i], rng.randint(0, min(i, 3))) for i, n in enumerate(names)}
        script = {n: ["fail"] for n in names if rng.random() < 0.2}
        nodes = FakeNodes(FakeClock(), script)
        ok = Scheduler(
            _graph(deps), nodes, slots=rng.randint(1, 3), fail_fast=rng.random() < 0.3, clock=nodes.clock
        ).run()
        assert set(ok) == set(names) and set(nodes.outcomes) == set(names)


class SignalledNodes(FakeNodes):
    """A stop signal reaches pz in the middle of the scheduler's bookkeeping: while a node is being
    submitted (counted as running, not yet handed to a worker) and while a finished attempt is recorded."""

    signalled_in: tuple[str, ...] = ("submit",)

    def _signal(self, where: str) -> None:
        import os
        import signal

        if where in self.signalled_in:
            self.signalled_in = tuple(w for w in self.signalled_in if w != where)
            os.kill(os.getpid(), signal.SIGINT)  # the handler runs at the next bytecode, in this thread

    def submit(self, key: str, attempt: int, done: Callable[[Any], None]) -> None:
        self._signal("submit")
        super().submit(key, attempt, done)

    def settle(self, key: str, attempt: int, result: Any, may_retry: bool) -> Verdict:
        self._signal("settle")
        return super().settle(key, attempt, result, may_retry)

    def interrupt(self) -> None:
        super().interrupt()
        if self.interrupts > 40:  # about 10 s of waiting for a result that never comes
            raise AssertionError("the scheduler waits for an attempt that was never handed to a worker")


@pytest.mark.parametrize("where", ["submit", "settle"])
def test_a_stop_signal_in_the_bookkeeping_never_loses_an_attempt(where: str) -> None:
    """With pz's own handler in place (the `pz` process), a SIGINT landing while a node is submitted or a
    result recorded is held to the loop's next step: every node still gets its outcome, no hang. Before,
    the KeyboardInterrupt cut `submit` in two and the scheduler waited forever for that node."""
    import signal

    from pipelinez.core import stop_signals

    previous = {s: signal.getsignal(s) for s in stop_signals.STOP_SIGNALS}
    for s in stop_signals.STOP_SIGNALS:
        signal.signal(s, stop_signals.on_stop_signal)
    try:
        with ThreadPoolExecutor(2) as pool:
            nodes = SignalledNodes(FakeClock(), {}, {}, pool)
            nodes.signalled_in = (where,)
            deps: dict[str, list[str]] = {"a": [], "b": ["a"], "c": ["b"]}
            sched: Scheduler[str, Any] = Scheduler(_graph(deps), nodes, slots=2, clock=nodes.clock)
            with pytest.raises(KeyboardInterrupt):
                sched.run()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    assert set(nodes.outcomes) == {"a", "b", "c"}, nodes.outcomes
    assert nodes.outcomes["c"] == "cancelled"
