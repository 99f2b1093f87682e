"""Finding connectors: entry points in group `pipelinez.connectors`, manifests read as data.

`manifest_of` never imports connector code (tier 3 works offline and for connectors the CLI has never
seen); `load_class` imports it, and turns any failure into a ConnectorHostError (PZ0701).
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TYPE_CHECKING

from pipelinez.core.diagnostics import ConnectorHostError, error

if TYPE_CHECKING:  # imported when a manifest is read or a class loaded: `installed()` needs neither
    from pipelinez.connectors.sdk import Connector, Manifest

GROUP = "pipelinez.connectors"


@dataclass(frozen=True)
class InstalledConnector:
    """A connector found among the installed entry points, with its distribution and version."""

    name: str
    entry_point: EntryPoint
    distribution: str | None
    version: str | None


@cache
def installed() -> dict[str, InstalledConnector]:
    found: dict[str, InstalledConnector] = {}
    named: dict[int, tuple[str | None, str | None]] = {}  # a distribution's name, version: METADATA read once
    for ep in entry_points(group=GROUP):
        dist = ep.dist
        if dist is None:
            found[ep.name] = InstalledConnector(ep.name, ep, None, None)
            continue
        if id(dist) not in named:  # `.name` and `.version` each parse METADATA again (pz's: 7 connectors)
            metadata = dist.metadata
            named[id(dist)] = (metadata["Name"], metadata["Version"])
        name, version = named[id(dist)]
        found[ep.name] = InstalledConnector(ep.name, ep, name, version)
    return found


def _module_dir(ep: EntryPoint) -> Path | None:
    module = ep.value.split(":", 1)[0]
    parent = module.rsplit(".", 1)[0] if "." in module else module
    spec = importlib.util.find_spec(parent)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@cache
def manifest_of(name: str) -> Manifest:
    """The manifest of an installed connector, read as data. ConnectorHostError when broken."""
    from pipelinez.connectors.sdk import Manifest

    conn = installed().get(name)
    if conn is None:
        raise ConnectorHostError([error("PZ0215", f"connector '{name}' is not installed")])
    folder = _module_dir(conn.entry_point)
    path = folder / "manifest.json" if folder else None
    if path is None or not path.is_file():
        raise ConnectorHostError(
            [error("PZ0702", f"connector '{name}' ships no manifest.json next to {conn.entry_point.value}")]
        )
    try:
        return Manifest.load(path)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConnectorHostError(
            [error("PZ0702", f"connector '{name}' manifest {path} is malformed: {exc}")]
        ) from exc


def load_class(name: str) -> type[Connector]:
    from pipelinez.connectors.sdk import Connector

    conn = installed().get(name)
    if conn is None:
        raise ConnectorHostError([error("PZ0215", f"connector '{name}' is not installed")])
    try:
        module_name, _, attr = conn.entry_point.value.partition(":")
        module = importlib.import_module(module_name)
        cls = getattr(module, attr)
    except Exception as exc:  # any import-time failure of third-party code is a host error
        raise ConnectorHostError(
            [
                error(
                    "PZ0701",
                    f"connector '{name}' ({conn.distribution or conn.entry_point.value}) failed to load: "
                    f"{type(exc).__name__}: {exc}",
                )
            ]
        ) from exc
    if not (isinstance(cls, type) and issubclass(cls, Connector)):
        raise ConnectorHostError(
            [error("PZ0701", f"connector '{name}' entry point is not a Connector class")]
        )
    return cls
