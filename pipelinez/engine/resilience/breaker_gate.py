"""`engine.breaker` on the scheduler: one `Breaker` per source/sink instance (the `source:<name>` /
`sink:<name>` granularity `max_concurrency` uses, so every dataset or output of one instance shares it),
consulted by the scheduler's gate before each attempt and told how each attempt ended.

A held node becomes a `Defer` (a timer: no worker, no slot, no attempt spent); a node that waited through
the bounded number of cool-down cycles is refused with the retryable PZ0506. Pipelines and checks run in
staging and have no breaker. Every transition is handed to `publish` (a `breaker_state_changed` event).
"""

from __future__ import annotations

from collections.abc import Callable

from pipelinez.compile.policy import BreakerPolicy
from pipelinez.core.durations import format_duration
from pipelinez.engine.resilience.breaker import Breaker, GiveUp, Outcome, Transition, Wait
from pipelinez.engine.run.failures import NodeFailure
from pipelinez.engine.run.scheduler import Defer, GateDecision, Refuse
from pipelinez.plan.planner import PlannedNode


def outcome_of(failure: NodeFailure | None) -> Outcome:
    """What an attempt's end tells the breaker of its instance."""
    if failure is None:
        return Outcome.OK
    return Outcome.FAILED if failure.blames_instance else Outcome.NEUTRAL


class BreakerGate:
    def __init__(self, policy: BreakerPolicy, publish: Callable[[Transition], None]):
        self.policy = policy
        self.publish = publish
        self.breakers: dict[str, Breaker] = {}

    def _breaker(self, instance: str) -> Breaker:
        if instance not in self.breakers:
            self.breakers[instance] = Breaker(instance, self.policy)
        return self.breakers[instance]

    def __call__(self, planned: PlannedNode, now: float) -> GateDecision:
        instance = planned.node.instance
        if instance is None:
            return None
        admission, change = self._breaker(instance).admit(planned.node.name, now)
        if change is not None:
            self.publish(change)
        if isinstance(admission, Wait):
            return Defer(admission.until)
        if isinstance(admission, GiveUp):
            return Refuse(self._refusal(instance, admission))
        return None

    def observe(self, planned: PlannedNode, failure: NodeFailure | None, now: float) -> None:
        """An attempt of `planned` ended (ok, or with `failure`)."""
        instance = planned.node.instance
        if instance is None:
            return
        change = self._breaker(instance).record(
            planned.node.name,
            outcome_of(failure),
            now,
            failure.retry_after if failure else None,
            failure.message if failure else None,
        )
        if change is not None:
            self.publish(change)

    def release(self, planned: PlannedNode) -> None:
        """An attempt ended without telling anything about its instance (interrupted)."""
        if planned.node.instance is not None:
            self._breaker(planned.node.instance).record(planned.node.name, Outcome.NEUTRAL, 0.0)

    def _refusal(self, instance: str, give_up: GiveUp) -> NodeFailure:
        last = f"; the last failure on {instance}: {give_up.last_error}" if give_up.last_error else ""
        message = (
            f"gave up waiting for {instance}: its circuit breaker stayed open through {give_up.cycles} "
            f"cool-down cycle(s) of {format_duration(self.policy.cool_down)}{last}"
        )
        return NodeFailure("PZ0506", message, transient=True)
