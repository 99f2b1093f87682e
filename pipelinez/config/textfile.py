"""Reading project files as text: UTF-8, at most 10 MiB, every failure a PZ0108 diagnostic."""

from __future__ import annotations

import stat
from pathlib import Path

from pipelinez.core.diagnostics import Diagnostic, error

MAX_FILE_BYTES = 10 * 1024 * 1024


def read_text(path: Path, file: str) -> tuple[str | None, list[Diagnostic]]:
    """The text of `path` (shown to users as `file`), or None and a PZ0108 diagnostic. Never raises."""
    try:
        info = path.stat()
        if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):  # a named pipe would block forever
            return None, [
                error("PZ0114", f"{file} is not a regular file (a named pipe, socket or device)", file=file)
            ]
        size = info.st_size
        if size > MAX_FILE_BYTES:
            return None, [
                _unreadable(file, f"is {size / 1024 / 1024:.1f} MiB; project files may be at most 10 MiB")
            ]
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        return None, [_unreadable(file, f"cannot be read: {exc.strerror or exc}")]
    if len(raw) > MAX_FILE_BYTES:
        return None, [_unreadable(file, "is larger than 10 MiB; project files may be at most 10 MiB")]
    return decode_text(raw, file)


def decode_text(raw: bytes, file: str) -> tuple[str | None, list[Diagnostic]]:
    """The text of a project file's bytes (at most MAX_FILE_BYTES), or None and a PZ0108 diagnostic."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        line_start = raw.rfind(b"\n", 0, exc.start) + 1
        col = len(raw[line_start : exc.start].decode("utf-8", "replace")) + 1
        return None, [
            error(
                "PZ0108",
                f"{file} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at line {line})",
                file=file,
                line=line,
                col=col,
            )
        ]
    return text, []


def _unreadable(file: str, what: str) -> Diagnostic:
    return error("PZ0108", f"{file} {what}", file=file)
