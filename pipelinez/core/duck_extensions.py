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
import csv
import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

VERIFY_ENV = "PZ_VERIFY_EXTENSION_SIGNATURES"


def shipped_intact(path: str) -> bool:
    """Whether `path` is a file of an installed distribution whose RECORD gives its size and SHA-256, and
    the file's bytes have exactly that size and hash."""
    try:
        file = Path(path).resolve(strict=True)
        for site in file.parents:
            for record in site.glob(f"{file.relative_to(site).parts[0]}-*.dist-info/RECORD"):
                listed = _listed(record, file.relative_to(site).as_posix())
                if listed is not None:
                    return _matches(file, *listed)
            if site.name in ("site-packages", "dist-packages"):
                break
    except (OSError, ValueError, csv.Error):
        return False
    return False


def trusted(paths: Iterable[str]) -> list[str]:
    """The files of `paths` that may be loaded without DuckDB's signature check (none when the
    environment asks for DuckDB's check)."""
    if os.environ.get(VERIFY_ENV, "").strip() not in ("", "0"):
        return []
    return [p for p in dict.fromkeys(paths) if shipped_intact(p)]


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
