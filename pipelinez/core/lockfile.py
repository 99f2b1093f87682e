"""`pz.lock`: which package and version provide each connector a project pins or uses, and where it came
from. `pz restore` writes it; every `pz validate`, `plan` and `run` reads it back and compares it with what is
installed (PZ0232), and `pz restore` installs exactly what it records.

    {"lock_version": 1, "pipelinez": "0.1.0", "python": "3.11",
     "connectors": [{"name": "numbers", "package": "pz-numbers", "version": "0.1.0",
                     "source": "find-links ./wheels", "pin": ">=0.1,<0.2"}, …]}

`source` is `builtin` (shipped in pipelinez), `index`/`index <url>`/`find-links <dirs>`/`installed` (from a
package index or folder: the version is what counts), or the URL the package was installed from directly
(PEP 610, without credentials; a VCS install adds `commit`). Nothing in it is a credential: pins and URLs are
stored with their credentials masked.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOCK_FILE = "pz.lock"
LOCK_VERSION = 1
BUILTIN_SOURCE = "builtin"
_INDIRECT_SOURCES = ("index", "find-links", "installed")


class LockError(ValueError):
    """pz.lock exists but cannot be read as a lock."""


@dataclass(frozen=True)
class LockedConnector:
    """One connector as pz.lock pins it: where it comes from and which version."""

    name: str
    package: str | None
    version: str | None
    source: str
    pin: str | None = None
    commit: str | None = None  # a VCS install's commit

    @property
    def direct(self) -> bool:
        """Whether the package was installed from a URL or path (not an index or folder of packages)."""
        return self.source != BUILTIN_SOURCE and not self.source.startswith(_INDIRECT_SOURCES)

    def describe(self) -> str:
        where = f" from {self.source}" if self.direct else ""
        commit = f" (commit {self.commit})" if self.commit else ""
        return f"{self.package} {self.version}{where}{commit}"

    def to_dict(self) -> dict[str, str | None]:
        data: dict[str, str | None] = {
            "name": self.name,
            "package": self.package,
            "version": self.version,
            "source": self.source,
            "pin": self.pin,
        }
        if self.commit:
            data["commit"] = self.commit
        return data


@dataclass(frozen=True)
class Lock:
    """pz.lock as read: the pz version and the connectors it pins (and its text)."""

    pipelinez: str
    connectors: tuple[LockedConnector, ...]
    text: str  # the file as read (to point at an entry's line)

    def get(self, name: str) -> LockedConnector | None:
        return next((c for c in self.connectors if c.name == name), None)

    def line_of(self, name: str) -> int | None:
        """The line of the entry of connector `name` in the file, if it can be found."""
        pattern = re.compile(r'"name"\s*:\s*' + re.escape(json.dumps(name)))
        for number, line in enumerate(self.text.splitlines(), start=1):
            if pattern.search(line):
                return number
        return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def read_lock(root: Path) -> Lock | None:
    """The project's pz.lock, or None when there is none; LockError when it is not a lock pz can read."""
    path = root / LOCK_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise LockError(f"cannot read it ({exc})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise LockError(f"it is not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("connectors"), list):
        raise LockError("it has no connectors list")
    if data.get("lock_version") != LOCK_VERSION:
        raise LockError(f"its lock_version is {data.get('lock_version')!r}; this pz reads {LOCK_VERSION}")
    out = []
    for entry in data["connectors"]:
        if not isinstance(entry, dict) or not _text(entry.get("name")):
            raise LockError("a connectors entry has no name")
        out.append(
            LockedConnector(
                str(entry["name"]),
                _text(entry.get("package")),
                _text(entry.get("version")),
                _text(entry.get("source")) or "installed",
                _text(entry.get("pin")),
                _text(entry.get("commit")),
            )
        )
    return Lock(str(data.get("pipelinez") or ""), tuple(out), text)
