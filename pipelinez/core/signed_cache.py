"""The project's salt and the signed cache files of `.pz/target/` made with it; every cache file of
`.pz/target/` written atomically (`write_atomic`).

The salt, `.pz/validate.key` (0600, beside `.pz/target` and not in it: a copied target carries no usable
signature), is made on first use. A signed file is a line holding HMAC-SHA256(salt, body) in hex, then
the body: a JSON object holding a format number, the versions of pz that wrote it and its entries. Reading
one that is missing, corrupt, unsigned, signed with another salt, of another format or of other versions
gives None, never an error: a cache is only ever a miss. It is read with `json`, never unpickled.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SALT_FILE = "validate.key"
# a cache file is rewritten when its entries and those a compile used differ in more than 1/REWRITE_SHARE
REWRITE_SHARE = 64


def write_atomic(path: Path, text: str) -> None:
    """`text` into `path` through a temporary file of the same folder renamed over it: a reader sees the
    old file or the new one, never half of one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def project_salt(root: Path, *, create: bool) -> str | None:
    """The project's salt, `.pz/validate.key` (made 0600 on first use with `create`); None: none. It is
    made whole or not at all (written to a temporary file linked into place), so no process ever reads
    half of one; an empty one (left by an older pz killed while it wrote it) is replaced."""
    path = root / ".pz" / SALT_FILE
    try:
        found = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        found = None
    except (OSError, ValueError):
        return None  # there but unreadable: left alone, and no cache
    if found or not create:
        return found or None
    salt = secrets.token_hex(32)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{SALT_FILE}.", suffix=".tmp")  # 0600
    except OSError:
        return None
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(salt)
        if found is None:
            os.link(tmp, path)  # never over another process's salt made meanwhile
        else:
            os.replace(tmp, path)
    except FileExistsError:
        return project_salt(root, create=False)
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return salt


def _mac(salt: str, body: bytes) -> str:
    return hmac.new(salt.encode("utf-8"), body, hashlib.sha256).hexdigest()


def read_signed(path: Path, salt: str, form: int, versions: str) -> dict[str, Any] | None:
    """The entries of the signed file `path`; None for anything but a sound file of this format and
    these versions signed with `salt`."""
    try:
        mac, _, body = path.read_bytes().partition(b"\n")
        if not hmac.compare_digest(mac, _mac(salt, body).encode("ascii")):
            return None
        data = json.loads(body)
        if data.get("format") != form or data.get("versions") != versions:
            return None
        entries = data["entries"]
        return entries if isinstance(entries, dict) else None
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        return None


def write_signed(path: Path, salt: str, form: int, versions: str, entries: dict[str, Any]) -> None:
    """`entries` into `path`, signed, atomically; a file that cannot be written is left as it was."""
    body = json.dumps({"format": form, "versions": versions, "entries": entries}, separators=(",", ":"))
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, _mac(salt, body.encode("utf-8")) + "\n" + body)


def worth_writing(old: Mapping[str, object], used: Mapping[str, object]) -> bool:
    """Whether a cache file holding `old` is rewritten with the entries a compile `used`: when they differ
    (an entry added, changed or no longer used) in more than 1/REWRITE_SHARE of the entries; in a small
    cache, any difference. A file is rewritten whole (at 2,000 pipelines about as long as the compile of one
    edit), so after an edit of a few files of a large project it is left as it was: what those files need
    is computed again by the next compiles (a few entries each) until enough differ. Entries are keyed by
    content, so an entry left in the file is never a wrong answer, only one that is not asked for."""
    changed = sum(1 for key, entry in used.items() if key not in old or old[key] != entry)
    changed += sum(1 for key in old if key not in used)
    return changed * REWRITE_SHARE > len(used)
