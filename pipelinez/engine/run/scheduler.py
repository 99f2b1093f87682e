"""A ready-queue scheduler over a DAG of nodes of any type: it knows dependencies, capacity, per-group
limits, a gate and a timer heap, and nothing of what a node does (like SQLMesh's `DAG[T]`).

One coordinator thread (the caller's) owns every decision. Work runs elsewhere (`Hooks.submit`) and reports
back through an inbox; the coordinator settles each result. A node that must wait — a gate that says "not
yet, re-check at T", a retry back-off — sits in the timer heap and holds no worker: the capacity `slots`
counts only nodes actually running. A node the gate deferred is asked again at its time, or sooner when an
attempt of its group (its source/sink instance) ends, since that may change the gate's mind. Fail-fast and
Ctrl-C cancel waiting and unstarted nodes at once.

Outcomes: a settled node is ok or failed; a node whose dependency is not ok is skipped (naming the failed
node at the root of the chain); a node cancelled by fail-fast or an interrupt is cancelled.

Every node of the graph ends with an outcome, or the scheduler refuses the graph before anything starts: a
node that could never become ready (it names a node the graph does not hold, or sits on or behind a cycle)
is `Unschedulable`, listed by name, and `run` proves at its end that every node was settled or reported.
"""

from __future__ import annotations

import heapq
import queue
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from pipelinez.core import stop_signals
from pipelinez.core.vocabulary import NodeStatus

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")
M = TypeVar("M")
KC = TypeVar("KC", bound=Hashable, contravariant=True)

FAIL_FAST = "cancelled by fail-fast"
INTERRUPTED = "interrupted (SIGINT)"  # by SIGTERM: "interrupted (SIGTERM)" (`interrupted_reason`)
REINTERRUPT_SECONDS = 0.25  # after Ctrl-C, running work is interrupted again this often until it stopped
STOP_POLL_SECONDS = 0.1  # how long a stop signal held out of the loop's bookkeeping may wait


def interrupted_reason() -> str:
    """Why an interrupted run's unfinished nodes were cancelled: the signal that stopped it."""
    return f"interrupted ({stop_signals.received()})"


@dataclass(frozen=True)
class Defer:
    """Gate answer: not yet, ask again at clock time `at`."""

    at: float


@dataclass(frozen=True)
class Refuse:
    """Gate answer: never; the node fails with `reason` (e.g. a breaker that stayed open too long)."""

    reason: object


GateDecision = Defer | Refuse | None  # None: go


@dataclass(frozen=True)
class Finished:
    """A settled attempt: the node is done, ok or failed."""

    ok: bool


@dataclass(frozen=True)
class RetryIn:
    """A settled attempt: run the node again (attempt + 1) after `delay` seconds, holding no worker."""

    delay: float


Verdict = Finished | RetryIn


class Hooks(Protocol[KC, R]):
    """What the scheduler asks of whoever knows what nodes do. Every method except the `done` callback
    handed to `submit` is called on the coordinator thread."""

    def submit(self, key: KC, attempt: int, done: Callable[[R], None]) -> None:
        """Start one attempt somewhere; call `done(result)` from any thread when it ends."""

    def settle(self, key: KC, attempt: int, result: R, may_retry: bool) -> Verdict:
        """Record an attempt's result; say whether the node is done (ok or not) or should run again."""

    def settle_interrupted(self, key: KC, attempt: int, result: R) -> None:
        """Record an attempt that ended while the run was being interrupted."""

    def refuse(self, key: KC, reason: object) -> None:
        """Record a node the gate refused: it failed without running."""

    def give_up(self, key: KC, status: NodeStatus, reason: str) -> None:
        """Record a node that will not run: status is `skipped` or `cancelled`."""

    def interrupt(self) -> None:
        """Stop whatever is running (fail-fast, Ctrl-C); running attempts still report through `done`."""


class Clock(Protocol):
    def now(self) -> float: ...

    def next_message(self, inbox: queue.Queue[M], timeout: float | None, busy: bool) -> M | None:
        """The next message, or None once `timeout` seconds passed (`busy`: work is running)."""


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()

    def next_message(self, inbox: queue.Queue[M], timeout: float | None, busy: bool) -> M | None:
        try:
            return inbox.get(timeout=None if timeout is None else max(timeout, 0.0))
        except queue.Empty:
            return None


class Unschedulable(RuntimeError):
    """The graph holds nodes that could never start: a bug of whoever built it, never silently dropped."""

    def __init__(self, problem: str, keys: Sequence[object]):
        self.keys = list(keys)
        super().__init__(f"{problem}: {', '.join(map(str, self.keys))}")


class GroupSlots:
    """The slots of each limited group (a source/sink instance's `max_concurrency`), counted once for
    everything that runs against the group: the scheduler takes one per running node, and a running node may
    borrow more for work of its own (a partitioned load's parallel reads) while they are free. Thread-safe:
    the scheduler takes on its coordinator thread, a node borrows and gives back on its workers."""

    def __init__(self, limits: Mapping[str, int]):
        self.limits = {g: n for g, n in limits.items() if n}
        self._taken: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, group: str, wanted: int = 1) -> int:
        """Take up to `wanted` slots of `group` that are free now (all of them for an unlimited group);
        returns how many were taken, never waits."""
        with self._lock:
            taken = self._taken.get(group, 0)
            limit = self.limits.get(group)
            n = max(0, min(wanted, limit - taken)) if limit else max(0, wanted)
            self._taken[group] = taken + n
            return n

    def give(self, group: str, n: int = 1) -> None:
        with self._lock:
            self._taken[group] = max(0, self._taken.get(group, 0) - n)

    def taken(self, group: str) -> int:
        with self._lock:
            return self._taken.get(group, 0)


@dataclass(frozen=True)
class Graph(Generic[K]):
    """Nodes in their preferred start order, each with the nodes it depends on (each one of the graph's
    nodes or one settled before the run)."""

    order: Sequence[K]
    deps: Mapping[K, Sequence[K]]
    group: Callable[[K], str | None] = lambda _key: None  # e.g. the source/sink instance
    limits: Mapping[str, int] = field(default_factory=dict)  # max running nodes per group
    slots: GroupSlots | None = None  # the groups' slots when shared with the nodes (else made of `limits`)


@dataclass(order=True)
class _Timer(Generic[K]):
    at: float
    seq: int
    key: K = field(compare=False)
    attempt: int = field(compare=False)
    deferred: bool = field(default=False, compare=False)  # held by the gate (not a retry back-off)


class Scheduler(Generic[K, R]):
    def __init__(
        self,
        graph: Graph[K],
        hooks: Hooks[K, R],
        *,
        slots: int,
        fail_fast: bool = False,
        gate: Callable[[K, float], GateDecision] | None = None,
        clock: Clock | None = None,
        settled: Mapping[K, bool] | None = None,
    ):
        """`settled`: nodes already done before this run starts (e.g. carried forward), ok or not."""
        self.graph = graph
        self.hooks = hooks
        self.slots = max(1, slots)
        self.fail_fast = fail_fast
        self.gate = gate
        self.clock = clock or MonotonicClock()
        self._rank = {key: i for i, key in enumerate(graph.order)}
        if len(self._rank) != len(graph.order):
            raise Unschedulable(
                "nodes listed twice", sorted({k for k in graph.order if graph.order.count(k) > 1}, key=str)
            )
        unknown = [
            k
            for k in graph.order
            for d in graph.deps.get(k, ())
            if d not in self._rank and d not in (settled or {})
        ]
        if unknown:
            raise Unschedulable("nodes that depend on a node the graph does not hold", unknown)
        self._deps = {k: [d for d in graph.deps.get(k, ()) if d in self._rank] for k in graph.order}
        self._children: dict[K, list[K]] = {k: [] for k in graph.order}
        for key, deps in self._deps.items():
            for dep in deps:
                self._children[dep].append(key)
        self._waiting_on = {k: len(d) for k, d in self._deps.items()}
        self.ok: dict[K, bool] = {}  # settled nodes (skipped/cancelled: False)
        self._root: dict[K, K] = {}  # failed node at the root of a skip chain
        self._ready: list[tuple[int, int, K]] = []  # (rank, attempt, key)
        self._timers: list[_Timer[K]] = []
        self._seq = 0
        self._running: dict[K, int] = {}
        self._groups = graph.slots if graph.slots is not None else GroupSlots(graph.limits)
        self._inbox: queue.Queue[tuple[K, int, R]] = queue.Queue()
        self._cancelled = False
        for key, ok in (settled or {}).items():
            if key in self._rank:
                self.ok[key] = ok
                for child in self._children[key]:
                    self._waiting_on[child] -= 1
        stuck = self._never_ready()
        if stuck:
            raise Unschedulable("nodes on or behind a dependency cycle, which could never start", stuck)

    def _never_ready(self) -> list[K]:
        """The nodes that would never become ready: the graph's order replayed with every node settling."""
        waiting = dict(self._waiting_on)
        todo = [k for k in self.graph.order if waiting[k] == 0 and k not in self.ok]
        reached = set(self.ok) | set(todo)
        while todo:
            for child in self._children[todo.pop()]:
                waiting[child] -= 1
                if waiting[child] == 0 and child not in reached:
                    reached.add(child)
                    todo.append(child)
        return [k for k in self.graph.order if k not in reached]

    # -- the loop ------------------------------------------------------------------------------------
    def run(self) -> dict[K, bool]:
        """Run to the end; returns ok per node. KeyboardInterrupt is re-raised after cancelling."""
        with stop_signals.held() as holding:  # a signal stops the loop only between two steps
            try:
                for key in self.graph.order:
                    if self._waiting_on[key] == 0 and key not in self.ok:
                        self._became_ready(key)
                while len(self.ok) < len(self._rank):
                    stop_signals.take_pending()
                    self._pump()
                    if len(self.ok) == len(self._rank):
                        break  # the gate refused the last nodes
                    if not self._running and not self._timers:
                        stuck = [k for k in self.graph.order if k not in self.ok]
                        raise RuntimeError(f"scheduler stalled with nodes {stuck}")
                    timeout = self._timers[0].at - self.clock.now() if self._timers else None
                    if holding:  # a held signal waits for the next step: wake up to look for one
                        timeout = STOP_POLL_SECONDS if timeout is None else min(timeout, STOP_POLL_SECONDS)
                    message = self.clock.next_message(self._inbox, timeout, bool(self._running))
                    if message is not None:
                        self._settle(*message)
            except KeyboardInterrupt:
                self._interrupted()
                raise
        unsettled = [k for k in self.graph.order if k not in self.ok]
        if unsettled:  # the invariant: every node ran, failed, or was reported skipped or cancelled
            raise Unschedulable("nodes the run ended without settling or reporting", unsettled)
        return self.ok

    def _pump(self) -> None:
        """Move due timers to the ready queue, then start what capacity, limits and the gate allow."""
        now = self.clock.now()
        while self._timers and self._timers[0].at <= now:
            timer = heapq.heappop(self._timers)
            heapq.heappush(self._ready, (self._rank[timer.key], timer.attempt, timer.key))
        held: list[tuple[int, int, K]] = []
        while self._ready and len(self._running) < self.slots and not self._cancelled:
            entry = heapq.heappop(self._ready)
            _, attempt, key = entry
            group = self.graph.group(key)
            if group and not self._groups.take(group):
                held.append(entry)  # waits for a slot of its group; re-examined after each completion
                continue
            decision = self.gate(key, now) if self.gate else None
            if decision is not None and group:
                self._groups.give(group)  # it does not start: its slot is free again
            if isinstance(decision, Defer):
                self._wait(key, attempt, decision.at, deferred=True)
            elif isinstance(decision, Refuse):
                self.hooks.refuse(key, decision.reason)
                self._finish(key, False)
            else:
                self._start(key, attempt)
        for entry in held:
            heapq.heappush(self._ready, entry)

    def _start(self, key: K, attempt: int) -> None:
        """Submit an attempt; the slot of its group is already taken."""
        self._running[key] = attempt

        def done(result: R) -> None:
            self._inbox.put((key, attempt, result))

        self.hooks.submit(key, attempt, done)

    def _wait(self, key: K, attempt: int, at: float, deferred: bool = False) -> None:
        self._seq += 1
        heapq.heappush(self._timers, _Timer(at, self._seq, key, attempt, deferred))

    def _wake_group(self, group: str | None) -> None:
        """An attempt of `group` ended, which may change the gate's mind (a breaker's probe closed it): the
        group's deferred nodes are asked again now instead of at their timer."""
        if not group:
            return
        woken = [t for t in self._timers if t.deferred and self.graph.group(t.key) == group]
        if not woken:
            return
        self._timers = [t for t in self._timers if not (t.deferred and self.graph.group(t.key) == group)]
        heapq.heapify(self._timers)
        for timer in woken:
            heapq.heappush(self._ready, (self._rank[timer.key], timer.attempt, timer.key))

    def _release(self, key: K) -> None:
        if self._running.pop(key, None) is None:
            return
        group = self.graph.group(key)
        if group:
            self._groups.give(group)

    def _settle(self, key: K, attempt: int, result: R) -> None:
        self._release(key)
        verdict = self.hooks.settle(key, attempt, result, may_retry=not self._cancelled)
        self._wake_group(self.graph.group(key))
        if isinstance(verdict, RetryIn) and not self._cancelled:
            self._wait(key, attempt + 1, self.clock.now() + verdict.delay)
            return
        self._finish(key, isinstance(verdict, Finished) and verdict.ok)

    def _finish(self, key: K, ok: bool) -> None:
        if not ok and self.fail_fast:
            self.ok[key] = False
            self._cancel(FAIL_FAST)  # before propagation: descendants are cancelled, not skipped
        self._done(key, ok)

    # -- propagation ---------------------------------------------------------------------------------
    def _done(self, key: K, ok: bool) -> None:
        self.ok[key] = ok
        for child in self._children[key]:
            self._waiting_on[child] -= 1
            if self._waiting_on[child] == 0 and child not in self.ok:
                self._became_ready(child)

    def _became_ready(self, key: K) -> None:
        bad = [d for d in self._deps[key] if not self.ok[d]]
        if self._cancelled:
            return  # recorded by _cancel
        if bad:
            root = self._root.get(bad[0], bad[0])
            self._root[key] = root
            self.hooks.give_up(key, NodeStatus.SKIPPED, f"upstream {root} failed")
            self._done(key, False)
            return
        heapq.heappush(self._ready, (self._rank[key], 1, key))

    def _cancel(self, reason: str) -> None:
        """Everything not running and not settled is cancelled now: ready, waiting and unstarted nodes."""
        if self._cancelled:
            return
        self._cancelled = True
        self.hooks.interrupt()
        self._ready.clear()
        self._timers.clear()
        for key in self.graph.order:
            if key not in self.ok and key not in self._running:
                self.hooks.give_up(key, NodeStatus.CANCELLED, reason)
                self.ok[key] = False

    def _interrupted(self) -> None:
        """Ctrl-C: cancel what waits, stop what runs, and record how each running node ended."""
        self._cancel(interrupted_reason())
        self.hooks.interrupt()
        while self._running:
            try:
                key, attempt, result = self._inbox.get(timeout=REINTERRUPT_SECONDS)
            except queue.Empty:  # a query that started after the last interrupt: interrupt it too
                self.hooks.interrupt()
                continue
            except KeyboardInterrupt:  # Ctrl-C again: keep stopping what runs, then record it
                self.hooks.interrupt()
                continue
            self._release(key)
            self.hooks.settle_interrupted(key, attempt, result)
            self.ok[key] = False
