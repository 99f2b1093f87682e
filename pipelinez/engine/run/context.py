"""What every node of one run shares: ids, the staging database, the event bus."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pipelinez.compile.dag import CompiledDag
from pipelinez.compile.nodes import SinkWriteNode, SourceLoadNode
from pipelinez.config.model import Project
from pipelinez.connectors import registry
from pipelinez.core import duck_catalog, duck_connect, failpoints
from pipelinez.core.memory_budget import BUDGET
from pipelinez.core.sqlnames import quote_literal
from pipelinez.core.vocabulary import Tier
from pipelinez.engine.events import EventBus, Note
from pipelinez.engine.nodes.partitions import LandedParts
from pipelinez.engine.run.failures import NodeFailure
from pipelinez.engine.run.scheduler import GroupSlots
from pipelinez.engine.staging.staging_store import Reuse, kept_tables, prune, seed_source, unseed
from pipelinez.engine.state.run_results import PartitionResult
from pipelinez.plan.planner import Plan

if TYPE_CHECKING:
    import duckdb


@dataclass
class RunContext:
    run_id: str
    run_dir: Path
    plan: Plan
    bus: EventBus
    staging: duckdb.DuckDBPyConnection
    _cursors: set[duckdb.DuckDBPyConnection] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _interrupted: bool = False  # set by interrupt_all: no new cursor after it
    landed: LandedParts[PartitionResult] = field(default_factory=LandedParts)  # kept for a next attempt
    slots: GroupSlots = field(init=False)  # each instance's max_concurrency, shared by nodes and partitions

    def __post_init__(self) -> None:
        self.slots = GroupSlots(instance_limits(self.plan) if self.plan is not None else {})

    @property
    def dag(self) -> CompiledDag:
        return self.plan.dag

    @property
    def interrupted(self) -> bool:
        """Ctrl-C or fail-fast went by: work between two statements stops rather than starting the next."""
        return self._interrupted

    @property
    def project(self) -> Project:
        return self.plan.dag.project

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor of the staging database; refused once the run was interrupted (Ctrl-C, fail-fast), so
        work that had not started its query yet does not start it after the interrupt went by."""
        cur = self.staging.cursor()
        with self._lock:
            if self._interrupted:
                cur.close()
                raise NodeFailure("PZ0514", "interrupted before it started")
            self._cursors.add(cur)
        return cur

    def release(self, cur: duckdb.DuckDBPyConnection) -> None:
        """Close a cursor handed out by `cursor()` and forget it."""
        with self._lock:
            self._cursors.discard(cur)
        cur.close()

    def close(self) -> None:
        """Close the cursors nobody released (a runner that died mid-attempt); the run is over."""
        with self._lock:
            leftover, self._cursors = list(self._cursors), set()
        for cur in leftover:
            try:
                cur.close()
            except Exception:  # already closed with its connection; nothing left to release
                continue

    def interrupt_all(self) -> None:
        """Fail-fast and Ctrl-C: interrupt every query running in staging; no new cursor after this."""
        with self._lock:
            self._interrupted = True
            for cur in list(self._cursors):
                try:
                    cur.interrupt()
                except Exception:  # a cursor closed meanwhile has nothing to interrupt
                    continue

    def note(self, message: str) -> None:
        self.bus.publish(Note(self.run_id, message=message))

    def borrow(self, group: str, wanted: int) -> int:
        return self.slots.take(group, wanted)

    def give_back(self, group: str, n: int) -> None:
        self.slots.give(group, n)


def instance_limits(plan: Plan) -> dict[str, int]:
    """Each source/sink instance's `max_concurrency`: the reads and writes against it at once."""
    return {p.node.instance: p.max_concurrency for p in plan.nodes if p.node.instance and p.max_concurrency}


STAGING_STORAGE = "v1.2.0"


def close_staging(con: duckdb.DuckDBPyConnection) -> None:
    """Close a staging database opened by `open_staging`, its share of the memory budget given back first."""
    duck_connect.release(con)
    con.close()


def open_staging(
    path: Path, memory_limit: str, extensions: Sequence[str] = (), project: Path | None = None
) -> duckdb.DuckDBPyConnection:
    """`extensions`: extension files the run's connectors LOAD natively (`staging_extensions`); those pz
    finds intact are loaded first, without DuckDB's signature check, and the instance is locked back to
    signed extensions only before anything else runs (`core.duck_extensions`; `project`: the root whose
    `.pz/target` remembers the files found intact)."""
    # A new staging file is created in DuckDB's v1.2 storage format, which compresses text with zstd
    # (engine.staging_compression: zstd); files the run attaches (DuckDB sinks) keep DuckDB's default format.
    # engine.memory_limit is the process's budget (core/memory_budget.py): staging shares it with any DuckDB
    # file opened in its own instance while the run holds both
    BUDGET.set_total(memory_limit)
    shipped: list[str] = []
    if extensions:  # a run without such a connector does not import the check
        from pipelinez.core.duck_extensions import trusted

        shipped = trusted(extensions, project)
    config: dict[str, str | bool | int | float | list[str]] = {
        "storage_compatibility_version": STAGING_STORAGE
    }
    if shipped:  # and nothing autoloaded while unsigned files are allowed (e.g. replaying a retry's seed)
        config["allow_unsigned_extensions"] = True
        config["autoload_known_extensions"] = False
    con = duck_connect.connect(str(path), config=config, share=True)
    try:
        _load_shipped(con, shipped)
        _set_up_staging(con, path)
    except BaseException:  # not left holding a share of the budget (and the file) for the process's life
        close_staging(con)
        raise
    return con


def _load_shipped(con: duckdb.DuckDBPyConnection, files: Sequence[str]) -> None:
    """LOAD `files` (checked intact) into an instance opened with `allow_unsigned_extensions`, then lock it:
    DuckDB refuses to set the option back, so every later LOAD (the project's SQL's too) needs a signature.
    A file that fails to load is left to its connector's own LOAD, which reports why."""
    import duckdb

    if not files:
        return
    try:
        for file in files:
            with contextlib.suppress(duckdb.Error):
                con.execute(f"LOAD {quote_literal(file)}")
    finally:
        con.execute("SET allow_unsigned_extensions = false")
    row = con.execute("SELECT current_setting('allow_unsigned_extensions')").fetchone()
    if not row or row[0] is not False:  # never hand out an instance that loads unsigned files
        raise RuntimeError("the staging database still allows unsigned extensions")
    con.execute("SET autoload_known_extensions = true")  # DuckDB's default again, now that it is locked


def staging_extensions(plan: Plan) -> list[str]:
    """The extension files the connectors of the plan's native source loads and sink writes LOAD into
    staging (`Connector.staging_extensions`), for `open_staging`."""
    names = {
        p.node.work.endpoint.connector
        for p in plan.nodes
        if isinstance(p.node, SourceLoadNode | SinkWriteNode) and p.node.work.tier == Tier.NATIVE
    }
    files: list[str] = []
    for name in sorted(names):
        try:
            files += registry.load_class(name).staging_extensions()
        except Exception:  # a connector whose code cannot load fails its own nodes, with its own error
            continue
    return files


def _set_up_staging(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    failpoints.hit("staging.set_up")
    con.execute("RESET storage_compatibility_version")
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"SET temp_directory = {quote_literal((path.parent / 'tmp').as_posix())}")
    con.execute("SET preserve_insertion_order = true")
    # Durability without the shutdown checkpoint: bulk data is written to its blocks as it lands and the WAL
    # only points at them, so closing is instant and a retry re-opens the file just as fast. Checkpointing
    # 10M staged rows at close cost more than extracting them.
    con.execute("PRAGMA disable_checkpoint_on_shutdown")
    con.execute("SET checkpoint_threshold = '1TB'")
    # nodes ATTACH their databases to this instance: a missing name's error must not go looking through them
    duck_catalog.isolate(con)


def fold_wal(staging: duckdb.DuckDBPyConnection) -> None:
    """Checkpoint a failed run's staging before it closes: `pz retry` opens this file twice (its reuse checks,
    then the seeded copy), and each open would replay the WAL, where DuckDB keeps tables smaller than a row
    group row by row (0.4-1.0 s for a 100k-row load and a pipeline result). A run that succeeded closes
    without it (nothing will reopen it soon); an interrupted one stops at once."""
    import duckdb

    with contextlib.suppress(duckdb.Error):
        staging.execute("CHECKPOINT")


def open_run_staging(path: Path, plan: Plan, reuse: Mapping[str, Reuse]) -> duckdb.DuckDBPyConnection:
    """The run's staging database: fresh, or for a retry seeded from the failed run's staging and pruned
    to the tables it reuses. A seed that cannot be opened is dropped for a fresh staging (the reused loads
    then copy their tables across, or extract them with a note)."""
    import duckdb

    project = plan.dag.project
    memory_limit, extensions = project.engine.memory_limit, staging_extensions(plan)
    source = seed_source(reuse)
    if source is not None and source[0].seed(source[1], path):
        try:
            con = open_staging(path, memory_limit, extensions, project.root)
        except duckdb.Error:
            unseed(path)
        else:
            try:
                prune(con, kept_tables(reuse))
                return con
            except duckdb.Error:
                close_staging(con)
                unseed(path)
    return open_staging(path, memory_limit, extensions, project.root)
