"""localfiles' places in the kit's terms: the root folder as a `FileStore`, an output folder as an
`OutputFolder` (atomic swap and append of `folders`, keeping the folder's manifest of pz's files:
`ownership`)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipelinez.connectors.files import ownership
from pipelinez.connectors.files.store import FileRef, local_ref
from pipelinez.connectors.localfiles.folders import append_file, append_tree, replace_folder
from pipelinez.connectors.localfiles.paths import list_files, under_root
from pipelinez.core import duck_connect

if TYPE_CHECKING:
    import duckdb


@dataclass(frozen=True)
class LocalStore:
    """The local files under a connector's root folder."""

    root: Path

    def describe(self) -> str:
        return f"root {self.root}"

    def list(self, path: str) -> list[str]:
        return list_files(self.root, path)

    def ref(self, name: str) -> FileRef:
        return local_ref(under_root(self.root, name))

    def connect(self) -> duckdb.DuckDBPyConnection:

        return duck_connect.connect()


def files_under(folder: Path) -> list[str]:
    """Every file under `folder` (hidden ones too; a link to a folder counts as a file: it is not followed),
    as sorted '/'-separated relative paths; empty when `folder` does not exist."""
    found: list[str] = []
    for top, dirs, names in os.walk(folder):
        base = Path(top)
        links = [d for d in dirs if os.path.islink(base / d)]
        dirs[:] = [d for d in dirs if d not in links]
        found += [(base / n).relative_to(folder).as_posix() for n in [*names, *links]]
    return sorted(found)


def write_manifest(folder: Path, files: list[str] | set[str]) -> None:
    """Write `folder`'s manifest whole (a hidden temp file renamed over it)."""
    tmp = folder / f".{ownership.MANIFEST}.pz-tmp-{secrets.token_hex(4)}"
    try:
        tmp.write_bytes(ownership.manifest_bytes(files))
        os.replace(tmp, folder / ownership.MANIFEST)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class LocalFolder:
    """A local output folder, and whether a replace may remove files pz did not write."""

    folder: Path
    foreign_ok: bool = False  # foreign_files: replace (a replace may remove files pz did not write)

    def describe(self) -> str:
        return str(self.folder)

    def parts(self, ext: str) -> list[tuple[FileRef, int]]:
        if not self.folder.is_dir():
            return []
        found = [p for p in self.folder.glob(f"*.{ext}") if p.is_file() and not p.name.startswith(".")]
        return [(local_ref(p), p.stat().st_mtime_ns) for p in found]

    def _manifest(self) -> bytes | None:
        try:
            return (self.folder / ownership.MANIFEST).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def _check_replace(self) -> None:
        ownership.check_replace(files_under(self.folder), self._manifest(), self.describe(), self.foreign_ok)

    def _register(self, finals: list[Path]) -> None:
        """Add files an append is about to publish to the manifest (with the pz files already there)."""
        owned = ownership.classify(files_under(self.folder), self._manifest(), self.describe()).owned
        write_manifest(self.folder, {*owned, *(p.relative_to(self.folder).as_posix() for p in finals)})

    def replace(self, run_id: str, fill: Callable[[str], None]) -> None:
        def fill_and_record(tmp: Path) -> None:
            fill(os.fspath(tmp))
            write_manifest(tmp, files_under(tmp))

        replace_folder(self.folder, run_id, fill_and_record, self._check_replace)

    def append(self, run_id: str, ext: str, fill: Callable[[str], None]) -> None:
        append_file(self.folder, run_id, ext, lambda dest: fill(os.fspath(dest)), self._register)

    def append_tree(self, run_id: str, fill: Callable[[str], None]) -> int:
        return append_tree(self.folder, run_id, lambda tmp: fill(os.fspath(tmp)), self._register)
