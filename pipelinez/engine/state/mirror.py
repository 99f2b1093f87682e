"""A run's files copied to a shared state backend while the run lives, off the run's path: run_results.json
each time it is rewritten and events.jsonl as events are appended, so another worker's `pz runs` (and whoever
debugs a worker that was killed) sees the run as far as it went. Each change marks its file; one background
thread uploads the newest version of the marked files, at most once per `INTERVAL` (changes that come faster
are coalesced into the next upload). The final copy is made by the session itself, after `close`."""

from __future__ import annotations

import threading
from pathlib import Path

from pipelinez.core import failpoints
from pipelinez.core.state.backend import EVENTS, StateBackend, StateBackendError
from pipelinez.engine.run.failures import DEBUG_LOG

INTERVAL = 0.5  # seconds between two uploads: events may come by the thousand


class RunMirror:
    def __init__(self, backend: StateBackend, run_id: str, run_dir: Path):
        self.backend, self.run_id, self.run_dir = backend, run_id, run_dir
        self._marked: set[str] = set()
        self._guard = threading.Lock()
        self._changed = threading.Event()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pz-state-mirror", daemon=True)
        self._thread.start()

    def touch(self, name: str) -> None:
        """File `name` of the run folder changed."""
        with self._guard:
            self._marked.add(name)
        self._changed.set()

    def _loop(self) -> None:
        while True:
            self._changed.wait()
            if self._closing.is_set():
                return
            self._changed.clear()
            with self._guard:
                names, self._marked = sorted(self._marked), set()
            for name in names:
                self._upload(name)
            self._closing.wait(INTERVAL)  # what changes meanwhile goes up with the next upload

    def _upload(self, name: str) -> None:
        try:
            text = (self.run_dir / name).read_text(encoding="utf-8")
        except OSError:
            return
        if name == EVENTS:  # the line being appended right now goes up with the next upload
            text = text[: text.rfind("\n") + 1]
        try:
            failpoints.hit("state.mirror")
            self.backend.put_run_file(self.run_id, name, text)
        except StateBackendError as exc:  # the next upload, or the final copy, tries again
            DEBUG_LOG.info("%s not copied to the state backend: %s", name, exc)

    def close(self) -> None:
        self._closing.set()
        self._changed.set()
        self._thread.join()
