"""Write-behind for a run's staging file.

DuckDB writes a bulk load's row groups into the staging file as they fill and syncs the file (`fsync`) when
the load commits. Until then the kernel keeps what was written in memory: it writes dirty pages back on its
own only past 10 % of memory or after 30 s, so the commit of a 10M-row CSV load (300 MiB staged) waited
0.12-0.15 s for the disk while both cores idled. `WriteBehind` asks the kernel to write the file back while
the load runs: a thread calls `fdatasync` on its own read-only descriptor of the file every quarter second in
which the file changed, so the commit's own sync finds little left (0.005-0.013 s).

Nothing is read or changed, and durability stays DuckDB's: it still syncs at every commit. A write-back error
seen here is not lost to DuckDB (Linux reports it to every descriptor open on the file, DuckDB's included), so
this thread only stops. Started where `os.fdatasync` exists (not on Windows, where an open handle would also
keep the file from being removed).
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

PERIOD_S = 0.25


class WriteBehind:
    """Write `path` back to disk while it changes, from a daemon thread, until `stop`."""

    def __init__(self, path: Path, period: float = PERIOD_S) -> None:
        self.path = path
        self.period = period
        self._fd: int | None = None
        self._seen: tuple[int, int] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> WriteBehind:
        """Open the file and start the thread; a no-op where the platform has no `fdatasync` or the file
        cannot be opened (the load then syncs everything at its commit, as without this)."""
        if not hasattr(os, "fdatasync"):
            return self
        try:
            self._fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return self
        self._seen = self._state()
        self._thread = threading.Thread(target=self._loop, name="pz-write-behind", daemon=True)
        self._thread.start()
        return self

    def tick(self) -> bool:
        """One step: write the file back when it changed since the last step. Whether it did. A file that
        was removed (a connection closed without `close_staging`, then its run folder swept) is let go: the
        descriptor is closed, so it never keeps the removed file's disk space."""
        if self._fd is None:
            return False
        if os.fstat(self._fd).st_nlink == 0:
            self._release()
            return False
        now = self._state()
        if now == self._seen:
            return False
        self._seen = now
        os.fdatasync(self._fd)
        return True

    def stop(self) -> None:
        """Stop the thread and close the descriptor (before the staging file is closed)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
            self._thread = None
        self._release()

    def _release(self) -> None:
        self._stop.set()
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _state(self) -> tuple[int, int]:
        assert self._fd is not None
        st = os.fstat(self._fd)
        return st.st_size, st.st_mtime_ns

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self.tick()
            except OSError:  # DuckDB's own sync at the commit reports it; nothing more to do here
                self._release()
                return
