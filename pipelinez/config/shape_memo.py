"""Shape checks remembered by content: a project file whose parsed data passed its JSON Schema before is not
checked by jsonschema again, so loading an unchanged project (every `pz run`, a `pz validate` the validate
cache cannot answer) neither imports jsonschema nor builds its validators (issue 22's fixed costs).

`.pz/target/shapes.json` lists the digests of the (kind, data) pairs that had no schema error, under a key
of what else decides the answer: pz's version, the text of each kind's schema and the installed jsonschema
(its module file's size and modification time, read without importing it). The digests are salted with
`.pz/validate.key` (0600, beside `.pz/target`, shared with `engine.run.validate_cache`): a copied target
holds nothing a guess about a file's content could be checked against. Only passes are kept, so a memo can
skip a check but never invent an error; the cross-field rules of `config.shape` always run. Data that is not
plain JSON (a key that is not a string) is never remembered. A missing, corrupt or foreign file is empty; it
is rewritten atomically, holding the digests of the files of the last load only (bounded by the project).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from pipelinez import __version__
from pipelinez.core.signed_cache import project_salt, write_atomic

FILE = "shapes.json"
FORMAT = 1


class ShapeMemo:
    """The digests of the data of one project that passed a schema, read once, written once."""

    def __init__(self, root: Path, file: str = FILE) -> None:
        self._state = root / ".pz"
        self._file = file
        self._salt: bytes | None = None
        self._key = _environment_key()
        self._stored: frozenset[str] = frozenset()
        self._used: set[str] = set()
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError, KeyError):
            entry = json.loads((self._state / "target" / file).read_bytes())
            if entry.get("format") == FORMAT and entry.get("key") == self._key:
                self._stored = frozenset(str(d) for d in entry["passed"])

    def digest(self, schema: str, data: Any) -> str | None:
        """The salted digest of `data` checked against `schema` (its text); None: not rememberable."""
        text = _canonical(data)
        salt = self._salt_bytes() if text is not None else None
        if text is None or salt is None:
            return None
        message = json.dumps([hashlib.sha256(schema.encode("utf-8")).hexdigest(), text])
        return hmac.new(salt, message.encode("utf-8"), hashlib.sha256).hexdigest()

    def passed(self, digest: str | None) -> bool:
        if digest is not None and digest in self._stored:
            self._used.add(digest)
            return True
        return False

    def remember(self, digest: str | None) -> None:
        if digest is not None:
            self._used.add(digest)

    def save(self) -> None:
        """Write the digests this load used, when they differ from the stored ones; never raises."""
        if self._used == self._stored or self._salt is None:
            return
        entry = {"format": FORMAT, "key": self._key, "passed": sorted(self._used)}
        with contextlib.suppress(OSError):
            folder = self._state / "target"
            folder.mkdir(parents=True, exist_ok=True)
            write_atomic(folder / self._file, json.dumps(entry, separators=(",", ":")))
        self._stored = frozenset(self._used)

    def _salt_bytes(self) -> bytes | None:
        if self._salt is None:
            salt = project_salt(self._state.parent, create=True)
            self._salt = salt.encode("ascii") if salt else None
        return self._salt


def _environment_key() -> str:
    """pz's version and the installed jsonschema, without importing it."""
    spec = find_spec("jsonschema")
    origin = spec.origin if spec is not None else None
    stat: list[object] = []
    if origin:
        with contextlib.suppress(OSError):
            found = os.stat(origin)
            stat = [origin, found.st_size, found.st_mtime_ns]
    return hashlib.sha256(json.dumps([__version__, stat]).encode("utf-8")).hexdigest()


def _canonical(data: Any) -> str | None:
    """`data` as JSON with sorted keys, when it is plain JSON data with string keys; else None."""
    if not _plain(data):
        return None
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=True)


def _plain(value: Any, depth: int = 0) -> bool:
    if depth > 200:
        return False
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v, depth + 1) for v in value)
    return value is None or type(value) in (str, int, float, bool)
