"""One memory budget for the DuckDB instances a pz process holds open at once.

`engine.memory_limit` (default 320MB, or a quarter of the machine's memory where that is less) is the budget
of the whole process's DuckDB buffer pools, not of one instance. The rule:

- A database instance (the run's staging database, a DuckDB file opened in its own instance: the duckdb
  connector's universal-tier reads and writes) joins the budget while it is open. The instances open at once
  split it equally: staging alone has all of it; staging and a DuckDB sink file written beside it have half
  each. An instance's `memory_limit` is changed when another one joins or leaves (DuckDB evicts, or spills to
  its temp directory, to meet a lower limit; where it cannot yet, it keeps its limit until the next change).
- A helper instance (a private in-memory DuckDB that casts, parses or describes a batch or a file, or
  consumes a stream into a file) does not take a share: what it holds is a batch or a file's row groups. It is
  capped at the budget, not at DuckDB's default of 80 % of the machine's memory (an eighth of the budget was
  tried: a sorted COPY of 3M rows then fails where DuckDB cannot spill an in-memory database).
- Arrow batches in flight between two instances are bounded by rows, not bytes (see `connectors/sdk_feed.py`).

Peak RSS of a run is about the budget plus 150-350 MiB (Python, pyarrow, DuckDB's own code and the Arrow
batches in flight; the universal tier is the upper end): with the default 320MB a run stays under 700 MiB
whatever the table size and the tier (docs/benchmarks.md, Memory: one budget). A budget below
`MINIMUM_BYTES` is refused when the project is loaded (PZ0713): DuckDB cannot hold one row group of a wide
table for each of two instances in less.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

# "320MB": the budget where the machine has 1.28 GB of memory or more. A universal-tier 10M-row PostgreSQL →
# DuckDB file run (staging and the sink file's instance both open) peaked at 702 MiB with 384MB, 655 with 320
DEFAULT_BYTES = 320 * 1000**2
MINIMUM_BYTES = 64 * 1000**2  # "64MB": two database instances of 32MB each
_UNITS = {"KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4}
_UNITS |= {"KIB": 1024, "MIB": 1024**2, "GIB": 1024**3, "TIB": 1024**4}
_CGROUP_LIMIT = "/sys/fs/cgroup/memory.max"


def size_bytes(text: str) -> int:
    """'512MB', ' 2 GiB ' in bytes (DuckDB's units: MB is 1000^2, MiB 1024^2); ValueError otherwise."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B)\s*", text, re.IGNORECASE)
    if not match:
        raise ValueError(f"not a byte size: {text!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def default_limit() -> str:
    """The default budget: 320MB, or a quarter of the machine's memory (a cgroup limit included) when that
    is less, never below the minimum."""
    quarter = machine_memory() // 4
    chosen = max(MINIMUM_BYTES, min(DEFAULT_BYTES, quarter)) if quarter > 0 else DEFAULT_BYTES
    return f"{chosen // 1000**2}MB"


def machine_memory() -> int:
    """Physical memory in bytes, or the cgroup's memory limit where that is lower; 0 when unknown."""
    total = 0
    with contextlib.suppress(ValueError, OSError, AttributeError):
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    with contextlib.suppress(ValueError, OSError):
        with open(_CGROUP_LIMIT, encoding="ascii") as handle:
            text = handle.read().strip()
        if text.isdigit():
            total = min(total, int(text)) if total else int(text)
    return total


class Budget:
    """The process's budget and the database instances sharing it (a control cursor each)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._total = DEFAULT_BYTES
        # id(connection) -> (the connection, kept so its id is not reused; a control cursor of its instance)
        self._members: dict[int, tuple[duckdb.DuckDBPyConnection, duckdb.DuckDBPyConnection]] = {}

    @property
    def total(self) -> int:
        return self._total

    def helper_limit(self) -> str:
        return f"{max(1, self._total // 1000)}KB"

    def set_total(self, limit: str) -> None:
        """The budget for the instances opened from now on (the run's engine.memory_limit)."""
        with self._lock:
            self._total = size_bytes(limit)
            self._apply()

    def join(self, con: duckdb.DuckDBPyConnection) -> None:
        """`con`'s instance takes a share; every member's memory_limit is set to the new share."""
        with self._lock:
            self._members[id(con)] = (con, con.cursor())
            self._apply()

    def leave(self, con: duckdb.DuckDBPyConnection) -> None:
        """`con`'s instance gives its share back (call before closing it)."""
        with self._lock:
            member = self._members.pop(id(con), None)
            if member is not None:
                with contextlib.suppress(Exception):
                    member[1].close()
            self._apply()

    def share(self) -> int:
        with self._lock:
            return self._share()

    def _share(self) -> int:
        # never below half the minimum: instances left open by mistake must not starve the ones in use
        return max(MINIMUM_BYTES // 2, self._total // max(1, len(self._members)))

    def _apply(self) -> None:
        import duckdb

        while True:
            share = f"{max(1, self._share() // 1000)}KB"
            closed = []
            for key, (_, control) in self._members.items():
                try:
                    control.execute(f"SET memory_limit = '{share}'")
                except duckdb.ConnectionException:
                    closed.append(key)  # closed without leaving: its share returns to the others
                except duckdb.Error:
                    pass  # cannot evict down to the new share yet: it keeps its limit until the next change
            if not closed:
                return
            for key in closed:
                del self._members[key]


BUDGET = Budget()
