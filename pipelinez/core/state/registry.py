"""Finding state backends by name: `local` is built in; others are entry points in group
`pipelinez.state_backends` (a plugin is one `StateBackend` subclass), with pz's own backends known by
import path too (so a source checkout finds them without reinstalling)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from pipelinez.core.diagnostics import error
from pipelinez.core.state.backend import StateBackend, StateBackendError
from pipelinez.core.state.local import LocalBackend

GROUP = "pipelinez.state_backends"
BUILTIN = {
    "postgres": "pipelinez.connectors.postgres.state_backend:PostgresBackend",
    "s3": "pipelinez.connectors.s3.state_backend:S3StateBackend",
    "azureblob": "pipelinez.connectors.azureblob.state_backend:AzureBlobStateBackend",
}


def available() -> dict[str, str]:
    """Every backend name with its `module:Class` (entry points override the builtin table)."""
    found = dict(BUILTIN)
    for ep in entry_points(group=GROUP):
        found[ep.name] = ep.value
    return found


def backend_class(name: str) -> type[StateBackend]:
    target = available().get(name)
    if target is None:
        raise StateBackendError(
            [
                error(
                    "PZ0132",
                    f"state backend '{name}' is not available",
                    file="project.yml",
                    next_step="use `backend: local`, `postgres`, `s3` or `azureblob`, or install the "
                    f"package that registers '{name}' in entry-point group {GROUP}",
                )
            ]
        )
    module, _, attr = target.partition(":")
    cls: type[StateBackend] = getattr(importlib.import_module(module), attr)
    return cls


def open_backend(state_dir: Path, project: str, settings: Mapping[str, Any] | None) -> StateBackend:
    """The project's backend: the local `.pz/` folder without a `state:` block (or `backend: local`)."""
    name = str((settings or {}).get("backend") or "local")
    if name == "local":
        return LocalBackend(state_dir, project, settings or {})
    return backend_class(name)(project, settings or {})
