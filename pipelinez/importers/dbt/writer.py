"""Writing the imported project: everything into a temporary folder first, then moved into place; an
--out folder that is neither empty nor an earlier import is refused (PZ0143)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from pipelinez.core.diagnostics import PzError, error
from pipelinez.importers.dbt.report import MARKER

_LIST = ".pz-import-files"


def _earlier_import(out: Path) -> bool:
    report = out / "import-report.md"
    try:
        return report.read_text(encoding="utf-8").startswith(MARKER)
    except OSError:
        return False


def check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise PzError([error("PZ0143", f"--out {out} is a file, not a folder", file=str(out))])
    if out.is_dir() and any(out.iterdir()) and not _earlier_import(out):
        message = (
            f"--out {out} is not empty and holds no earlier import (no import-report.md of pz import dbt)"
        )
        raise PzError([error("PZ0143", message, file=str(out))])


def write_files(out: Path, files: dict[str, bytes]) -> None:
    """All files are written under a temporary folder beside `out` before `out` is touched. A new or empty
    `out` is then the temporary folder renamed; an earlier import gets its files replaced one by one and
    the files the earlier import wrote that this one doesn't are removed (nothing else: .pz/ and the
    warehouse stay)."""
    check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    listing = "\n".join(sorted(files)) + "\n"
    staged = Path(tempfile.mkdtemp(prefix=f".{out.name}.import-", dir=out.parent))
    try:
        for rel, data in sorted(files.items()):
            path = staged / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        (staged / _LIST).write_text(listing, encoding="utf-8")
        if not out.exists() or not any(out.iterdir()):
            if out.exists():
                out.rmdir()
            os.replace(staged, out)
            return
        _replace_into(staged, out, files)
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def _replace_into(staged: Path, out: Path, files: dict[str, bytes]) -> None:
    previous = (out / _LIST).read_text(encoding="utf-8").split() if (out / _LIST).is_file() else []
    inside = out.resolve()
    for rel in sorted(set(previous) - set(files)):
        stale = out / rel
        # the list is a file in the folder, so anyone may have edited it: only files under --out that are
        # not links are removed (a `../x` or an absolute path, or a link to one, is left alone)
        if stale.is_symlink() or not stale.resolve().is_relative_to(inside) or stale.resolve() == inside:
            continue
        stale.unlink(missing_ok=True)
    for rel in [*sorted(files), _LIST]:
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staged / rel, target)
