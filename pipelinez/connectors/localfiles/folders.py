"""Replacing an output folder atomically, and adding one file to it atomically.

replace: the new result is written into a temp folder next to the target (same parent, so same file system),
then swapped in with one rename:
- target exists (Linux): `renameat2(RENAME_EXCHANGE)` swaps the two names in one step, so a reader sees the
  old folder or the new one, never neither; the old contents (now under the temp name) are then deleted;
- target absent: a plain `os.rename`;
- elsewhere (or a file system without RENAME_EXCHANGE): the target is renamed aside to `.<name>.pz-old-…`,
  the temp folder renamed in, the old one deleted; if the second rename fails the first is undone. A crash
  between the two renames leaves the old folder under its `.pz-old-` name; the next write to that output
  puts it back before doing anything else.
Any failure before the swap removes the temp folder and leaves the target exactly as it was. A process
killed before the swap leaves a stale temp folder; the next write to that output sweeps it.

append: the new file is written under a hidden temp name inside the folder and renamed to its final name,
so a reader (or a failed attempt) never sees half a file. Hidden names are never read by localfiles globs.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from pipelinez.connectors.files.formats import safe_token
from pipelinez.core import failpoints
from pipelinez.core.diagnostics import PzConnectorError

AT_FDCWD = -100
RENAME_EXCHANGE = 2
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP}


def _tmp_prefix(target: Path) -> str:
    return f".{target.name}.pz-tmp-"


def _old_prefix(target: Path) -> str:
    return f".{target.name}.pz-old-"


def exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one step with renameat2(RENAME_EXCHANGE). False when unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # here, not at the top: `pz validate` imports this module and never swaps a folder

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in _UNSUPPORTED:
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def recover_and_sweep(target: Path) -> None:
    """Put back an old folder a crashed fallback swap left aside, then delete stale temp/old folders."""
    parent = target.parent
    if not parent.is_dir():
        return
    olds = sorted(p for p in parent.iterdir() if p.name.startswith(_old_prefix(target)))
    if olds and not os.path.lexists(target):
        os.rename(olds.pop(), target)
    for stale in olds + [p for p in parent.iterdir() if p.name.startswith(_tmp_prefix(target))]:
        shutil.rmtree(stale, ignore_errors=True)


def swap_in(tmp: Path, target: Path) -> None:
    """Make `tmp` the folder at `target` in one step; the previous folder is deleted afterwards."""
    if not os.path.lexists(target):
        os.rename(tmp, target)
        return
    if exchange(tmp, target):
        shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the previous folder
        return
    old = target.parent / f"{_old_prefix(target)}{secrets.token_hex(4)}"
    os.rename(target, old)
    try:
        os.rename(tmp, target)
    except BaseException:
        os.rename(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)


def check_folder_target(target: Path) -> None:
    if os.path.lexists(target) and not target.is_dir():
        raise PzConnectorError(
            f"output path {target} exists and is not a folder; localfiles writes an output as a folder of "
            "data files: remove or rename that file, or set another path",
            code="PZ0501",
        )


def replace_folder(
    target: Path, run_id: str, fill: Callable[[Path], None], check: Callable[[], None] = lambda: None
) -> None:
    """Fill a fresh temp folder next to `target`, then swap it in (see the module docstring). `check` runs
    once an interrupted swap is undone, before anything is written (it refuses a folder pz may not empty)."""
    check_folder_target(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    recover_and_sweep(target)
    check()
    tmp = target.parent / f"{_tmp_prefix(target)}{safe_token(run_id)}-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:
        fill(tmp)
        failpoints.hit("sink.before_swap")
        swap_in(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def append_file(
    folder: Path,
    run_id: str,
    ext: str,
    fill: Callable[[Path], None],
    register: Callable[[list[Path]], None] = lambda _: None,
) -> Path:
    """Write one new file `part-<run>-<n>.<ext>` into `folder` through a hidden temp name; `register` is
    told its final path just before it appears."""
    check_folder_target(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"part-{safe_token(run_id)}-"
    taken = {p.name for p in folder.iterdir()}
    n = 0
    while f"{stem}{n:05d}.{ext}" in taken:
        n += 1
    final = folder / f"{stem}{n:05d}.{ext}"
    tmp = folder / f".{final.name}.pz-tmp-{secrets.token_hex(4)}"
    try:
        fill(tmp)
        if os.path.lexists(final):  # someone took the name meanwhile: never overwrite
            raise PzConnectorError(
                f"output file {final} appeared while writing; retry the write",
                is_transient=True,
                code="PZ0501",
            )
        register([final])
        os.rename(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return final


def append_tree(
    folder: Path,
    run_id: str,
    fill: Callable[[Path], None],
    register: Callable[[list[Path]], None] = lambda _: None,
) -> int:
    """Fill a hidden temp folder inside `folder` (a partitioned write: `<col>=<value>/part-….<ext>`), then
    rename each of its files to the same relative path in `folder`, never over an existing file. Each file
    appears whole; a failure partway leaves the files renamed so far. `register` is told their final paths
    before the first appears. The number of files added."""
    check_folder_target(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".pz-tmp-{safe_token(run_id)}-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:
        fill(tmp)
        files = sorted(p for p in tmp.rglob("*") if p.is_file())
        register([folder / file.relative_to(tmp) for file in files])
        for file in files:
            dest = folder / file.relative_to(tmp)
            if os.path.lexists(dest):
                raise PzConnectorError(
                    f"output file {dest} appeared while writing; retry the write",
                    is_transient=True,
                    code="PZ0501",
                )
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.rename(file, dest)
        return len(files)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
