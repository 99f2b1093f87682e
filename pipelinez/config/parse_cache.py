"""The persistent parse cache, `.pz/target/parsed.json`: each project YAML file parsed and shape-checked
once per content.

An entry's key is the digest of the file's kind (project, source, sink, sidecar), its project path and its
text; its value is the parsed document as plain JSON data with the line/column of every key and value. Only
a file that parsed and passed tier 1 (shape) is kept, and only when its data is exactly JSON (mappings with
string keys, lists, strings, numbers, booleans, null): reading it back gives the same document, types
included. An error is found again by parsing again, never replayed.

The file is written whole (a temporary file renamed over it) with the entries this load used, so it holds
no more entries than the project has YAML files. Its body is signed with the project's salt (the HMAC of
`.pz/validate.key`, kept outside `.pz/target`): a file that is missing, corrupt, unsigned, signed with
another salt, of another format or of another pz or ruamel.yaml is ignored (the cache starts empty), never
an error; one that cannot be written is left as it was. It is read with `json`, never unpickled: a hostile
file can at worst be ignored.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

from pipelinez.config.positions import JsonPath, LineCol, Positions
from pipelinez.config.yaml_doc import YamlDoc
from pipelinez.core.signed_cache import read_signed, write_signed

FILE = "parsed.json"
FORMAT = 1
# the YAML files parsed (not taken from the cache) in this process, by project path (a testing hook)
PARSED: Counter[str] = Counter()


class ParseCache:
    """The entries of `.pz/target/parsed.json` (`folder`: the target folder), signed with `salt`;
    `versions`: the pz that parsed them (its version and the fingerprint of its modules)."""

    def __init__(self, folder: Path, salt: str, versions: str):
        self.folder = folder
        self._salt = salt
        self.versions = versions
        self._old: dict[str, Any] = read_signed(folder / FILE, salt, FORMAT, versions) or {}
        self._used: dict[str, Any] = {}

    @staticmethod
    def key(kind: str, file: str, text: str) -> str:
        return hashlib.sha256(json.dumps([kind, file, text]).encode("utf-8")).hexdigest()

    def get(self, key: str, file: str) -> YamlDoc | None:
        """The document parsed and shape-checked from this content; None when not cached."""
        entry = self._old.get(key)
        if entry is None:
            return None
        try:
            keys = {_path(p): _linecol(at) for p, at in entry["keys"]}
            values = {_path(p): _linecol(at) for p, at in entry["values"]}
            data = entry["data"]
            if not isinstance(data, dict):
                return None
        except (TypeError, ValueError, KeyError):
            return None
        self._used[key] = entry
        return YamlDoc(file, data, Positions(file, keys, values))

    def put(self, key: str, doc: YamlDoc) -> None:
        """Keep a document that parsed and passed tier 1, when its data is exactly JSON."""
        if not _exact_json(doc.data):
            return
        self._used[key] = {
            "data": doc.data,
            "keys": [[list(p), list(at)] for p, at in doc.positions.keys.items()],
            "values": [[list(p), list(at)] for p, at in doc.positions.values.items()],
        }

    def save(self) -> None:
        """Write the entries this load used, signed and atomically; unchanged: nothing written."""
        if self._used != self._old:
            write_signed(self.folder / FILE, self._salt, FORMAT, self.versions, self._used)


def _path(parts: Any) -> JsonPath:
    if not isinstance(parts, list):
        raise TypeError("path")
    for part in parts:  # a loop, not all(<generator>): ~50 paths per sidecar read back
        if not isinstance(part, _PART):
            raise TypeError("path")
    return tuple(parts)


_PART = (str, int)


def _linecol(at: Any) -> LineCol:
    line, col = at
    if not isinstance(line, int) or not isinstance(col, int):
        raise TypeError("line/col")
    return line, col


def _exact_json(value: object) -> bool:
    """Whether JSON gives `value` back exactly: the same types, not only equal values."""
    if value is None or type(value) in (str, int, float, bool):
        return True
    if type(value) is list:
        return all(_exact_json(item) for item in value)
    if type(value) is dict:
        return all(type(k) is str and _exact_json(v) for k, v in value.items())
    return False
