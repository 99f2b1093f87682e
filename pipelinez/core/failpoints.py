"""Failpoints: named seams where tests make pz fail on purpose.

`hit(name)` does nothing unless the environment variable `PZ_FAILPOINTS` (comma-separated) names it:
- `name` raises `RuntimeError("failpoint name")` (an ordinary failure, cleaned up like any other);
- `name:kill` ends the process at once with exit code 137, as `kill -9` would (no cleanup, no finally).
A seam that passes a `scope` (a node's name) also answers to `name@scope` and `name@scope:kill`, so a test can
fail one node's write and not the others'.

Known names:
- `sink.before_swap`: a sink's replace has written its temp table/folder and is about to swap it in.
- `sink.write` (scoped): a sink write is about to hand its data to the connector.
- `sink.committed` (scoped): a sink write has committed; the engine has not recorded it yet.
- `source.landed` (scoped): a source load (or one of its partitions) has landed in staging.
- `pipeline.start` (scoped): a pipeline is about to run in staging.
- `results.before_rename` (scoped by the write's number, 1 = the run's first): run_results.json's temp file is
  written and about to replace the file.
"""

from __future__ import annotations

import os

ENV = "PZ_FAILPOINTS"


def hit(name: str, scope: str | None = None) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    entries = {entry.strip() for entry in spec.split(",")}
    for key in (name, f"{name}@{scope}") if scope else (name,):
        if f"{key}:kill" in entries:
            os._exit(137)
        if key in entries:
            raise RuntimeError(f"failpoint {key}")
