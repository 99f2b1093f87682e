"""The grammar of a `connectors:` pin in project.yml, shared by the version check (PZ0220) and `pz restore`.

    connectors:
      postgres: ">=0.1,<0.2"            # a version specifier: the package that provides the connector
      numbers: "0.1.0"                  # a bare version means exactly that version (==0.1.0)
      acme: "acme-pz-connector>=2.1"    # a requirement: the package is named (PEP 508)
      local: "pz-local @ file:///src/pz-local"   # a requirement with a direct URL

A pin that names no package means the installed package providing the connector, or, when none is
installed, the package `pz-<connector>` (the naming convention of connector packages).

A pin with a direct URL is satisfied only by a distribution installed from that URL: pip records where it
installed a distribution from in its `direct_url.json` (PEP 610), and `DirectUrl` compares the two (URL
without credentials; for a VCS URL also the requested revision, or the commit). Credentials in a pin's URL
(`https://user:token@host/…`) are never printed: `redact_urls` masks them in any text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:  # packaging is imported where a pin is read: most projects pin nothing
    from packaging.specifiers import SpecifierSet

PACKAGE_PREFIX = "pz-"


class PinError(ValueError):
    """The pin text is neither a version specifier nor a requirement."""


@dataclass(frozen=True)
class Pin:
    """A connector pin as written, and the package, version range or URL it names."""

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

    @property
    def shown(self) -> str:
        """The pin as written, with any URL credentials masked."""
        return redact_urls(self.text)

    def satisfied_by(
        self, version: str | None, distribution: str | None, direct: DirectUrl | None = None
    ) -> bool:
        """Whether an installed connector of `version` from `distribution` satisfies the pin; `direct` is
        where that distribution was installed from (PEP 610), which a URL pin must match."""
        from packaging.utils import canonicalize_name
        from packaging.version import InvalidVersion, Version

        if self.package and (
            distribution is None or canonicalize_name(distribution) != canonicalize_name(self.package)
        ):
            return False
        if self.url:
            return direct is not None and direct.matches(DirectUrl.of_pin_url(self.url))
        try:
            parsed = Version(version or "")
        except InvalidVersion:
            return False
        return self.specifier.contains(parsed, prereleases=True)


def parse_pin(connector: str, text: str) -> Pin:
    """The pin of `connector`; PinError when `text` is malformed."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    written = text.strip()
    try:
        if written[:1].isdigit():
            return Pin(connector, text, SpecifierSet(f"=={written}"))
        if written[:1] in "<>=!~":
            return Pin(connector, text, SpecifierSet(written))
        req = Requirement(written)
    except (InvalidSpecifier, InvalidRequirement) as exc:
        # packaging draws the text and a caret under the spot on two more lines: a message is one line
        raise PinError(str(exc).splitlines()[0]) from None
    if req.extras or req.marker:
        raise PinError("extras and environment markers are not supported in a connector pin")
    return Pin(connector, text, req.specifier, req.name, req.url)


_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/\s@'\"]+)@")


def redact_urls(text: str) -> str:
    """`text` with the credentials of every URL in it masked (`https://***@host/…`)."""
    return _USERINFO.sub(lambda m: f"{m.group('scheme')}***@", text)


def _bare(url: str) -> str:
    """A URL without credentials, fragment and trailing '/', its scheme and host in lower case."""
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower()
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), parts.query, ""))


@dataclass(frozen=True)
class DirectUrl:
    """Where a distribution was installed from directly: a URL (no credentials) and, for a VCS URL, the
    system, the revision asked for and the commit it resolved to."""

    url: str
    vcs: str | None = None
    revision: str | None = None
    commit: str | None = None

    @staticmethod
    def of_pin_url(url: str) -> DirectUrl:
        """A pin's URL as pip would record it: `git+https://host/repo@v1#egg=x` is git, revision v1."""
        text = url.strip()
        scheme, _, rest = text.partition("://")
        if "+" in scheme:
            vcs, _, transport = scheme.partition("+")
            parts = urlsplit(f"{transport}://{rest}")
            path, revision = parts.path, None
            if "@" in path:
                path, _, revision = path.rpartition("@")
            bare = urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))
            return DirectUrl(_bare(bare), vcs.lower(), revision or None)
        return DirectUrl(_bare(text))

    def matches(self, pinned: DirectUrl) -> bool:
        """Whether this installed origin is what `pinned` asks for."""
        if self.url != pinned.url or self.vcs != pinned.vcs:
            return False
        if self.vcs is None:
            return True
        return pinned.revision in (self.revision, self.commit) or (
            pinned.revision is not None
            and self.commit is not None
            and self.commit.startswith(pinned.revision)
            and len(pinned.revision) >= 7
        )

    @property
    def source(self) -> str:
        """The origin as pz.lock records it (the commit apart): `<url>` or `<vcs>+<url>[@<revision>]`."""
        if self.vcs is None:
            return self.url
        at = f"@{self.revision}" if self.revision else ""
        return f"{self.vcs}+{self.url}{at}"

    def describe(self) -> str:
        commit = f" (commit {self.commit})" if self.commit and self.commit != self.revision else ""
        return f"{self.source}{commit}"


def direct_url_of(dist_name: str | None) -> DirectUrl | None:
    """Where the installed distribution `dist_name` came from, if pip installed it from a URL or path
    (its `direct_url.json`, PEP 610); None for an install from an index or find-links."""
    if not dist_name:
        return None
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        text = distribution(dist_name).read_text("direct_url.json")
    except PackageNotFoundError:
        return None
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        return None
    vcs_info = data.get("vcs_info")
    if isinstance(vcs_info, dict):
        return DirectUrl(
            _bare(data["url"]),
            str(vcs_info.get("vcs") or "") or None,
            str(vcs_info["requested_revision"]) if vcs_info.get("requested_revision") else None,
            str(vcs_info["commit_id"]) if vcs_info.get("commit_id") else None,
        )
    return DirectUrl(_bare(data["url"]))
