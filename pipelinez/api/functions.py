"""The facade's functions that need no project: `pz init`, `pz import dbt`, `pz schema`, and masking a crash
log's secrets."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipelinez.importers.dbt import ImportResult

PathLike = str | os.PathLike[str]


def init_project(directory: PathLike, *, force: bool = False) -> list[Path]:
    """Write the quickstart project into `directory` (`pz init`); the files written."""
    from pipelinez.scaffold.quickstart import write_quickstart

    return list(write_quickstart(Path(directory), force=force))


def import_dbt(source: PathLike, *, out: PathLike | None = None, target: str | None = None) -> ImportResult:
    """Write a pz project from the dbt project at `source` (`pz import dbt`): an ImportResult with the
    folder, the files written, the report and the warnings. Raises PzError with every problem found, and
    then writes nothing."""
    from pipelinez.importers.dbt import import_dbt as run_import

    return run_import(Path(source), Path(out) if out is not None else None, target)


def write_schemas(out: PathLike) -> list[Path]:
    """Write the JSON Schemas of the project files (`pz schema`); the files written."""
    from pipelinez.config.schemas import write_schemas as write

    return list(write(Path(out)))


def redact_secrets(root: Path, text: str) -> str:
    """`text` with the values of the project's secret env variables masked (for a crash log). Never raises:
    when the project cannot be read, nothing can be named and the text is returned as is."""
    from pipelinez.config.loader import load_project
    from pipelinez.core.redact import Redactor

    try:
        project, _ = load_project(root)
    except Exception:  # the crash may be in loading itself: then mask nothing we can't name
        return text
    if project is None:
        return text
    secrets = tuple(os.environ.get(n, spec.default or "") for n, spec in project.env.items() if spec.secret)
    return Redactor(secrets)(text)
