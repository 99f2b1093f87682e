"""The local backend: the project's `.pz/` folder, exactly as pz has always kept it.

Watermarks in `.pz/state.duckdb` (`RunState`), runs in `.pz/runs/<id>/`, blobs in `.pz/target/`. The project
lock is the `.pz/lock` flock the engine takes for every backend (the OS releases it when its holder dies), so
the lease methods here have nothing more to do.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pipelinez.core import failpoints
from pipelinez.core.run_state import RunState, Watermark
from pipelinez.core.state.backend import RESULTS, Holder, LeaseInfo, StateBackend


class LocalBackend(StateBackend):
    name = "local"
    remote = False

    def __init__(self, state_dir: Path, project: str = "", settings: Mapping[str, Any] | None = None):
        super().__init__(project, settings or {})
        self.state_dir = state_dir
        self.runs = state_dir / "runs"

    def describe(self) -> str:
        return f"local folder {self.state_dir}"

    def watermarks(self) -> dict[tuple[str, str], Watermark]:
        return RunState(self.state_dir).watermarks()

    def stamp(self) -> tuple[tuple[int, int, int], ...]:
        """What changes whenever a commit changes `.pz/state.duckdb` (its file and its WAL: inode, size,
        modification time; zeros when absent): two equal stamps mean the same committed watermarks."""
        path = RunState(self.state_dir).path
        found = []
        for file in (path, path.with_name(path.name + ".wal")):
            try:
                st = file.stat()
            except OSError:
                found.append((0, 0, 0))
                continue
            found.append((st.st_ino, st.st_size, st.st_mtime_ns))
        return tuple(found)

    def commit_watermarks(self, marks: Iterable[Watermark]) -> None:
        marks = list(marks)
        if marks:
            failpoints.hit("state.commit_watermarks")
        RunState(self.state_dir).commit_watermarks(marks)

    def put_run_file(self, run_id: str, name: str, text: str) -> None:
        folder = self.runs / run_id
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, folder / name)

    def get_run_file(self, run_id: str, name: str) -> str | None:
        try:
            return (self.runs / run_id / name).read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            return None

    def run_ids(self) -> list[str]:
        if not self.runs.is_dir():
            return []
        return sorted(p.name for p in self.runs.iterdir() if p.is_dir() and (p / RESULTS).exists())

    def delete_run(self, run_id: str) -> None:
        shutil.rmtree(self.runs / run_id, ignore_errors=True)

    def acquire(self, holder: Holder) -> LeaseInfo | None:
        return None  # the engine's .pz/lock flock is the local lock

    def renew(self, holder: Holder) -> bool:
        return True

    def release(self, holder: Holder) -> None:
        return None

    def lease(self) -> LeaseInfo | None:
        return None

    def put_blob(self, name: str, data: bytes) -> None:
        path = self.state_dir / "target" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    def get_blob(self, name: str) -> bytes | None:
        try:
            return (self.state_dir / "target" / name).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def check_writable(self) -> None:
        return None  # the .pz folder's own checks (PZ0521) run where it is written
