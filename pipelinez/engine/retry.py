"""Per-node retries: exponential backoff with full jitter, only for transient failures, retry_after
respected. Connectors never retry; this loop is the only place attempts are repeated."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from pipelinez.compile.policy import RetryPolicy
from pipelinez.engine.failures import NodeFailure

T = TypeVar("T")


def backoff_delay(
    policy: RetryPolicy, attempt: int, retry_after: float | None, rand: Callable[[], float] = random.random
) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based)."""
    ceiling = min(policy.max_delay, policy.base_delay * (2 ** (attempt - 1)))
    delay = float(ceiling * rand())
    if retry_after is not None:
        delay = max(delay, retry_after)
    return delay


def run_with_retry(
    attempt_fn: Callable[[int], T],
    policy: RetryPolicy,
    on_retry: Callable[[int, float, NodeFailure], None],
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[T, int]:
    """(result, attempts used). AttemptsFailed when attempts run out or the failure is terminal."""
    attempt = 1
    while True:
        try:
            return attempt_fn(attempt), attempt
        except NodeFailure as failure:
            if not failure.transient or attempt >= policy.max_attempts:
                raise AttemptsFailed(failure, attempt) from None
            delay = backoff_delay(policy, attempt, failure.retry_after)
            on_retry(attempt, delay, failure)
            sleep(delay)
            attempt += 1


class AttemptsFailed(Exception):
    """The node's last failure and how many attempts were made."""

    def __init__(self, failure: NodeFailure, attempts: int):
        super().__init__(failure.message)
        self.failure = failure
        self.attempts = attempts
