"""Configuration pz parses but does not implement yet: refused (or warned about), never accepted silently.

One function per feature; when the feature ships, delete its function and its call in `check`.
"""

from __future__ import annotations

from collections.abc import Mapping

from pipelinez.config.model import Project
from pipelinez.core.diagnostics import Diagnostic, Place, error


def check(project: Project) -> list[Diagnostic]:
    """Errors and warnings for every use of a feature this version does not have."""
    return [*_incremental_sync(project)]


def _incremental_sync(project: Project) -> list[Diagnostic]:
    """`sync:` would be ignored: every run reads in full, and an append downstream duplicates rows."""
    return [
        error(
            "PZ0233",
            f"source '{s_name}' dataset '{d_name}' declares sync: mode "
            f"{(dataset.sync or {}).get('mode', 'incremental')}; incremental reads are not available in this "
            "version of pz, so every run would read the whole dataset",
            place=project.locate(source.file, ("datasets", d_name, "sync")),
        )
        for s_name, source in sorted(project.sources.items())
        for d_name, dataset in sorted(source.datasets.items())
        if dataset.sync is not None
    ]


def sql_incremental(named: Mapping[tuple[str, str], Place]) -> list[Diagnostic]:
    """watermark() would filter in SQL only: nothing pushes the bound down, stores a watermark or moves it,
    so every run would read the whole dataset. Reported after the SQL route's own checks (PZ0224-PZ0227),
    for every dataset a watermark() call names, whatever its YAML `sync:` says."""
    return [
        error(
            "PZ0233",
            f"source '{src}' dataset '{ds}' is declared incremental in SQL (watermark()); incremental reads "
            "are not available in this version of pz, so every run would read the whole dataset",
            place=place,
            next_step="remove the watermark() comparison (each run then reads the dataset in full)",
        )
        for (src, ds), place in sorted(named.items())
    ]
