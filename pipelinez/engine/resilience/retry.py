"""Per-node retries: exponential backoff with full jitter, only for transient failures, retry_after
respected up to the policy's max_delay (a server's `Retry-After: 100000` does not hold a run for a day: the
policy caps every wait, and a retry that comes too early fails again and spends an attempt). Connectors never
retry; the scheduler is the only place attempts are repeated, and a node waiting out its back-off is a timer,
not a sleeping worker."""

from __future__ import annotations

import random
from collections.abc import Callable

from pipelinez.compile.policy import RetryPolicy
from pipelinez.engine.run.failures import NodeFailure


def backoff_delay(
    policy: RetryPolicy, attempt: int, retry_after: float | None, rand: Callable[[], float] = random.random
) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based): never more than max_delay."""
    ceiling = min(policy.max_delay, policy.base_delay * (2 ** (attempt - 1)))
    delay = float(ceiling * rand())
    if retry_after is not None:
        delay = max(delay, min(retry_after, policy.max_delay))
    return delay


def retry_delay(
    policy: RetryPolicy, attempt: int, failure: NodeFailure, rand: Callable[[], float] = random.random
) -> float | None:
    """Seconds until the next attempt after failed attempt `attempt`, or None: the failure is terminal or
    the attempts ran out."""
    if not failure.transient or attempt >= policy.max_attempts:
        return None
    return backoff_delay(policy, attempt, failure.retry_after, rand)
