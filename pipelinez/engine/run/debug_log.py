"""The run's debug log (`.pz/runs/<id>/pz.log`): what node error messages condense away, secrets masked."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

from pipelinez.core.redact import Redactor
from pipelinez.engine.run.failures import DEBUG_LOG


class _Masked(logging.Formatter):
    def __init__(self, redactor: Redactor):
        super().__init__("%(asctime)s %(message)s")
        self._redact = redactor

    def format(self, record: logging.LogRecord) -> str:
        return self._redact(super().format(record))


class _Quiet(logging.FileHandler):
    def handleError(self, record: logging.LogRecord) -> None:
        """An unwritable log never interrupts a run nor prints a traceback: the message itself was shown."""


@contextlib.contextmanager
def debug_log(path: Path, redactor: Redactor) -> Iterator[None]:
    """While a run lasts, full node error texts go to `path` (created on the first one)."""
    handler = _Quiet(path, encoding="utf-8", delay=True)
    handler.setFormatter(_Masked(redactor))
    DEBUG_LOG.addHandler(handler)
    DEBUG_LOG.setLevel(logging.INFO)
    DEBUG_LOG.propagate = False
    try:
        yield
    finally:
        DEBUG_LOG.removeHandler(handler)
        handler.close()
