"""Ctrl-C at any moment: one PZ0514 line and exit 1, never a traceback, an internal error or a hang.

A SIGINT does not always arrive as a KeyboardInterrupt: DuckDB turns one that lands during a query into a
RuntimeError ("Query interrupted"), and one that lands while a C extension initializes makes its import fail
with ImportError. So the `pz` process records that a SIGINT came (`tripped`), and the command wrapper treats
whatever error follows it as the interruption it is. Once the interruption is reported the process ends
at once (`exit_now`): no worker thread still finishing a query can hold the exit up, and no second signal
can turn the exit code into a kill.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType

_tripped = threading.Event()
_reported = threading.Event()


def _on_sigint(_signum: int, _frame: FrameType | None) -> None:
    _tripped.set()
    raise KeyboardInterrupt


def install() -> None:
    """Record SIGINTs from now on (the `pz` process only; library users keep their own handler)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _on_sigint)


def tripped() -> bool:
    return _tripped.is_set()


def reported() -> None:
    """The PZ0514 line has been printed (by the command wrapper)."""
    _reported.set()


def was_reported() -> bool:
    return _reported.is_set()


def exit_now(code: int) -> None:
    """End the process after an interruption was reported: flush what was printed, ignore further SIGINTs,
    and exit without waiting for threads (their work was interrupted; the run's records are written)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed pipe: nothing more to say
            continue
    os._exit(code)
