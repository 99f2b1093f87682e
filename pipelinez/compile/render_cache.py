"""The persistent render cache, `.pz/target/rendered.json`: each pipeline's (and singular test's) SQL
rendered once per content and per the values it read.

A rendering reads the file's text and path, the macro files, pz and Jinja themselves, and the values of the
vars and environment variables it calls (var(), env(), env_var(): the only way a template, or a macro it
calls, reaches a value; every call is recorded, with its place). ref(), sink() and watermark() render as
placeholder tokens resolved later. So an entry's key is the digest of the file's path and text under the
macro files' digest; the entry holds the rendered text, the calls it recorded, the vars and env it read
and a digest of their values (type and value of a var; flags, default and value of an env, salted): it is
taken only while those values are the same. An edit of a var or env value renders again only what read it;
an edit of a macro file renders everything again. Kept only: a rendering without a failure that read no
secret environment variable (a secret's value would be in the rendered text, or in its values' digest): in a
project with secrets, what reads one is rendered every time and the rest is cached. An error is found again
by rendering again, never replayed.

The file is written whole with the entries this compile used, signed with the project's salt
(`core.signed_cache`), when enough of them changed (`worth_writing`: after an edit of one file of a large
project it is left as it was, and that file is rendered again by the next compiles until enough changed), and
at once when it holds an entry that read an environment variable since declared secret:
a file that is missing, corrupt, unsigned, signed with another salt or of another pz or Jinja is ignored
(the cache starts empty), never an error.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
from collections import Counter
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from pipelinez import __version__
from pipelinez.compile.bind_cache import pz_fingerprint
from pipelinez.compile.template_calls import Call, Rendered
from pipelinez.compile.values import ResolvedValues
from pipelinez.core.diagnostics import Place
from pipelinez.core.signed_cache import project_salt, read_signed, worth_writing, write_signed

FILE = "rendered.json"
FORMAT = 1


# the calls through which a template reads a value, and which table holds it
_READS = {"var": "var", "env": "env", "env_var": "env"}
# the files rendered without the cache in this process, by project path (a testing hook, never timed)
RENDERED: Counter[str] = Counter()


class RenderCache:
    """The entries of `.pz/target/rendered.json` valid for one rendering context."""

    def __init__(self, folder: Path, salt: str, values: ResolvedValues, macro_files: Mapping[str, str]):
        self.folder, self._salt, self.values = folder, salt, values
        self._secrets = frozenset(name for name, (spec, _) in values.env.items() if spec.secret)
        self.context = hashlib.sha256(json.dumps(sorted(macro_files.items())).encode("utf-8")).hexdigest()
        self.versions = f"pz {__version__} {pz_fingerprint()}; jinja2 {_jinja_version()}"
        self._old: dict[str, Any] = read_signed(folder / FILE, salt, FORMAT, self.versions) or {}
        self._used: dict[str, Any] = {}
        self._digests: dict[tuple[tuple[str, str], ...], str] = {}  # by the names read

    @classmethod
    def of(cls, root: Path, values: ResolvedValues, macro_files: Mapping[str, str]) -> RenderCache | None:
        """The project's render cache; None when it has no salt."""
        salt = project_salt(root, create=True)
        if salt is None:
            return None
        return cls(root / ".pz" / "target", salt, values, macro_files)

    def _key(self, raw: str, file: str) -> str:
        data = f"{self.context}\n{len(file)}:{file}\n{raw}"  # the path's length: no two splits alike
        return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()

    def get(self, raw: str, file: str) -> Rendered | None:
        key = self._key(raw, file)
        entry = self._old.get(key)
        if entry is None:
            return None
        try:
            text = entry["text"]
            if not isinstance(text, str) or entry["values"] != self._values_digest(entry["reads"]):
                return None
            calls = [_call(c) for c in entry["calls"]]
        except (TypeError, ValueError, KeyError):
            return None
        self._used[key] = entry
        return Rendered(text, calls, text)

    def put(self, raw: str, file: str, rendered: Rendered) -> None:
        """Keep a rendering without failures that read no secret (and whose display text is its text)."""
        if rendered.failures or rendered.display_text != rendered.text:
            return
        read = sorted({(_READS[c.function], c.args[0]) for c in rendered.calls if c.function in _READS})
        if any(kind == "env" and name in self._secrets for kind, name in read):
            return
        calls = [[c.function, list(c.args), c.place.file, c.place.line, c.place.col] for c in rendered.calls]
        reads = [list(pair) for pair in read]  # as JSON gives them back: lists
        entry = {"text": rendered.text, "calls": calls, "reads": reads, "values": self._values_digest(reads)}
        self._used[self._key(raw, file)] = entry

    def _values_digest(self, reads: Any) -> str:
        """The salted digest of the current values (and types or flags) of the vars and env it read."""
        names = tuple((str(kind), str(name)) for kind, name in reads)
        known = self._digests.get(names)
        if known is None:
            known = self._digests[names] = self._digest_of(names)
        return known

    def _digest_of(self, reads: tuple[tuple[str, str], ...]) -> str:
        found: list[object] = []
        for kind, name in reads:
            if kind == "var" and name in self.values.vars:
                spec, value = self.values.vars[name]
                found.append(["var", name, str(spec.type), repr(value)])
            elif kind == "env" and name in self.values.env:
                env, text = self.values.env[name]
                found.append(["env", name, env.required, env.secret, env.default, text])
            else:
                found.append([kind, name, None])
        data = json.dumps(found, default=repr).encode("utf-8")
        return hmac.new(self._salt.encode("utf-8"), data, hashlib.sha256).hexdigest()

    def save(self) -> None:
        """Write the entries this compile used, signed and atomically, when enough changed
        (`signed_cache.worth_writing`); unchanged: nothing written."""
        if worth_writing(self._old, self._used) or self._holds_a_secret():
            write_signed(self.folder / FILE, self._salt, FORMAT, self.versions, self._used)

    def _holds_a_secret(self) -> bool:
        """Whether the file holds an entry that read an environment variable now declared secret (kept when
        it was not): rewritten without it at once, never left for enough other entries to change."""
        if not self._secrets:
            return False
        for entry in self._old.values():
            reads = entry.get("reads") if isinstance(entry, dict) else None
            for pair in reads if isinstance(reads, list) else ():
                if isinstance(pair, list) and pair[:1] == ["env"] and pair[1:] and pair[1] in self._secrets:
                    return True
        return False


@functools.cache
def _jinja_version() -> str | None:
    try:
        return metadata.version("jinja2")
    except metadata.PackageNotFoundError:
        return None


def _call(data: Any) -> Call:
    """A recorded call read back (8,000 per compile at 2,000 pipelines): checked, then built without the
    frozen dataclasses' `__init__` (`_built`). A file name that is not printable takes `Place`'s own way."""
    function, args, file, line, col = data
    if type(function) is not str or type(args) is not list:
        raise TypeError("call")
    for arg in args:
        if type(arg) is not str:
            raise TypeError("call")
    if file is not None and type(file) is not str:
        raise TypeError("place")
    if (line is not None and type(line) is not int) or (col is not None and type(col) is not int):
        raise TypeError("place")
    if file is None or file.isprintable():
        place = _built(Place, {"file": file, "line": line, "col": col, "node": None})
    else:
        place = Place(file, line, col)
    return _built(Call, {"function": function, "args": tuple(args), "place": place})


_T = TypeVar("_T")


def _built(cls: type[_T], fields: dict[str, Any]) -> _T:
    """An instance of the frozen dataclass `cls` with exactly these fields (all of them), set as its
    `__init__` sets them, without that `__init__` (one `object.__setattr__` per field) nor `__post_init__`:
    equal, and hashed alike, to `cls(**fields)` when that would leave them as given
    (tests/unit/test_render_cache_calls.py)."""
    made = object.__new__(cls)
    made.__dict__.update(fields)
    return made
