"""The project's state backend as the engine uses it: opened from the rendered `state:` block, the run
history mirrored into it as the run writes it locally, and pulled back into `.pz/runs` (hydrated) before
`pz runs` and `pz retry` read it, so a fresh worker sees the runs other workers made.

A hydrated run still recorded as running whose lease no live process holds is written with pid 0: no
process on this machine will finish it, so `pz runs` shows it interrupted and `pz retry` refuses with
PZ0503 (its statuses cannot be trusted), whichever machine ran it.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from pathlib import Path

from pipelinez.compile.state_block import resolve_state
from pipelinez.compile.templating import Templater
from pipelinez.compile.values import resolve_values
from pipelinez.config.loader import load_project
from pipelinez.config.model import Project
from pipelinez.core.diagnostics import PzValidationError
from pipelinez.core.json_types import JsonObject
from pipelinez.core.state.backend import EVENTS, RESULTS, RUN_FILES, StateBackend
from pipelinez.core.state.local import LocalBackend
from pipelinez.core.state.registry import open_backend
from pipelinez.engine.run.failures import DEBUG_LOG

SCHEMA_CACHE = "schemas.json"  # .pz/target/schemas.json: the columns `validate --connect` fetched


def backend_for(project: Project, settings: JsonObject) -> StateBackend:
    """The backend of a compiled project (`CompiledDag.state`, already rendered)."""
    return open_backend(project.state_dir, project.name, settings)


def project_backend(
    project: Project, environ: Mapping[str, str] | None = None, overrides: Mapping[str, str] | None = None
) -> StateBackend:
    """The backend of a loaded project, its `state:` block rendered here with the command's --var
    `overrides` (the vars a run compiles with); PzValidationError when the block itself is wrong (the rest
    of the project is not checked here)."""
    if not project.state:
        return LocalBackend(project.state_dir, project.name)
    values, _found = resolve_values(project, overrides or {}, environ)
    settings, problems = resolve_state(project, Templater(values, project.macro_files))
    errors = [d for d in problems if d.is_error]
    if errors:
        raise PzValidationError(errors)
    return backend_for(project, settings)


def backend_at(
    root: Path, environ: Mapping[str, str] | None = None, overrides: Mapping[str, str] | None = None
) -> StateBackend:
    """The backend of the project at `root`, its block rendered with `overrides` (--var); the local folder
    when project.yml cannot be loaded: commands like `pz clean` still work on what is here."""
    if not _declares_state(root):  # the common case, without loading the whole project
        return LocalBackend(root / ".pz")
    project, _ = load_project(root, partial=True)
    if project is None:
        return LocalBackend(root / ".pz")
    return project_backend(project, environ, overrides)


def _declares_state(root: Path) -> bool:
    """Whether project.yml may have a `state:` block: parsed as YAML by pz's own loader whenever its text
    could spell the key (`state` in it, or a backslash escape), so a quoted key, a BOM or a `<<:` merge
    are seen as pz sees them. YAML pz cannot parse answers yes (the project's load reports it); a false yes
    only costs the project's load."""
    path = root / "project.yml"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    if "state" not in text and "\\" not in text:
        return False
    from pipelinez.config.yaml_loader import load_yaml_file  # YAML's parser: not on a run of a cached project

    doc, _problems = load_yaml_file(path, "project.yml")
    return doc is None or (isinstance(doc.data, dict) and "state" in doc.data)


def mirror(backend: StateBackend, run_id: str, run_dir: Path, names: tuple[str, ...] = RUN_FILES) -> None:
    """Copy the run's files as written locally into a shared backend (nothing for the local one)."""
    if not backend.remote:
        return
    for name in names:
        try:
            text = (run_dir / name).read_text(encoding="utf-8")
        except OSError:
            continue
        backend.put_run_file(run_id, name, text)


def hydrate(backend: StateBackend, state_dir: Path, only: Collection[str] | None = None) -> list[str]:
    """Write into `.pz/runs` every run of a shared backend missing here (of `only` when given: ids the
    caller took from `backend.run_ids()`); the ids written."""
    if not backend.remote:
        return []
    runs = state_dir / "runs"
    lease = backend.lease()
    live = lease.holder.run_id if lease is not None and not lease.expired else None
    written = []
    for run_id in backend.run_ids() if only is None else sorted(only):
        folder = runs / run_id
        if run_id == live or not _missing_or_orphaned(folder / RESULTS):
            continue
        results = backend.get_run_file(run_id, RESULTS)
        if results is None or _same(folder / RESULTS, _orphaned(results)):
            continue
        folder.mkdir(parents=True, exist_ok=True)
        events = backend.get_run_file(run_id, EVENTS)
        if events is not None:
            (folder / EVENTS).write_text(events, encoding="utf-8")
        tmp = folder / f".{RESULTS}.tmp"
        tmp.write_text(_orphaned(results), encoding="utf-8")
        tmp.replace(folder / RESULTS)
        written.append(run_id)
    if written:
        DEBUG_LOG.info("runs read from %s: %s", backend.describe(), ", ".join(written))
    return written


def _missing_or_orphaned(path: Path) -> bool:
    """Whether `.pz/runs/<id>/run_results.json` is absent here, or a copy hydrated while its run was recorded
    as running (pid 0): read again, as the run may have gone on (its lease was read before its record, or it
    was taken over and finished by the holder) and its final record is in the backend now. A run this
    machine ran keeps its own record (its pid is real)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return True
    except (OSError, ValueError):
        return False  # unreadable: `pz runs` says so (PZ0523)
    return isinstance(data, dict) and data.get("status") == "running" and data.get("pid") == 0


def _same(path: Path, text: str) -> bool:
    try:
        return path.read_text(encoding="utf-8") == text
    except OSError:
        return False


def _orphaned(text: str) -> str:
    """A run recorded as running that no live lease serves: its pid means nothing here (pid 0)."""
    try:
        data = json.loads(text)
    except ValueError:
        return text  # unreadable: `pz runs` says so (PZ0523), like a local one
    if isinstance(data, dict) and data.get("status") == "running":
        data["pid"] = 0
        return json.dumps(data, indent=2) + "\n"
    return text


def pull_schema_cache(backend: StateBackend, state_dir: Path) -> None:
    """`.pz/target/schemas.json` from the shared backend (tier 4 binds columns with it): a fresh worker's,
    and a stale one refreshed when another machine's `validate --connect` recorded newer columns."""
    path = state_dir / "target" / SCHEMA_CACHE
    if not backend.remote:
        return
    data = backend.get_blob(SCHEMA_CACHE)
    if data is None:
        return
    try:
        if path.read_bytes() == data:
            return  # already the shared copy: left untouched
    except OSError:
        pass  # absent (a fresh worker) or unreadable: written below
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{SCHEMA_CACHE}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
