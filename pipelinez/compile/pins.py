"""`connectors:` pins in project.yml checked against the installed connectors (PZ0215, PZ0220), and
`pz.lock` checked against them too (PZ0232).

A builtin connector has the version of the pz distribution it ships in; a third-party connector the version
of its package. The pin grammar (a specifier, a bare version, or a requirement naming the package, maybe with
a direct URL) is `core.pins`; a URL pin is satisfied only by a distribution pip installed from that URL
(its PEP 610 `direct_url.json`). `pz restore` installs what the pins ask for and writes pz.lock; when the
project has a pz.lock, every connector it records that the project pins or uses must be installed exactly as
recorded (package, version, and for a direct install its URL and commit), and a third-party connector the
project uses must be recorded.
"""

from __future__ import annotations

from collections.abc import Collection

from pipelinez.config.model import Project
from pipelinez.config.suggest import did_you_mean
from pipelinez.connectors import registry
from pipelinez.core.diagnostics import Diagnostic, Place, error
from pipelinez.core.lockfile import LOCK_FILE, Lock, LockedConnector, LockError, read_lock
from pipelinez.core.pins import PinError, direct_url_of, parse_pin, redact_urls

BUILTIN = "pipelinez"
_RESTORE = (
    "run `pz restore` to install exactly what pz.lock records (after changing a pin, it updates pz.lock)"
)


def check_pins(project: Project) -> list[Diagnostic]:
    diags: list[Diagnostic] = []
    installed = registry.installed()
    refused: set[str] = set()  # connectors a pin error already names
    for name, text in sorted(project.connector_pins.items()):
        place = project.locate("project.yml", ("connectors", name))
        shown = redact_urls(text)
        try:
            pin = parse_pin(name, text)
        except PinError as exc:
            diags.append(
                error(
                    "PZ0116",
                    f"connectors: pin '{shown}' for '{name}' is neither a version specifier nor a "
                    f"requirement ({redact_urls(str(exc))})",
                    place=place,
                )
            )
            refused.add(name)
            continue
        found = installed.get(name)
        if found is None:
            diags.append(
                error(
                    "PZ0215",
                    f"connectors: pins '{name}', which is not installed{did_you_mean(name, installed)}",
                    place=place,
                    next_step=f"run `pz restore` to install it, or remove the pin "
                    f"(installed: {', '.join(sorted(installed))})",
                )
            )
            refused.add(name)
            continue
        direct = direct_url_of(found.distribution) if pin.url else None
        if not pin.satisfied_by(found.version, found.distribution, direct):
            origin = ""
            if pin.url:
                origin = (
                    f", installed from {direct.describe()}"
                    if direct is not None
                    else ", installed from a package index or folder, not from the pin's URL"
                )
            diags.append(
                error(
                    "PZ0220",
                    f"connector '{name}' {found.version or '(no version)'} "
                    f"({found.distribution or 'unknown package'}{origin}) does not satisfy the pin '{shown}'",
                    place=place,
                    next_step="run `pz restore` to install the pinned version, or change the pin",
                )
            )
            refused.add(name)
    return diags + check_lock(project, refused)


def check_lock(project: Project, skip: Collection[str] = ()) -> list[Diagnostic]:
    """PZ0232 for every difference between pz.lock and what is installed (connectors in `skip` already
    have a pin error)."""
    try:
        lock = read_lock(project.root)
    except LockError as exc:
        return [
            error(
                "PZ0232",
                f"{LOCK_FILE} cannot be used: {exc}",
                file=LOCK_FILE,
                next_step="run `pz restore` to write it again",
            )
        ]
    if lock is None:
        return []
    pins = project.connector_pins
    used = {s.connector for s in project.sources.values()} | {s.connector for s in project.sinks.values()}
    installed = registry.installed()
    diags: list[Diagnostic] = []
    for name in sorted((set(pins) | used) - set(skip)):
        entry = lock.get(name)
        found = installed.get(name)
        if entry is None:
            if found is not None and found.distribution != BUILTIN:
                diags.append(
                    _differs(
                        lock,
                        name,
                        f"{LOCK_FILE} does not record it (installed: {found.distribution} {found.version})",
                    )
                )
            continue
        said = _difference(entry, pins.get(name), found)
        if said:
            diags.append(_differs(lock, name, said))
    return diags


def _difference(
    entry: LockedConnector, pin: str | None, found: registry.InstalledConnector | None
) -> str | None:
    pin_now = redact_urls(pin) if pin else None
    if entry.pin != pin_now:
        return (
            f"{LOCK_FILE} was written for the pin '{entry.pin or '(none)'}', project.yml now says "
            f"'{pin_now or '(no pin)'}'"
        )
    if entry.package is None:
        return f"{LOCK_FILE} records it as not installed" if found is not None else None
    if found is None:
        return f"{LOCK_FILE} records {entry.describe()}, which is not installed"
    if found.distribution != entry.package or found.version != entry.version:
        return f"{LOCK_FILE} records {entry.describe()}, installed is {found.distribution} {found.version}"
    if entry.direct:
        direct = direct_url_of(found.distribution)
        if (
            direct is None
            or direct.source != entry.source
            or (entry.commit and direct.commit != entry.commit)
        ):
            where = direct.describe() if direct is not None else "a package index or folder"
            return f"{LOCK_FILE} records {entry.describe()}, installed is the same version from {where}"
    return None


def _differs(lock: Lock, name: str, said: str) -> Diagnostic:
    return error(
        "PZ0232",
        f"connector '{name}': {said}",
        place=Place(LOCK_FILE, lock.line_of(name)),
        next_step=_RESTORE,
    )
