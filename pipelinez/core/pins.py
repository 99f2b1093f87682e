"""The grammar of a `connectors:` pin in project.yml, shared by the version check (PZ0220) and `pz restore`.

    connectors:
      postgres: ">=0.1,<0.2"            # a version specifier: the package that provides the connector
      numbers: "0.1.0"                  # a bare version means exactly that version (==0.1.0)
      acme: "acme-pz-connector>=2.1"    # a requirement: the package is named (PEP 508)
      local: "pz-local @ file:///src/pz-local"   # a requirement with a direct URL

A pin that names no package means the installed package providing the connector, or, when none is
installed, the package `pz-<connector>` (the naming convention of connector packages).
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

PACKAGE_PREFIX = "pz-"


class PinError(ValueError):
    """The pin text is neither a version specifier nor a requirement."""


@dataclass(frozen=True)
class Pin:
    connector: str
    text: str  # as written
    specifier: SpecifierSet
    package: str | None = None  # named by the pin
    url: str | None = None  # a direct URL (`name @ url`)

    def package_for(self, installed_distribution: str | None) -> str:
        """The package to install: the pin's, the installed provider's, else `pz-<connector>`."""
        return self.package or installed_distribution or PACKAGE_PREFIX + self.connector

    def requirement(self, installed_distribution: str | None) -> str:
        """What pip installs to satisfy the pin."""
        name = self.package_for(installed_distribution)
        if self.url:
            return f"{name} @ {self.url}"
        return f"{name}{self.specifier}"

    def satisfied_by(self, version: str | None, distribution: str | None) -> bool:
        """Whether an installed connector of `version` from `distribution` satisfies the pin."""
        if self.package and (
            distribution is None or canonicalize_name(distribution) != canonicalize_name(self.package)
        ):
            return False
        try:
            parsed = Version(version or "")
        except InvalidVersion:
            return False
        return self.specifier.contains(parsed, prereleases=True)


def parse_pin(connector: str, text: str) -> Pin:
    """The pin of `connector`; PinError when `text` is malformed."""
    written = text.strip()
    try:
        if written[:1].isdigit():
            return Pin(connector, text, SpecifierSet(f"=={written}"))
        if written[:1] in "<>=!~":
            return Pin(connector, text, SpecifierSet(written))
        req = Requirement(written)
    except (InvalidSpecifier, InvalidRequirement) as exc:
        raise PinError(str(exc)) from None
    if req.extras or req.marker:
        raise PinError("extras and environment markers are not supported in a connector pin")
    return Pin(connector, text, req.specifier, req.name, req.url)
