"""A run's run_results.json copied to a shared state backend as the run rewrites it, off the run's path: each
rewrite marks the record changed and one background thread uploads the newest version (rewrites that come
faster than an upload are coalesced). The final copy is made by the session itself, after `close`."""

from __future__ import annotations

import threading
from pathlib import Path

from pipelinez.core.state.backend import RESULTS, StateBackend, StateBackendError
from pipelinez.engine.run.failures import DEBUG_LOG
from pipelinez.engine.state.shared import mirror


class ResultsMirror:
    def __init__(self, backend: StateBackend, run_id: str, run_dir: Path):
        self.backend, self.run_id, self.run_dir = backend, run_id, run_dir
        self._changed = threading.Event()
        self._closing = False
        self._thread = threading.Thread(target=self._loop, name="pz-state-mirror", daemon=True)
        self._thread.start()

    def touch(self) -> None:
        self._changed.set()

    def _loop(self) -> None:
        while True:
            self._changed.wait()
            if self._closing:
                return
            self._changed.clear()
            try:
                mirror(self.backend, self.run_id, self.run_dir, (RESULTS,))
            except StateBackendError as exc:  # the final copy tries again
                DEBUG_LOG.info("run_results.json not copied to the state backend: %s", exc)

    def close(self) -> None:
        self._closing = True
        self._changed.set()
        self._thread.join()
