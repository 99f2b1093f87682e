"""Live progress display for a terminal: nodes done/running and rows/s, with the run's text lines above."""

from __future__ import annotations

import threading
import time
from typing import Any

from pipelinez.cli.render import TextReporter
from pipelinez.core.json_types import JsonObject


class ProgressReporter:
    def __init__(self, quiet: bool = False, color: bool = True):
        from rich.console import Console
        from rich.live import Live

        self.console = Console(no_color=not color, highlight=False)
        self.lines = TextReporter(quiet=quiet)  # prints to sys.stdout, which Live redirects above itself
        self.total = 0
        self.done = 0
        self.rows = 0
        self.running: dict[str, float] = {}
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self.live = Live(
            console=self.console, refresh_per_second=8, transient=True, get_renderable=self._renderable
        )

    def _renderable(self) -> Any:
        from rich.text import Text

        elapsed = max(time.monotonic() - self.started, 1e-6)
        with self._lock:
            names = ", ".join(list(self.running)[:4]) + (" …" if len(self.running) > 4 else "")
            return Text(
                f"[{self.done}/{self.total} nodes] running {len(self.running)}: {names}  "
                f"{self.rows / elapsed:,.0f} rows/s",
                style="dim",
            )

    def __call__(self, data: JsonObject) -> None:
        kind = data["event"]
        with self._lock:
            if kind == "run_started":
                self.total = int(data.get("nodes", 0))
                self.started = time.monotonic()
                self.live.start()
            elif kind == "node_started":
                self.running[str(data["name"])] = time.monotonic()
            elif kind == "node_retry":  # waits out its back-off: not running
                self.running.pop(str(data["name"]), None)
            elif kind == "node_completed":
                self.running.pop(str(data["name"]), None)
                self.done += 1
                self.rows += int(data.get("rows", 0))
        if kind == "run_completed":
            self.live.stop()
            return
        self.lines(data)
