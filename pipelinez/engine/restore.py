"""`pz restore`: install the connector packages project.yml pins, into the running Python environment, and
write `pz.lock`.

Pins already satisfied by what is installed are left alone (no network). The others are installed in one
`pip install` of the running interpreter, so pip resolves them together and honours its own configuration
(PIP_INDEX_URL, pip.conf); `--index-url`, `--find-links` and `--no-index` are passed on, which is how a
restore works offline from a folder of wheels. Afterwards each pin is checked again against the entry
points that are now installed. Failures are RestoreError with PZ07xx codes, all of them reported at once.

pz.lock records, for every connector the project pins or uses, the package and version that provide it and
where it came from. It holds no timestamp, so it only changes when what is installed changes.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from pipelinez import __version__
from pipelinez.config.loader import load_project
from pipelinez.config.model import Project
from pipelinez.connectors import registry
from pipelinez.core.diagnostics import (
    ConnectorHostError,
    Diagnostic,
    PzConfigError,
    RestoreError,
    error,
)
from pipelinez.core.pins import Pin, PinError, parse_pin

LOCK_FILE = "pz.lock"
LOCK_VERSION = 1
BUILTIN = "pipelinez"
PIP_TAIL = 12  # lines of pip's output a failure quotes


@dataclass(frozen=True)
class PipOptions:
    index_url: str | None = None
    find_links: tuple[str, ...] = ()
    no_index: bool = False

    def args(self) -> list[str]:
        out: list[str] = []
        if self.index_url:
            out += ["--index-url", self.index_url]
        for link in self.find_links:
            out += ["--find-links", link]
        if self.no_index:
            out.append("--no-index")
        return out

    def source(self) -> str:
        """Where a package this restore installed came from (for pz.lock; never a credential)."""
        if self.no_index and self.find_links:
            return "find-links " + ", ".join(self.find_links)
        if self.index_url:
            return "index " + _no_credentials(self.index_url)
        return "index"


@dataclass(frozen=True)
class LockedConnector:
    name: str
    package: str | None
    version: str | None
    source: str
    pin: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return {
            "name": self.name,
            "package": self.package,
            "version": self.version,
            "source": self.source,
            "pin": self.pin,
        }


@dataclass(frozen=True)
class RestoreReport:
    installed: tuple[str, ...]  # the requirements pip installed
    connectors: tuple[LockedConnector, ...]  # what pz.lock records
    lock_file: Path
    notes: tuple[str, ...] = field(default_factory=tuple)


def restore(root: Path, options: PipOptions) -> RestoreReport:
    project = _project(root)
    pins, errors = _pins(project)
    if errors:
        raise RestoreError(errors)
    wanted: list[tuple[Pin, str]] = []  # (pin, requirement)
    for pin in pins:
        found = registry.installed().get(pin.connector)
        if found is not None and pin.satisfied_by(found.version, found.distribution):
            continue
        if found is not None and found.distribution == BUILTIN and pin.package in (None, BUILTIN):
            errors.append(
                error(
                    "PZ0704",
                    f"connectors: '{pin.connector}' is a builtin of pipelinez {found.version}, which does "
                    f"not satisfy the pin '{pin.text}'",
                    place=project.locate("project.yml", ("connectors", pin.connector)),
                )
            )
            continue
        wanted.append((pin, pin.requirement(found.distribution if found else None)))
    if errors:
        raise RestoreError(errors)
    requirements = tuple(req for _, req in wanted)
    if requirements:
        _pip_install(requirements, options)
        _forget_installed()
        errors += _recheck(project, [pin for pin, _ in wanted])
        if errors:
            raise RestoreError(errors)
    installed_now = {pin.connector for pin, _ in wanted}
    connectors = _locked(project, pins, installed_now, options)
    lock_file = root / LOCK_FILE
    _write_lock(lock_file, connectors)
    return RestoreReport(requirements, connectors, lock_file)


def _project(root: Path) -> Project:
    project, diags = load_project(root, partial=True)
    if project is None:
        raise PzConfigError([d for d in diags if d.is_error])
    return project


def _pins(project: Project) -> tuple[list[Pin], list[Diagnostic]]:
    pins: list[Pin] = []
    errors: list[Diagnostic] = []
    for name, text in sorted(project.connector_pins.items()):
        place = project.locate("project.yml", ("connectors", name))
        try:
            pins.append(parse_pin(name, text))
        except PinError as exc:
            errors.append(
                error(
                    "PZ0116",
                    f"connectors: pin '{text}' for '{name}' is neither a version specifier nor a requirement "
                    f"({exc})",
                    place=place,
                )
            )
    return pins, errors


def _pip_install(requirements: Sequence[str], options: PipOptions) -> None:
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-input",
        *options.args(),
        *requirements,
    ]
    env = {**os.environ, "PIP_NO_INPUT": "1"}
    try:
        proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    except OSError as exc:
        raise RestoreError(
            [error("PZ0703", f"cannot run pip of {sys.executable}: {exc.strerror or exc}")]
        ) from None
    if proc.returncode != 0:
        tail = [line for line in (proc.stderr or proc.stdout).splitlines() if line.strip()][-PIP_TAIL:]
        said = "\n    ".join(tail) if tail else f"exit status {proc.returncode}"
        raise RestoreError(
            [error("PZ0703", f"pip could not install {', '.join(requirements)}; pip said:\n    {said}")]
        )


def _forget_installed() -> None:
    """Entry points and manifests are cached per process; a restore just changed them."""
    importlib.invalidate_caches()
    registry.installed.cache_clear()
    registry.manifest_of.cache_clear()


def _recheck(project: Project, pins: Sequence[Pin]) -> list[Diagnostic]:
    errors: list[Diagnostic] = []
    installed = registry.installed()
    for pin in pins:
        found = installed.get(pin.connector)
        place = project.locate("project.yml", ("connectors", pin.connector))
        if found is None or not pin.satisfied_by(found.version, found.distribution):
            package = pin.package_for(None)
            provides = sorted(n for n, c in installed.items() if c.distribution == package)
            what = (
                f"it provides {', '.join(provides)}"
                if provides
                else "it provides no connector"
                if found is None
                else f"'{pin.connector}' comes from {found.distribution} {found.version}"
            )
            errors.append(
                error(
                    "PZ0705",
                    f"connectors: installed {pin.requirement(None)} for '{pin.connector}', but {what}",
                    place=place,
                )
            )
            continue
        try:
            registry.manifest_of(pin.connector)
        except ConnectorHostError as exc:
            errors += exc.diagnostics
    return errors


def _source(package: str | None, installed_now: bool, options: PipOptions) -> str:
    if package == BUILTIN:
        return "builtin"
    direct = _direct_url(package)
    if direct:
        return direct
    return options.source() if installed_now else "installed"


def _direct_url(package: str | None) -> str | None:
    """The URL or path a package was installed from directly (PEP 610), if it was."""
    if not package:
        return None
    try:
        text = distribution(package).read_text("direct_url.json")
    except PackageNotFoundError:
        return None
    if not text:
        return None
    try:
        url = json.loads(text).get("url")
    except ValueError:
        return None
    return _no_credentials(str(url)) if url else None


def _no_credentials(url: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return url


def _locked(
    project: Project, pins: Sequence[Pin], installed_now: set[str], options: PipOptions
) -> tuple[LockedConnector, ...]:
    by_name = {p.connector: p for p in pins}
    used = {s.connector for s in project.sources.values()} | {s.connector for s in project.sinks.values()}
    installed = registry.installed()
    out = []
    for name in sorted(set(by_name) | used):
        found = installed.get(name)
        pin = by_name.get(name)
        if found is None:
            out.append(LockedConnector(name, None, None, "not installed", pin.text if pin else None))
            continue
        out.append(
            LockedConnector(
                name,
                found.distribution,
                found.version,
                _source(found.distribution, name in installed_now, options),
                pin.text if pin else None,
            )
        )
    return tuple(out)


def _write_lock(path: Path, connectors: Sequence[LockedConnector]) -> None:
    data = {
        "lock_version": LOCK_VERSION,
        "pipelinez": __version__,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "connectors": [c.to_dict() for c in connectors],
    }
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise RestoreError(
            [error("PZ0706", f"cannot write {path}: {exc.strerror or exc}", file=LOCK_FILE)]
        ) from None
