"""The project lock: `.pz/lock`, an exclusive flock held for the whole run, with the holder's pid inside.

A dead holder's flock is released by the OS, so a stale lock file never blocks the next run.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType

from pipelinez.core.diagnostics import PzError, error
from pipelinez.core.state.backend import StateBackend
from pipelinez.engine.state.lease import Lease, locked_error
from pipelinez.engine.state.statedir import ensure_state_dir, state_error


class ProjectLocked(PzError):
    pass


class ProjectLock:
    """`backend`: the project's shared state backend; its lease is taken after the local flock (and
    released before it), so runs on other machines are kept apart too."""

    def __init__(self, state_dir: Path, backend: StateBackend | None = None):
        self.path = state_dir / "lock"
        self._fd: int | None = None
        self.backend = backend  # what a run under this lock reads and commits state through (fenced)
        self.lease = Lease(backend) if backend is not None and backend.remote else None

    def __enter__(self) -> ProjectLock:
        ensure_state_dir(self.path.parent)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise state_error(exc, self.path.parent) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise ProjectLocked(
                [
                    error(
                        "PZ0511",
                        f"another pz process (pid {holder}) is running in this project",
                        file=".pz/lock",
                    )
                ]
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        if self.lease is not None:
            try:
                other = self.lease.acquire()
            except BaseException:
                self._unlock()
                raise
            if other is not None:
                self._unlock()
                raise ProjectLocked(locked_error(self.lease.backend, other)) from None
        return self

    @property
    def held(self) -> bool:
        return self._fd is not None

    @property
    def lost(self) -> bool:
        """The shared backend's lease was taken over while this process held it (it stopped renewing in
        time: a long pause, a network partition)."""
        return self.lease is not None and self.lease.lost

    def serve(self, run_id: str) -> None:
        if self.lease is not None:
            self.lease.serve(run_id)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.lease is not None:
            self.lease.release()
        self._unlock()

    def _unlock(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
