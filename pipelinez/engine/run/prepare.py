"""Load → compile → plan: tiers 1-4 (5 with `connect`), every diagnostic gathered, for the facade
(`pipelinez.api.Project`) and `pz docs`/`pz lineage`. Decides; never prints.

A compile goes through the facade's `CompileCache` when one is given (not with `describe`, nor the
recompile that binds what tier 5 fetched). Refusals raise PzValidationError with every diagnostic of every
tier that ran.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pipelinez.compile.compiler import CompileResult, compile_project
from pipelinez.compile.dag import CompiledDag
from pipelinez.compile.described import Described
from pipelinez.config.loader import find_project_root, load_project
from pipelinez.config.model import Project
from pipelinez.core.diagnostics import Diagnostic, PzValidationError
from pipelinez.core.run_state import RunState, StateFileError, Watermark
from pipelinez.core.state.backend import StateBackendError
from pipelinez.engine.run.compile_cache import CompileCache, tree_key
from pipelinez.engine.run.folder_key import snapshot, walk_once
from pipelinez.engine.run.validate_cache import parse_cache

if TYPE_CHECKING:
    from pipelinez.plan.planner import Plan


@dataclass
class Validation:
    """A validation's project, compile and every diagnostic of every tier."""

    project: Project | None
    errors: list[Diagnostic] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    compiled: CompileResult | None = None


def validate(
    project_dir: Path | None,
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    connect: bool = False,
    full_refresh: bool = False,
    describe: bool = False,
    compiles: CompileCache | None = None,
    ids: bool = True,
) -> Validation:
    """Tiers 1-4 (and 5 with `connect`); every diagnostic gathered. Never raises for user errors.
    Incremental datasets are compiled against their committed watermarks, none with `full_refresh`.
    `describe`: also gather the tables' columns and queries lineage and `pz docs` read. `compiles`: the
    cache the compile goes through; with it, `ids=False` may leave the nodes without their content-hash
    ids (a validate runs nothing: the cache gives them to a later plan or run that asks for them)."""
    # the folder discovered and read once: for the compile cache's key and the load; the collector paused
    # while the project's objects pile up
    with walk_once(), collector_paused():
        return _validate(project_dir, overrides, environ, connect, full_refresh, describe, compiles, ids)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off inside, on again after (unless the caller had it off). A compile of
    a large project allocates hundreds of thousands of objects that live until it ends (the project, its
    rendered SQL, the nodes): every 700 allocations the collector looked at them, more and more often all of
    them, at 2,000 pipelines about a third of a re-validation's CPU, freeing nothing. Paused, reference
    counting still frees what has no cycle; what the compile left in cycles is collected after it. The switch
    is the process's: another thread's cycles wait too, and of two validates at once the first to end turns
    it back on (only later collection, never a different result)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _validate(
    project_dir: Path | None,
    overrides: Mapping[str, str] | None,
    environ: Mapping[str, str] | None,
    connect: bool,
    full_refresh: bool,
    describe: bool,
    compiles: CompileCache | None,
    ids: bool = True,
) -> Validation:
    root = find_project_root(project_dir or Path.cwd())
    cached = compiles is not None and not describe
    tree = tree_key(root) if cached else None  # keyed before loading: an edit meanwhile is never stored
    # the bytes that key read (inside walk_once), the YAML files parsed before by content
    project, diags = load_project(root, partial=True, snapshot=snapshot(root), parsed=parse_cache(root))
    errors = [d for d in diags if d.is_error]
    warnings = [d for d in diags if not d.is_error]
    if project is None:
        return Validation(None, errors, warnings)
    try:
        watermarks = committed_watermarks(project, full_refresh, environ, overrides)
        unreadable: list[Diagnostic] = []
    except (
        StateFileError,
        StateBackendError,
    ) as exc:  # a broken or locked state file matters to incremental datasets only
        watermarks, unreadable = {}, list(exc.diagnostics)
    if compiles is not None and cached:
        compiled = compiles.compile(project, overrides, environ, watermarks, tree, ids=ids or connect)
    else:
        compiled = compile_project(project, overrides, environ, watermarks, describe=describe)
    if compiled.incremental:
        errors += unreadable
    found: list[Diagnostic] = []
    warned: list[Diagnostic] = []
    if connect and not errors and not compiled.errors and compiled.dag is not None:
        from pipelinez.engine.connect.connectivity import (
            check_connectivity,
        )  # tier 5 only: not on a run's path

        found, warned, fetched = check_connectivity(compiled.dag)
        if fetched and any(w.code == "PZ0406" for w in compiled.warnings):
            # tier 4 bound loosely what tier 5 has just fetched: bind it now, in this same command
            compiled = compile_project(project, overrides, environ, watermarks, fetched, describe=describe)
    errors += compiled.errors + found
    warnings += compiled.warnings + warned
    return Validation(project, errors, warnings, compiled)


def committed_watermarks(
    project: Project,
    full_refresh: bool = False,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, str] | None = None,
) -> dict[tuple[str, str], Watermark]:
    """The committed watermark of every incremental dataset (none for a full refresh), from the project's
    state backend (the local .pz/state.duckdb without a `state:` block; its block rendered with the --var
    `overrides`). A `state:` block that cannot be rendered reads none here: the compile reports its errors.
    A run reads them under the project lock (workflow.run), so no other run commits in between."""
    if full_refresh:
        return {}
    if not project.state:
        return RunState(project.state_dir).watermarks()
    from pipelinez.engine.state.shared import project_backend, pull_schema_cache  # a `state:` block only

    try:
        backend = project_backend(project, environ, overrides)
    except PzValidationError:
        return {}
    try:
        with contextlib.suppress(OSError):  # a missing cache only makes tier 4 bind loosely
            pull_schema_cache(backend, project.state_dir)
        return backend.watermarks()
    finally:
        backend.close()


def checked_dag(
    project_dir: Path | None,
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    full_refresh: bool = False,
    compiles: CompileCache | None = None,
) -> tuple[CompiledDag, list[Diagnostic]]:
    """(the compiled project, warnings); raises PzValidationError with every error."""
    checked = validate(project_dir, overrides, environ, full_refresh=full_refresh, compiles=compiles)
    if checked.errors or checked.compiled is None or checked.compiled.dag is None:
        raise PzValidationError([*checked.errors, *checked.warnings])
    return checked.compiled.dag, checked.warnings


def plan(
    project_dir: Path | None,
    select: Sequence[str] = (),
    exclude: Sequence[str] = (),
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    full_refresh: bool = False,
    compiles: CompileCache | None = None,
) -> tuple[Plan, list[Diagnostic]]:
    """(plan, warnings); raises PzValidationError with every error."""
    dag, warnings = checked_dag(project_dir, overrides, environ, full_refresh, compiles)
    return _planned(dag, select, exclude, warnings)


def described_plan(
    project_dir: Path | None,
    select: Sequence[str] = (),
    exclude: Sequence[str] = (),
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    full_refresh: bool = False,
    describe: bool = False,
) -> tuple[Plan, Described | None, list[Diagnostic]]:
    """(plan, with `describe` the described tables lineage and `pz docs` read, warnings); raises
    PzValidationError with every error."""
    checked = validate(project_dir, overrides, environ, full_refresh=full_refresh, describe=describe)
    if checked.errors or checked.compiled is None or checked.compiled.dag is None:
        raise PzValidationError([*checked.errors, *checked.warnings])
    the_plan, warnings = _planned(checked.compiled.dag, select, exclude, checked.warnings)
    return the_plan, checked.compiled.described, warnings


def _planned(
    dag: CompiledDag, select: Sequence[str], exclude: Sequence[str], warnings: list[Diagnostic]
) -> tuple[Plan, list[Diagnostic]]:
    """(the plan of the selection, the compile's warnings and the selection's: PZ0250, PZ0251)."""
    from pipelinez.plan.planner import build_plan  # not for `pz validate`

    the_plan, diags = build_plan(dag, select, exclude)
    errors = [d for d in diags if d.is_error]
    if errors:
        raise PzValidationError([*errors, *warnings])
    return the_plan, [*warnings, *diags]
