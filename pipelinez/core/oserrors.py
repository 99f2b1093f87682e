"""Operating-system refusals (permissions, a file where a folder belongs, a full disk) in words a user reads.

An OSError on a path is a user or environment error, never a pz bug: it becomes a diagnostic naming the path
and the reason, with a code chosen by the caller (PZ0522 by default).
"""

from __future__ import annotations

import errno

from pipelinez.core.diagnostics import Diagnostic, error

_REASONS = {
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "it is a folder, not a file",
    errno.EEXIST: "something else already exists there",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted (read-only or immutable)",
    errno.EROFS: "read-only file system",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.ENOENT: "no such file or folder",
    errno.ELOOP: "symbolic links loop",
    errno.ENAMETOOLONG: "the name is too long",
    errno.EMFILE: "too many open files",
}


def os_reason(exc: OSError) -> str:
    """The reason of an OSError, without Python's `[Errno n]` decoration."""
    if exc.errno in _REASONS:
        return _REASONS[exc.errno]
    return exc.strerror or type(exc).__name__


def os_error(exc: OSError, doing: str = "", code: str = "PZ0522", next_step: str = "") -> Diagnostic:
    """A diagnostic for `exc` placed at its path: "<path>: <doing>: <reason>"."""
    path = str(exc.filename) if exc.filename is not None else None
    if path is not None and exc.filename2 is not None:
        path += f" -> {exc.filename2}"
    message = f"{doing or 'cannot use this path'}: {os_reason(exc)}"
    return error(code, message, file=path, next_step=next_step)
