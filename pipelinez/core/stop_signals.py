"""The signals that stop a run: Ctrl-C (SIGINT) and SIGTERM (what Airflow, Kubernetes and systemd send).

Both stop a run the same way: the handler records which signal came and raises KeyboardInterrupt in the main
thread, so the scheduler cancels what waits, interrupts what runs and the session records the run as
interrupted (PZ0514), removes what it made and releases the lock. `exit_cleanups` are what pz removes at
exit (temp spools): the `pz` process ends with `os._exit` after an interruption, which runs no atexit
handler, so it runs these itself first.
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
EXIT_SIGTERM = 128 + signal.SIGTERM  # what a process ended by SIGTERM exits with (143)

_tripped = threading.Event()
_received: list[str] = []  # the signals that came, in order
_cleanups: list[Callable[[], None]] = []
_held = 0  # how many `held()` blocks the main thread is in
_pending = False  # a stop signal came while held: raised at the next `take_pending()` or the block's end
_runs_recorded: list[str] = []  # the runs this process has begun recording (run_results.json written)


def on_stop_signal(signum: int, _frame: FrameType | None) -> None:
    """The handler of SIGINT and SIGTERM: record it and stop the main thread like Ctrl-C (or, inside
    `held()`, at the block's next safe point)."""
    global _pending
    _received.append(signal.Signals(signum).name)
    _tripped.set()
    if _held and not _pending:  # a second signal while one is held stops the block at once
        _pending = True
        return
    raise KeyboardInterrupt


def _ours() -> bool:
    """pz's handler stops the main thread for both signals, and this is the main thread."""
    return threading.current_thread() is threading.main_thread() and all(
        signal.getsignal(signum) is on_stop_signal for signum in STOP_SIGNALS
    )


@contextlib.contextmanager
def held() -> Iterator[bool]:
    """A block whose bookkeeping a stop signal must never cut in two (the scheduler: a node counted as
    started but never submitted, a finished attempt's message taken from the queue but not recorded, would
    leave it waiting forever for a result that never comes). Inside, a stop signal is only recorded; the
    block raises it as KeyboardInterrupt where it is safe (`take_pending`), or at its end. Yields whether
    signals are held (pz's own handler is in place, in the main thread): if not, it changes nothing."""
    global _held, _pending
    if not _ours():
        yield False
        return
    _held += 1
    try:
        yield True
    except BaseException:  # the block ends already: a signal held meanwhile is not raised in a later one
        if _held == 1:
            _pending = False
        raise
    finally:
        _held -= 1
    if not _held and _pending:
        _pending = False
        raise KeyboardInterrupt


def take_pending() -> None:
    """Inside `held()`, at a safe point: raise the stop signal that came meanwhile, if one did."""
    global _pending
    if _pending:
        _pending = False
        raise KeyboardInterrupt


def tripped() -> bool:
    return _tripped.is_set()


def count() -> int:
    """How many stop signals pz's handler has recorded in this process: a command compares it with the
    count at its start, so a signal an earlier command of the same process (the Python API, a test) took
    never turns a later command's error into an interrupt."""
    return len(_received)


def run_recorded(run_id: str) -> None:
    """A run's first run_results.json is written: a stop signal from now on is recorded in it (its
    unfinished nodes cancelled, `pz retry` can finish it)."""
    _runs_recorded.append(run_id)


def runs_recorded() -> list[str]:
    """The runs this process has begun recording, in order: a command compares the list with the one at
    its start, as with `count`."""
    return list(_runs_recorded)


def received() -> str:
    """The last stop signal that came ("SIGINT" or "SIGTERM"); "SIGINT" when none was recorded (a
    KeyboardInterrupt raised by Python's own handler)."""
    return _received[-1] if _received else "SIGINT"


@contextlib.contextmanager
def sigterm_stops_the_run() -> Iterator[None]:
    """The Python API's run and retry: while the block runs, a SIGTERM stops it like Ctrl-C (the run is
    recorded as interrupted, the lock released). Then the handler that was in place decides: one the caller
    installed (Airflow's task runner has one) is called, as the signal would have called it; with Python's
    default (which would have ended the process at once, recording nothing) the block is left as
    `SystemExit(143)`, so the process still ends as SIGTERM asked, after its finally blocks and atexit
    handlers ran. Only in the main thread (signal handlers live there); a SIGTERM the caller ignores
    (SIG_IGN) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is None:  # installed outside Python: restored as the default
        previous = signal.SIG_DFL
    if previous is signal.SIG_IGN:
        yield
        return
    seen = len(_received)
    signal.signal(signal.SIGTERM, on_stop_signal)
    # Python's own Ctrl-C handler raises KeyboardInterrupt at once, anywhere: pz's raises the same, but can
    # hold it out of the scheduler's bookkeeping (`held`); a handler the caller installed stays
    sigint = signal.getsignal(signal.SIGINT)
    if sigint is signal.default_int_handler:
        signal.signal(signal.SIGINT, on_stop_signal)
    try:
        yield
    except BaseException:
        if "SIGTERM" not in _received[seen:]:
            raise
        signal.signal(signal.SIGTERM, previous)
        if callable(previous):  # the caller's own handler, now that the run is recorded
            previous(signal.SIGTERM, None)
        # whatever the signal became in the run (KeyboardInterrupt; DuckDB: "Query interrupted")
        raise SystemExit(EXIT_SIGTERM) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
        if sigint is signal.default_int_handler:
            signal.signal(signal.SIGINT, sigint)


def exit_cleanup(fn: Callable[[], None]) -> Callable[[], None]:
    """Register `fn` to run at exit: at a normal interpreter exit (atexit) and before an interrupted `pz`
    process ends at once (`run_exit_cleanups`). Usable as a decorator."""
    _cleanups.append(fn)
    atexit.register(fn)
    return fn


def run_exit_cleanups() -> None:
    """Run every registered cleanup once now (each must be safe to run again at exit); none may fail."""
    for fn in list(_cleanups):
        with contextlib.suppress(Exception):
            fn()
