"""`connectors:` pins in project.yml checked against the installed connector versions (PZ0220).

A builtin connector has the version of the pz distribution it ships in; a third-party connector the version
of its package. A bare version (`"1.2"`) means exactly that version.
"""

from __future__ import annotations

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from pipelinez.config.model import Project
from pipelinez.config.suggest import did_you_mean
from pipelinez.connectors import registry
from pipelinez.core.diagnostics import Diagnostic, error


def check_pins(project: Project) -> list[Diagnostic]:
    diags: list[Diagnostic] = []
    installed = registry.installed()
    for name, pin in sorted(project.connector_pins.items()):
        place = project.locate("project.yml", ("connectors", name))
        try:
            wanted = SpecifierSet(f"=={pin.strip()}" if pin.strip()[:1].isdigit() else pin)
        except InvalidSpecifier:
            diags.append(
                error(
                    "PZ0116", f"connectors: pin '{pin}' for '{name}' is not a version specifier", place=place
                )
            )
            continue
        found = installed.get(name)
        if found is None:
            diags.append(
                error(
                    "PZ0215",
                    f"connectors: pins '{name}', which is not installed{did_you_mean(name, installed)}",
                    place=place,
                    next_step=f"install it, or remove the pin (installed: {', '.join(sorted(installed))})",
                )
            )
            continue
        try:
            version = Version(found.version or "")
        except InvalidVersion:
            version = None
        if version is None or not wanted.contains(version, prereleases=True):
            diags.append(
                error(
                    "PZ0220",
                    f"connector '{name}' {found.version or '(no version)'} "
                    f"({found.distribution or 'unknown package'}) does not satisfy the pin '{pin}'",
                    place=place,
                )
            )
    return diags
