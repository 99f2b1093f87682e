"""The project's state folder `.pz`: created on first use; any refusal of the OS to create or write it is
PZ0521 naming the cause (a file named .pz, a read-only project folder, a full disk), never an internal error.
"""

from __future__ import annotations

from pathlib import Path

from pipelinez.core.diagnostics import PzError, error
from pipelinez.core.oserrors import os_reason


class StateUnwritable(PzError):
    pass


def state_error(exc: OSError, state_dir: Path) -> StateUnwritable:
    """PZ0521 for `.pz` (or a folder inside it, like `.pz/runs`)."""
    shown = f".pz/{state_dir.name}" if state_dir.parent.name == ".pz" else state_dir.name
    if state_dir.exists() and not state_dir.is_dir():
        message = f"pz keeps its state in a folder {shown}, but a file of that name is in the way"
    else:
        where = f" ({exc.filename})" if exc.filename and Path(exc.filename) != state_dir else ""
        message = f"pz cannot create or write its state folder{where}: {os_reason(exc)}"
    return StateUnwritable([error("PZ0521", message, file=shown)])


def ensure_state_dir(state_dir: Path) -> Path:
    """Create `.pz` when missing; StateUnwritable (PZ0521) when the OS refuses."""
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise state_error(exc, state_dir) from None
    return state_dir
