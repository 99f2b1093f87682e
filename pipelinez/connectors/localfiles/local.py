"""localfiles' places in the kit's terms: the root folder as a `FileStore`, an output folder as an
`OutputFolder` (atomic swap and append of `folders`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipelinez.connectors.files.store import FileRef, local_ref
from pipelinez.connectors.localfiles.folders import append_file, append_tree, replace_folder
from pipelinez.connectors.localfiles.paths import list_files, under_root

if TYPE_CHECKING:
    import duckdb


@dataclass(frozen=True)
class LocalStore:
    root: Path

    def describe(self) -> str:
        return f"root {self.root}"

    def list(self, path: str) -> list[str]:
        return list_files(self.root, path)

    def ref(self, name: str) -> FileRef:
        return local_ref(under_root(self.root, name))

    def connect(self) -> duckdb.DuckDBPyConnection:
        import duckdb

        return duckdb.connect()


@dataclass(frozen=True)
class LocalFolder:
    folder: Path

    def describe(self) -> str:
        return str(self.folder)

    def parts(self, ext: str) -> list[tuple[FileRef, int]]:
        if not self.folder.is_dir():
            return []
        found = [p for p in self.folder.glob(f"*.{ext}") if p.is_file() and not p.name.startswith(".")]
        return [(local_ref(p), p.stat().st_mtime_ns) for p in found]

    def replace(self, run_id: str, fill: Callable[[str], None]) -> None:
        replace_folder(self.folder, run_id, lambda tmp: fill(os.fspath(tmp)))

    def append(self, run_id: str, ext: str, fill: Callable[[str], None]) -> None:
        append_file(self.folder, run_id, ext, lambda dest: fill(os.fspath(dest)))

    def append_tree(self, run_id: str, fill: Callable[[str], None]) -> int:
        return append_tree(self.folder, run_id, lambda tmp: fill(os.fspath(tmp)))
