"""An output prefix of an object store (`ObjectFolder`) and its writes.

Replace writes the result under a hidden temp prefix next to the output (`.orders.pz-tmp-<run>-<hex>/`), then
promotes it. A result of one object over an output holding at most that object is promoted with one
server-side copy over `part-00000.<ext>` (`ObjectStore.copy`: one object replaced in one step, so a reader
sees the old file or the new one, whatever its size: the s3 store copies an object over CopyObject's cap in
parts of one multipart upload; the azure store uses Azure's asynchronous Copy Blob, which is undone from a
snapshot when it does not succeed, see `azureblob.copying`). Any other promote (several objects, as a
partitioned output writes, or older objects to delete) backs up the output's objects into a hidden sibling
prefix and writes a journal before it touches the output, so a failure puts the output back as it was, and a
promote killed midway is rolled back by the next write of the output before anything else (`promoting`). Every
write starts with that roll-back, then sweeps what killed writes left: temp and backup prefixes, and
incomplete multipart uploads under them and the output (`ObjectStore.abort_uploads`). So a failed replace
leaves the output exactly as it was (a killed one: once the next write of that output runs). Append writes its
one new object under a temp prefix too and copies it in as `part-<run>-<n>.<ext>` once complete: DuckDB
completes an object's upload even when its COPY fails midway, so writing in place could leave half a file;
this way a failed append adds nothing.

Every write keeps the output's manifest object, `<prefix>/.pz-manifest.json`, naming the objects pz wrote
there (`ownership`): a replace refuses an output holding other objects (PZ0530) unless `foreign_files:
replace`, checked after the roll-back above. A journaled promote carries it like any other object (a roll-back
puts the old one back); around a single-object promote it is put first naming the old and new objects, then
the new one only, so a crash at any point leaves it naming every pz object there. An append registers its
object in it before copying it in.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipelinez.connectors.files import ownership, promoting
from pipelinez.connectors.files.formats import safe_token
from pipelinez.connectors.files.objects import ObjectStore
from pipelinez.connectors.files.store import FileRef
from pipelinez.connectors.sdk_errors import ObjectStoreError
from pipelinez.core import failpoints
from pipelinez.core.diagnostics import PzConnectorError

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class ObjectFolder:
    """An output prefix of an object store (see the module docstring for replace and append)."""

    store: ObjectStore
    prefix: str  # no leading or trailing '/'
    foreign_ok: bool = False  # foreign_files: replace (a replace may remove objects pz did not write)

    def describe(self) -> str:
        return self.store.uri(self.prefix)

    def _manifest_key(self) -> str:
        return f"{self.prefix}/{ownership.MANIFEST}"

    def _state(self, manifest: bytes | None) -> ownership.Ownership:
        files = [key[len(self.prefix) + 1 :] for key, _ in self.store.objects(self.prefix)]
        return ownership.classify(files, manifest, self.describe())

    def _owned(self) -> frozenset[str]:
        """The objects of pz's the output holds now (what an append keeps in the manifest)."""
        return self._state(self.store.get(self._manifest_key())).owned

    def _register(self, owned: frozenset[str] | set[str], finals: list[str]) -> None:
        """Write the manifest naming `owned` and the output keys `finals` (before they appear)."""
        rel = {key[len(self.prefix) + 1 :] for key in finals}
        self.store.put(self._manifest_key(), ownership.manifest_bytes({*owned, *rel}))

    def _parent_and_name(self) -> tuple[str, str]:
        parent, _, name = self.prefix.rpartition("/")
        return parent, name

    def _hidden_base(self, kind: str) -> str:
        """The start of this output's hidden sibling keys of `kind` (pz-tmp, pz-bak, pz-promote)."""
        parent, name = self._parent_and_name()
        return f"{parent}/.{name}.{kind}" if parent else f".{name}.{kind}"

    def _tmp_base(self) -> str:
        return self._hidden_base("pz-tmp-")

    def _bak_base(self) -> str:
        return self._hidden_base("pz-bak-")

    def _journal(self) -> str:
        return self._hidden_base("pz-promote.json")

    def parts(self, ext: str) -> list[tuple[FileRef, int]]:
        found = []
        for key, mtime in self.store.objects(self.prefix):
            rest = key[len(self.prefix) + 1 :]
            if "/" not in rest and not rest.startswith(".") and rest.endswith(f".{ext}"):
                found.append((self.store.ref(key), mtime))
        return found

    def sweep(self) -> None:
        """Clear what an earlier failed or killed write of this output left behind: first, a promote killed
        midway is rolled back from its journal (`promoting`); then temp and backup prefixes are deleted."""
        import pyarrow.fs as pafs

        promoting.roll_back_interrupted(self.store, self._journal())
        parent, _ = self._parent_and_name()
        bases = tuple(self.store._fs_path(base) for base in (self._tmp_base(), self._bak_base()))
        selector = pafs.FileSelector(self.store._fs_path(parent), recursive=False, allow_not_found=True)
        for info in self.store.fs.get_file_info(selector):
            if info.path.startswith(bases):
                self.store.remove(info.path[len(self.store.root) + 1 :])
        # uploads a killed write left: to a temp or backup prefix (DuckDB's COPY, a part copy) or to an
        # output key (a part copy). A store or policy that refuses to list them (not transient) is no reason
        # to refuse the write.
        for prefix in (self._tmp_base(), self._bak_base(), f"{self.prefix}/"):
            try:
                self.store.abort_uploads(prefix)
            except OSError as exc:
                if not isinstance(exc, ObjectStoreError) or exc.transient:
                    raise

    def _new_tmp(self, run_id: str) -> str:
        return f"{self._tmp_base()}{safe_token(run_id)}-{secrets.token_hex(4)}"

    def replace(self, run_id: str, fill: Callable[[str], None]) -> None:
        self.sweep()
        manifest = self.store.get(self._manifest_key())
        owned: frozenset[str] = frozenset()  # opted in: nothing is taken for pz's (nor the manifest read)
        if not self.foreign_ok:
            state = self._state(manifest)
            ownership.refuse_foreign(self.describe(), state.foreign)
            owned = state.owned
        tmp = self._new_tmp(run_id)
        try:
            fill(self.store.uri(tmp))
            failpoints.hit("sink.before_swap")
            self._promote(tmp, owned, manifest)
        finally:
            self._discard(tmp)

    def _discard(self, tmp: str) -> None:
        """Remove a write's temp prefix and abort any upload to it (a failed COPY may leave one)."""
        with contextlib.suppress(OSError):
            self.store.remove(tmp)
        with contextlib.suppress(OSError):
            self.store.abort_uploads(f"{tmp}/")

    def _promote(self, tmp: str, owned: frozenset[str], manifest: bytes | None) -> None:
        """Copy every object of the temp prefix over the output's (same relative keys), then delete the
        output's other objects. One object and nothing to delete: one copy, atomic, with the manifest put
        around it (first naming `owned` and the new object, then the new object; put back as it was,
        `manifest`, when the copy fails). Anything more, manifest included, is backed up and journaled
        first, so a failure leaves the output as it was (`promoting`)."""
        new = [key[len(tmp) + 1 :] for key, _ in self.store.objects(tmp)]
        manifest_key = self._manifest_key()
        existing = [key for key, _ in self.store.objects(self.prefix)]
        written = [f"{self.prefix}/{rel}" for rel in new]
        kept = {*written, manifest_key}
        old = [key for key in existing if key not in kept]
        if promoting.needs_journal(new, old):
            self.store.put(f"{tmp}/{ownership.MANIFEST}", ownership.manifest_bytes(new))
            backup = f"{self._bak_base()}{tmp[len(self._tmp_base()) :]}"
            journal = promoting.Journal(self.prefix, backup, (*written, manifest_key), tuple(existing))
            promoting.promote_journaled(self.store, self._journal(), tmp, journal)
            return
        self._register(owned, written)
        try:
            for rel in new:
                self.store.copy(f"{tmp}/{rel}", f"{self.prefix}/{rel}")
        except BaseException:
            with contextlib.suppress(OSError):
                if manifest is None:
                    self.store.discard(manifest_key)
                else:
                    self.store.put(manifest_key, manifest)
            raise
        failpoints.hit("sink.during_promote")
        self._register(frozenset(), written)

    def append_tree(self, run_id: str, fill: Callable[[str], None]) -> int:
        import pyarrow.fs as pafs

        self.sweep()
        tmp = self._new_tmp(run_id)
        fs, path = self.store.fs, self.store._fs_path
        try:
            fill(self.store.uri(tmp))
            new = [key[len(tmp) + 1 :] for key, _ in self.store.objects(tmp)]
            self._register(self._owned(), [f"{self.prefix}/{rel}" for rel in new])
            for rel in new:
                final = f"{self.prefix}/{rel}"
                if fs.get_file_info(path(final)).type != pafs.FileType.NotFound:
                    raise PzConnectorError(
                        f"object {self.store.uri(final)} appeared while writing; retry the write",
                        is_transient=True,
                        code="PZ0501",
                    )
                self.store.copy(f"{tmp}/{rel}", final)
            return len(new)
        finally:
            self._discard(tmp)

    def append(self, run_id: str, ext: str, fill: Callable[[str], None]) -> None:
        """Write the new file under a temp prefix, then copy it in under a name no object has. (DuckDB
        completes an object's upload even when its COPY fails midway, so a direct write could leave half
        a file in the output.)"""
        import pyarrow.fs as pafs

        self.sweep()
        stem = f"part-{safe_token(run_id)}-"
        taken = {key.rsplit("/", 1)[-1] for key, _ in self.store.objects(self.prefix)}
        n = 0
        while f"{stem}{n:05d}.{ext}" in taken:
            n += 1
        name = f"{stem}{n:05d}.{ext}"
        tmp = self._new_tmp(run_id)
        fs, path = self.store.fs, self.store._fs_path
        try:
            fill(self.store.uri(f"{tmp}/{name}"))
            final = f"{self.prefix}/{name}"
            if fs.get_file_info(path(final)).type != pafs.FileType.NotFound:
                raise PzConnectorError(
                    f"object {self.store.uri(final)} appeared while writing; retry the write",
                    is_transient=True,
                    code="PZ0501",
                )
            self._register(self._owned(), [final])
            self.store.copy(f"{tmp}/{name}", final)
        finally:
            self._discard(tmp)
