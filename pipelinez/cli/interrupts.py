"""Ctrl-C or SIGTERM at any moment: one PZ0514 line and exit 1, never a traceback, an internal error or a
hang.

SIGTERM (what Airflow, Kubernetes and systemd send to stop a task) is handled exactly like Ctrl-C: the run is
recorded as interrupted, its temp files removed and the lock released, so `pz retry` can finish it.

A signal does not always arrive as a KeyboardInterrupt: DuckDB turns one that lands during a query into a
RuntimeError ("Query interrupted"), and one that lands while a C extension initializes makes its import fail
with ImportError. So the `pz` process records that a signal came (`tripped`), and the command wrapper treats
whatever error follows it as the interruption it is. Once the interruption is reported the process ends
at once (`exit_now`): no worker thread still finishing a query can hold the exit up, and no second signal
can turn the exit code into a kill.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from pipelinez.core import stop_signals

_reported = threading.Event()
_installed = threading.Event()  # in a `pz` process (cli.main.main), which ends when its command does


def install() -> None:
    """Record SIGINTs and SIGTERMs from now on (the `pz` process only; library users keep their own
    handler)."""
    _installed.set()
    if threading.current_thread() is threading.main_thread():
        for signum in stop_signals.STOP_SIGNALS:
            signal.signal(signum, stop_signals.on_stop_signal)


def tripped() -> bool:
    return stop_signals.tripped()


def runs_recorded() -> list[str]:
    """The runs this process has begun recording (see `stop_signals.run_recorded`)."""
    return stop_signals.runs_recorded()


def count() -> int:
    """Stop signals recorded so far in this process (see `stop_signals.count`)."""
    return stop_signals.count()


def received() -> str:
    """The signal that stopped pz: "SIGINT" or "SIGTERM"."""
    return stop_signals.received()


def reported() -> None:
    """The PZ0514 line has been printed (by the command wrapper)."""
    _reported.set()


def was_reported() -> bool:
    return _reported.is_set()


def exit_now(code: int) -> None:
    """End the process once its command has said all it had to (after an interruption was reported, or at
    the command's normal end): ignore further signals, remove pz's temp files (os._exit runs no atexit
    handler), flush what was printed, and exit without the interpreter's shutdown. No thread is waited for
    (an interrupted run's work was stopped and its records written; a finished command has none left), and
    no signal can land in Python's own shutdown, where it would print a traceback or, once Python has put
    the default handlers back, kill the process with 143 after the command succeeded."""
    for signum in stop_signals.STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    stop_signals.run_exit_cleanups()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed pipe: nothing more to say
            continue
    os._exit(code)


def in_pz_process() -> bool:
    """Whether this is a `pz` process (its command ends it), not a CliRunner's or another caller's."""
    return _installed.is_set()
