"""Failpoints: named seams where tests make pz fail on purpose.

`hit(name)` does nothing unless the environment variable `PZ_FAILPOINTS` (comma-separated) names it:
- `name` raises `RuntimeError("failpoint name")` (an ordinary failure, cleaned up like any other);
- `name:kill` ends the process at once with exit code 137, as `kill -9` would (no cleanup, no finally).

Known names:
- `sink.before_swap`: a sink's replace has written its temp table/folder and is about to swap it in.
"""

from __future__ import annotations

import os

ENV = "PZ_FAILPOINTS"


def hit(name: str) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    entries = {entry.strip() for entry in spec.split(",")}
    if f"{name}:kill" in entries:
        os._exit(137)
    if name in entries:
        raise RuntimeError(f"failpoint {name}")
