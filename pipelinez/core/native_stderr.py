"""Capture what native code (a Rust or C driver) writes straight to file descriptor 2.

ConnectorX prints a Rust panic ("thread '<unnamed>' panicked at …, note: run with RUST_BACKTRACE=1") to the
process's stderr before Python sees the exception; pz turns the exception into a PZ error, so the raw text
must never reach the user. While at least one thread is inside `native_stderr()`, fd 2 points to a private
temporary file; the last one out restores it. Each capture gets the bytes written while it was inside.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO


@dataclass
class Captured:
    text: str = ""


class _Redirect:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.saved: int | None = None
        self.sink: IO[bytes] | None = None

    def enter(self) -> int:
        with self.lock:
            if self.users == 0:
                with contextlib.suppress(Exception):
                    sys.stderr.flush()
                self.sink = tempfile.TemporaryFile()  # noqa: SIM115 - closed by the last leave()
                self.saved = os.dup(2)
                os.dup2(self.sink.fileno(), 2)
            self.users += 1
            assert self.sink is not None
            return os.lseek(self.sink.fileno(), 0, os.SEEK_END)

    def leave(self, start: int) -> str:
        with self.lock:
            assert self.sink is not None and self.saved is not None
            end = os.lseek(self.sink.fileno(), 0, os.SEEK_END)
            text = os.pread(self.sink.fileno(), max(0, end - start), start).decode("utf-8", "replace")
            self.users -= 1
            if self.users == 0:
                os.dup2(self.saved, 2)
                os.close(self.saved)
                self.sink.close()
                self.saved, self.sink = None, None
            return text


_REDIRECT = _Redirect()


@contextlib.contextmanager
def native_stderr() -> Iterator[Captured]:
    """Within the block, whatever native code writes to fd 2 goes into the returned `Captured.text`."""
    captured = Captured()
    start = _REDIRECT.enter()
    try:
        yield captured
    finally:
        captured.text = _REDIRECT.leave(start)
