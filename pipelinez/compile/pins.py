"""`connectors:` pins in project.yml checked against the installed connector versions (PZ0220).

A builtin connector has the version of the pz distribution it ships in; a third-party connector the version
of its package. The pin grammar (a specifier, a bare version, or a requirement naming the package) is
`core.pins`; `pz restore` installs what the pins ask for.
"""

from __future__ import annotations

from pipelinez.config.model import Project
from pipelinez.config.suggest import did_you_mean
from pipelinez.connectors import registry
from pipelinez.core.diagnostics import Diagnostic, error
from pipelinez.core.pins import PinError, parse_pin


def check_pins(project: Project) -> list[Diagnostic]:
    diags: list[Diagnostic] = []
    installed = registry.installed()
    for name, text in sorted(project.connector_pins.items()):
        place = project.locate("project.yml", ("connectors", name))
        try:
            pin = parse_pin(name, text)
        except PinError as exc:
            diags.append(
                error(
                    "PZ0116",
                    f"connectors: pin '{text}' for '{name}' is neither a version specifier nor a requirement "
                    f"({exc})",
                    place=place,
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
                    next_step=f"run `pz restore` to install it, or remove the pin "
                    f"(installed: {', '.join(sorted(installed))})",
                )
            )
            continue
        if not pin.satisfied_by(found.version, found.distribution):
            diags.append(
                error(
                    "PZ0220",
                    f"connector '{name}' {found.version or '(no version)'} "
                    f"({found.distribution or 'unknown package'}) does not satisfy the pin '{text}'",
                    place=place,
                    next_step="run `pz restore` to install the pinned version, or change the pin",
                )
            )
    return diags
