"""DuckDB extension files shipped by pz's pinned packages, loaded into the run's staging instance without
DuckDB's signature check once pz has checked that each file is the one pip installed.

DuckDB verifies an extension file's RSA signature at every LOAD, in every instance. For the 41.7 MB
postgres_scanner file (`duckdb-extension-postgres-scanner`) that is 0.3-0.45 s of CPU per run, whatever the
rows: a third of a small incremental run's source load, and on its helper thread it slowed the psycopg
import beside it (0.22 s alone, 0.5-0.8 s beside it). The check protects an instance from extension files
DuckDB fetched or found (INSTALL over http, `~/.duckdb/extensions`). The files here come from pinned PyPI
packages installed by pip next to DuckDB's own library, which Python loads with no signature check at all.

The trade-off, explicit (docs/resilience.md#extension-files):
- only the files a connector names in `Connector.staging_extensions()` (its own package's file, never a
  path from the project), for the native nodes of the plan, and only when the file's size and SHA-256 equal
  what its package's `RECORD` lists (pip checked the wheel's hash when it installed it): one read of the file,
  ~0.05 s, instead of DuckDB's check;
- the instance is opened with `allow_unsigned_extensions`, those files are LOADed before any other statement,
  then `SET allow_unsigned_extensions = false`, which DuckDB never lets anyone set back: from then on the
  instance, the project's SQL included, loads only what a default instance loads (signed extensions);
- a file without a RECORD entry, or whose bytes differ, is not loaded here: the connector's own LOAD later
  verifies its signature as before. `PZ_VERIFY_EXTENSION_SIGNATURES=1` keeps DuckDB's check for every file.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import hashlib
import os
import sys
from collections.abc import Iterable
from pathlib import Path

VERIFY_ENV = "PZ_VERIFY_EXTENSION_SIGNATURES"


def shipped_intact(path: str) -> bool:
    """Whether `path` is a file of an installed distribution whose RECORD gives its size and SHA-256, and
    the file's bytes have exactly that size and hash."""
    try:
        file = Path(path).resolve(strict=True)
        found = _record_of(file)
        if found is None:
            return False
        record, relative = found
        listed = _listed(record, relative)
        return listed is not None and _matches(file, *listed)
    except (OSError, ValueError, csv.Error):
        return False


def _record_of(file: Path) -> tuple[Path, str] | None:
    """(the RECORD of the distribution whose top-level package holds `file`, `file` relative to its
    site-packages), looked up in the nearest folder above `file` that is an entry of `sys.path` (where pip
    installs); None when there is no such RECORD, or `file` is under no entry of `sys.path` (a RECORD
    written beside a file elsewhere proves nothing)."""
    entries = _path_entries()
    for site in file.parents:
        if site not in entries:
            continue
        relative = file.relative_to(site)
        records = list(site.glob(f"{relative.parts[0]}-*.dist-info/RECORD"))
        return (records[0], relative.as_posix()) if len(records) == 1 else None
    return None


def _path_entries() -> set[Path]:
    """The folders of `sys.path`, resolved (the working folder of `python -c` is not one: '' is skipped)."""
    found = set()
    for entry in sys.path:
        if entry:
            with contextlib.suppress(OSError):
                found.add(Path(entry).resolve())
    return found


def trusted(paths: Iterable[str], project: Path | None = None) -> list[str]:
    """The files of `paths` that may be loaded without DuckDB's signature check (none when the
    environment asks for DuckDB's check). `project`: the project root whose `.pz/target/extensions.json`
    (signed with its salt) remembers the files checked before, each with its RECORD, by device, inode,
    size, mtime and ctime (any write to a file changes its ctime): a file unchanged since its check is
    not read again (its ~0.05 s hash on every run)."""
    if os.environ.get(VERIFY_ENV, "").strip() not in ("", "0"):
        return []
    memo = _Memo(project) if project is not None else None
    found = []
    for path in dict.fromkeys(paths):
        stamp = _stamp(path)
        if stamp is not None and memo is not None and memo.entries.get(path) == stamp:
            found.append(path)
        elif shipped_intact(path):
            found.append(path)
            if stamp is not None and memo is not None:
                memo.entries[path] = stamp
                memo.changed = True
    if memo is not None and memo.changed:
        memo.save()
    return found


def _stamp(path: str) -> list[int] | None:
    """What changes when the file or the RECORD that lists it changes: (device, inode, size, mtime,
    ctime) of both; None when either cannot be found."""
    try:
        file = Path(path).resolve(strict=True)
        found = _record_of(file)
        if found is None:
            return None
        return [v for f in (file, found[0]) for v in _stat(f)]
    except (OSError, ValueError):
        return None


def _stat(path: Path) -> tuple[int, ...]:
    st = path.stat()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class _Memo:
    """`.pz/target/extensions.json`: the files found intact, by stamp (a signed cache: only ever a miss)."""

    FORM = 1

    def __init__(self, project: Path):
        from pipelinez import __version__
        from pipelinez.core.signed_cache import project_salt, read_signed

        self.path = project / ".pz" / "target" / "extensions.json"
        self.salt = project_salt(project, create=True)
        self.versions = __version__
        read = read_signed(self.path, self.salt, self.FORM, self.versions) if self.salt else None
        self.entries: dict[str, object] = dict(read or {})
        self.changed = False

    def save(self) -> None:
        from pipelinez.core.signed_cache import write_signed

        if self.salt:
            write_signed(self.path, self.salt, self.FORM, self.versions, self.entries)


def _listed(record: Path, relative: str) -> tuple[str, int] | None:
    """(urlsafe base64 SHA-256 without padding, size) of `relative` in a RECORD file, or None."""
    with record.open(encoding="utf-8", newline="") as handle:
        for row in csv.reader(handle):
            if len(row) >= 3 and row[0] == relative and row[1].startswith("sha256=") and row[2].isdigit():
                return row[1].removeprefix("sha256="), int(row[2])
    return None


def _matches(file: Path, digest: str, size: int) -> bool:
    if file.stat().st_size != size:
        return False
    with file.open("rb") as handle:
        found = hashlib.file_digest(handle, "sha256").digest()  # the GIL is released while it hashes
    return base64.urlsafe_b64encode(found).rstrip(b"=").decode("ascii") == digest
