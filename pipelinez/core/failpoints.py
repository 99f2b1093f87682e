"""Failpoints: named seams where tests make pz fail on purpose.

`hit(name)` does nothing unless the environment variable `PZ_FAILPOINTS` (comma-separated) names it:
- `name` raises `RuntimeError("failpoint name")` (an ordinary failure, cleaned up like any other);
- `name:kill` ends the process at once with exit code 137, as `kill -9` would (no cleanup, no finally);
- `name:kill-once` does that the first time only: it leaves a marker file in the folder `PZ_FAILPOINTS_DIR`
  names (without that variable, every time), so a test can kill an attempt and see the next one succeed.
A seam that passes a `scope` (a node's name) also answers to `name@scope` and `name@scope:kill`, so a test can
fail one node's write and not the others'. Seams inside connectors take the scope the engine set around the
node (`scoped(node.name)`), so `sink.before_swap@pg.orders:kill` kills only that write.

Known names:
- `sink.before_swap`: a sink's replace has written its temp table/folder/prefix and is about to swap it in.
- `sink.during_promote`: an object-store replace has copied its new objects over the output's and is about to
  delete the output's other objects (a promote of several objects or with objects to delete has backed up
  the output and written its journal first: a failure here is undone from the backup, a kill by the next
  write).
- `sink.promote_restore`: a promote of several objects is about to put the output back from its backup
  (after a failure inside it, or at the start of the next write after a kill).
- `s3.part_copied`: an s3 promote of an object too large for one CopyObject has copied one part of its
  multipart copy (the upload is incomplete: the destination is unchanged).
- `azure.copy_started`: an azureblob promote has started its Copy Blob (Azurite finishes it at once) and is
  about to follow it; a failure here is undone from the snapshot taken before the copy.
- `sink.before_merge`: a merge has loaded its work table and is about to upsert it (postgres, mysql), or has
  run its MERGE and is about to commit (duckdb).
- `sink.after_batch`: an append has committed one batch (postgres, mysql).
- `sink.write` (scoped): a sink write is about to hand its data to the connector.
- `sink.committed` (scoped): a sink write has committed; the engine has not recorded it yet.
- `source.landed` (scoped): a source load (or one of its partitions) has landed in staging.
- `reuse.copy` (scoped): a retry is about to copy a reused load's table (a failure falls back to extraction).
- `staging.set_up`: a staging database (a run's, a preview's, a Ray task's) is open and about to be set up.
- `run.after_nodes`: every node settled, watermarks not committed yet (an orchestrator-level failure: PZ0512).
- `pipeline.start` (scoped): a pipeline is about to run in staging.
- `state.commit_watermarks`: the state backend (the local .pz/state.duckdb, or a shared one: postgres, s3,
  azureblob) is about to commit the run's watermarks (a failure: the backend unreachable at the end of the
  run, PZ0525).
- `state.watermarks_committed`: the run's watermarks were committed (or refused); run_results.json does not
  say so yet.
- `state.mirror`: a run's file (run_results.json, events.jsonl) is about to be copied to a shared state
  backend while the run lives (the background mirror; a failure is retried by the next copy).
- `state.lease_renew`: the holder of a shared backend's project lock is about to renew its lease (the first
  renewal names the run it serves, at the run's start).
- `results.before_rename` (scoped by the write's number, 1 = the run's first): run_results.json's temp file is
  written and about to replace the file.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar

ENV = "PZ_FAILPOINTS"
DIR_ENV = "PZ_FAILPOINTS_DIR"
_scope: ContextVar[str | None] = ContextVar("pz_failpoint_scope", default=None)


@contextlib.contextmanager
def scoped(name: str) -> Iterator[None]:
    """Seams hit inside this block (in this thread) answer to `seam@name` too."""
    token = _scope.set(name)
    try:
        yield
    finally:
        _scope.reset(token)


def hit(name: str, scope: str | None = None) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    entries = {entry.strip() for entry in spec.split(",")}
    scope = scope or _scope.get()
    for key in (name, f"{name}@{scope}") if scope else (name,):
        if f"{key}:kill" in entries or (f"{key}:kill-once" in entries and _first_time(key)):
            os._exit(137)
        if key in entries:
            raise RuntimeError(f"failpoint {key}")


def _first_time(key: str) -> bool:
    folder = os.environ.get(DIR_ENV)
    if not folder:
        return True
    try:
        with open(os.path.join(folder, f"{key}.hit"), "x", encoding="utf-8"):
            return True
    except FileExistsError:
        return False
