"""`pz restore`: install the connector packages project.yml pins, into the running Python environment, and
write `pz.lock`.

With a pz.lock, restore installs exactly what it records: for every connector whose lock entry was written
for the pin project.yml has now, the locked package at the locked version (`name==version`), or from the
locked URL (a VCS install at the locked commit). A connector whose pin changed since (or that the lock does
not record) is resolved from its pin, and the lock is updated. Connectors already installed as required are
left alone (no network). The others are installed in one `pip install` of the running interpreter, so pip
resolves them together and honours its own configuration (PIP_INDEX_URL, pip.conf); `--index-url`,
`--find-links` and `--no-index` are passed on, which is how a restore works offline from a folder of wheels.
Afterwards each connector is checked again against what is now installed. Failures are RestoreError with
PZ07xx codes (a used connector that is neither installed, pinned nor locked: PZ0215), all reported at once.

pz.lock records, for every connector the project pins or uses, the package and version that provide it and
where it came from (`core.lockfile`). It holds no timestamp and no credential (URLs are masked), so it only
changes when what is installed changes.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

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
from pipelinez.core.lockfile import (
    BUILTIN_SOURCE,
    LOCK_FILE,
    LOCK_VERSION,
    Lock,
    LockedConnector,
    LockError,
    read_lock,
)
from pipelinez.core.pins import DirectUrl, Pin, PinError, direct_url_of, parse_pin, redact_urls

__all__ = ["LOCK_FILE", "LockedConnector", "PipOptions", "RestoreReport", "restore"]

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
            return "find-links " + ", ".join(redact_urls(link) for link in self.find_links)
        if self.index_url:
            return "index " + _no_credentials(self.index_url)
        return "index"


@dataclass(frozen=True)
class RestoreReport:
    installed: tuple[str, ...]  # the requirements pip installed
    connectors: tuple[LockedConnector, ...]  # what pz.lock records
    lock_file: Path
    notes: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class _Want:
    """A connector restore must install: what pip is given, and how it is shown (credentials masked)."""

    connector: str
    requirement: str
    pin: Pin | None
    locked: LockedConnector | None

    @property
    def shown(self) -> str:
        return redact_urls(self.requirement)


def restore(root: Path, options: PipOptions) -> RestoreReport:
    project = _project(root)
    pins, errors = _pins(project)
    lock, notes = _lock(root)
    by_name = {p.connector: p for p in pins}
    used = _used(project)
    installed = registry.installed()
    wanted: list[_Want] = []
    for name in sorted(set(by_name) | set(used)):
        pin = by_name.get(name)
        found = installed.get(name)
        entry = _usable_entry(lock, name, pin)
        if entry is not None and entry.package not in (None, BUILTIN):
            if not _matches_entry(entry, found):
                wanted.append(_Want(name, _locked_requirement(entry, pin), pin, entry))
            continue
        if pin is None:
            if found is None:
                errors.append(_unpinned_missing(project, name, used[name]))
            continue
        direct = direct_url_of(found.distribution) if found is not None and pin.url else None
        if found is not None and pin.satisfied_by(found.version, found.distribution, direct):
            continue
        if found is not None and found.distribution == BUILTIN and pin.package in (None, BUILTIN):
            errors.append(
                error(
                    "PZ0704",
                    f"connectors: '{name}' is a builtin of pipelinez {found.version}, which does "
                    f"not satisfy the pin '{pin.shown}'",
                    place=project.locate("project.yml", ("connectors", name)),
                )
            )
            continue
        wanted.append(_Want(name, pin.requirement(found.distribution if found else None), pin, None))
    if errors:
        raise RestoreError(errors)
    if wanted:
        _pip_install(wanted, options)
        _forget_installed()
        errors += _recheck(project, wanted)
        if errors:
            raise RestoreError(errors)
    installed_now = {w.connector for w in wanted}
    connectors = _locked(project, pins, used, installed_now, options)
    lock_file = root / LOCK_FILE
    _write_lock(lock_file, connectors)
    return RestoreReport(tuple(w.shown for w in wanted), connectors, lock_file, tuple(notes))


def _project(root: Path) -> Project:
    project, diags = load_project(root, partial=True)
    if project is None:
        raise PzConfigError([d for d in diags if d.is_error])
    return project


def _lock(root: Path) -> tuple[Lock | None, list[str]]:
    try:
        return read_lock(root), []
    except LockError as exc:
        return None, [f"{LOCK_FILE} is not usable ({exc}); resolving every connector from its pin"]


def _used(project: Project) -> dict[str, tuple[str, str]]:
    """Connectors the project's sources and sinks name -> (the first file naming it, its kind)."""
    used: dict[str, tuple[str, str]] = {}
    for kind, specs in (("source", project.sources), ("sink", project.sinks)):
        for spec in sorted(specs.values(), key=lambda s: s.file):
            used.setdefault(spec.connector, (spec.file, kind))
    return used


def _usable_entry(lock: Lock | None, name: str, pin: Pin | None) -> LockedConnector | None:
    """The lock's entry for `name`, when it was written for the pin project.yml has now."""
    entry = lock.get(name) if lock is not None else None
    if entry is None or entry.pin != (pin.shown if pin else None):
        return None
    return entry


def _matches_entry(entry: LockedConnector, found: registry.InstalledConnector | None) -> bool:
    """Whether the installed connector is exactly the locked one."""
    if found is None or found.distribution != entry.package or found.version != entry.version:
        return False
    if not entry.direct:
        return True
    direct = direct_url_of(found.distribution)
    return (
        direct is not None
        and direct.source == entry.source
        and (entry.commit is None or direct.commit == entry.commit)
    )


def _locked_requirement(entry: LockedConnector, pin: Pin | None) -> str:
    """What pip installs to get exactly the locked package: `name==version`, or from the locked URL (the
    pin's own URL when it has one, since the lock's has its credentials masked), a VCS one at the commit."""
    assert entry.package is not None
    if not entry.direct:
        return f"{entry.package}=={entry.version}"
    url = pin.url if pin is not None and pin.url else entry.source
    if entry.commit:
        url = _at_revision(url, entry.commit)
    return f"{entry.package} @ {url}"


def _at_revision(url: str, revision: str) -> str:
    """A VCS URL (`git+https://host/repo@v1#frag`) asking for `revision` instead."""
    parts = urlsplit(url)
    path = parts.path
    if "@" in path:
        path = path.rpartition("@")[0]
    return urlunsplit((parts.scheme, parts.netloc, f"{path}@{revision}", parts.query, parts.fragment))


def _unpinned_missing(project: Project, name: str, where: tuple[str, str]) -> Diagnostic:
    file, kind = where
    return error(
        "PZ0215",
        f"{kind} file {file} uses connector '{name}', which is not installed, not pinned in project.yml "
        "and not recorded in pz.lock: pz restore does not know which package provides it",
        place=project.locate(file, ("connector",)),
        next_step=f'pin it in project.yml (connectors: {{ {name}: ">=<version>" }} installs '
        f'pz-{name}; or name its package: "<package>>=<version>"), then run `pz restore`',
    )


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
                    f"connectors: pin '{redact_urls(text)}' for '{name}' is neither a version specifier "
                    f"nor a requirement ({redact_urls(str(exc))})",
                    place=place,
                )
            )
    return pins, errors


def _pip_install(wanted: Sequence[_Want], options: PipOptions) -> None:
    _pip(wanted, options, [])
    # pip may call a URL requirement satisfied by the same version installed from elsewhere: reinstall
    # those from their URL (their dependencies were resolved by the first pass)
    _forget_installed()
    stale = [w for w in wanted if " @ " in w.requirement and not _installed_as_wanted(w)]
    if stale:
        _pip(stale, options, ["--force-reinstall", "--no-deps"])


def _pip(wanted: Sequence[_Want], options: PipOptions, flags: list[str]) -> None:
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-input",
        *flags,
        *options.args(),
        *(w.requirement for w in wanted),
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
        said = (
            " | ".join(redact_urls(line.strip()) for line in tail)
            if tail
            else f"exit status {proc.returncode}"
        )
        raise RestoreError(
            [
                error(
                    "PZ0703",
                    f"pip could not install {', '.join(w.shown for w in wanted)}; pip said: {said}",
                )
            ]
        )


def _installed_as_wanted(want: _Want) -> bool:
    found = registry.installed().get(want.connector)
    if want.locked is not None:
        return _matches_entry(want.locked, found)
    assert want.pin is not None
    direct = direct_url_of(found.distribution) if found is not None and want.pin.url else None
    return found is not None and want.pin.satisfied_by(found.version, found.distribution, direct)


def _forget_installed() -> None:
    """Entry points and manifests are cached per process; a restore just changed them."""
    importlib.invalidate_caches()
    registry.installed.cache_clear()
    registry.manifest_of.cache_clear()


def _recheck(project: Project, wanted: Sequence[_Want]) -> list[Diagnostic]:
    errors: list[Diagnostic] = []
    installed = registry.installed()
    for want in wanted:
        name = want.connector
        found = installed.get(name)
        place = project.locate("project.yml", ("connectors", name))
        if want.locked is not None:
            package = want.locked.package
        else:
            assert want.pin is not None
            package = want.pin.package_for(None)
        if not _installed_as_wanted(want):
            provides = sorted(n for n, c in installed.items() if c.distribution == package)
            what = (
                f"'{name}' comes from {found.distribution} {found.version}"
                if found is not None and found.distribution != package
                else f"it provides {', '.join(provides)}"
                if provides and found is None
                else "it provides no connector"
                if found is None
                else f"'{name}' is {found.distribution} {found.version}, not what was asked for"
            )
            errors.append(
                error(
                    "PZ0705",
                    f"connectors: installed {want.shown} for '{name}', but {what}",
                    place=place,
                )
            )
            continue
        try:
            registry.manifest_of(name)
        except ConnectorHostError as exc:
            errors += exc.diagnostics
    return errors


def _origin(
    found: registry.InstalledConnector, installed_now: bool, options: PipOptions
) -> tuple[str, str | None]:
    """(source, commit) pz.lock records for an installed connector."""
    if found.distribution == BUILTIN:
        return BUILTIN_SOURCE, None
    direct: DirectUrl | None = direct_url_of(found.distribution)
    if direct is not None:
        return direct.source, direct.commit
    return (options.source() if installed_now else "installed"), None


def _no_credentials(url: str) -> str:
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return url


def _locked(
    project: Project,
    pins: Sequence[Pin],
    used: dict[str, tuple[str, str]],
    installed_now: set[str],
    options: PipOptions,
) -> tuple[LockedConnector, ...]:
    by_name = {p.connector: p for p in pins}
    installed = registry.installed()
    out = []
    for name in sorted(set(by_name) | set(used)):
        found = installed.get(name)
        pin = by_name.get(name)
        if found is None:  # a restore that left a used connector missing has failed before this
            continue
        source, commit = _origin(found, name in installed_now, options)
        out.append(
            LockedConnector(
                name, found.distribution, found.version, source, pin.shown if pin else None, commit
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
