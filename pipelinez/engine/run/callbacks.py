"""The `on_event` callback of the Python API's run and retry, as a subscriber of the run's events, and the
error (PZ0535) raised after the run when it raised."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from pipelinez.core.diagnostics import Diagnostic, PzError, error
from pipelinez.engine.events import Event

OnEvent = Callable[[dict[str, Any]], None]


class EventCallbackError(PzError):
    """PZ0535: the `on_event` callback raised. It was not called again after that; the run went on to its
    end and was recorded: `outcome` is what `run` (or `retry`) would have returned. The callback's own
    exception is `__cause__`."""

    def __init__(self, diagnostics: Sequence[Diagnostic], outcome: Any):
        super().__init__(diagnostics)
        self.outcome = outcome


class Forward:
    """`on_event` as a subscriber of the run's events: each event a deep copy (the callback may keep or
    change it; other subscribers don't see it). The first exception it raises is kept, and it is not called
    again, so a broken callback can stop neither the run nor its records."""

    def __init__(self, on_event: OnEvent | None):
        self.on_event = on_event
        self.failed: tuple[str, Exception] | None = None

    def subscribers(self) -> list[Callable[[Event, dict[str, Any]], None]]:
        return [self] if self.on_event is not None else []

    def __call__(self, _event: Event, data: dict[str, Any]) -> None:
        if self.on_event is None or self.failed is not None:
            return
        try:
            self.on_event(copy.deepcopy(data))
        except Exception as exc:
            self.failed = (str(data.get("event")), exc)

    def check(self, call: str, run_id: str | None, status: str | None, outcome: Any) -> None:
        """Raise EventCallbackError when the callback raised during the call."""
        if self.failed is None:
            return
        event, exc = self.failed
        ran = f"run {run_id} went on and ended {status}" if run_id else "nothing ran"
        raise EventCallbackError(
            [
                error(
                    "PZ0535",
                    f"on_event raised {type(exc).__name__}: {exc} on the '{event}' event and was not called "
                    f"again; the {ran} (events.jsonl holds every event)",
                    file=f"{call}()",
                    next_step="fix the callback (an exception in it is the caller's, pz only reports it)",
                )
            ],
            outcome,
        ) from exc
