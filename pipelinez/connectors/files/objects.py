"""Object stores for file connectors: one bucket or container, read and written natively by DuckDB.

The data plane is DuckDB's: reads are `read_parquet`/`read_csv`/`read_json` of `s3://` or `az://` URIs and
writes are `COPY … TO` them, through the httpfs or azure extension LOADed from the file its PyPI package
ships (no network, no `INSTALL`). Credentials reach DuckDB as a temporary secret scoped to the bucket,
created for one load or write and dropped after it; they never appear in SQL that an error could echo.

The control plane (listing a prefix or a glob, reading a CSV header or a JSON file's nesting, promoting a
finished temp prefix, deleting objects) goes through a pyarrow file system built from the same settings.
The engine owns retries: for S3, httpfs's `http_retries` is set to 0 and pyarrow's S3 client makes one
attempt. DuckDB's azure extension (1.5.5) has no setting for the Azure SDK's own retry policy, so Azure
requests keep the SDK's default retries underneath the engine's.

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
import glob
import hashlib
import os
import secrets
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipelinez.connectors.files import ownership, promoting
from pipelinez.connectors.files.formats import glob_escaped, glob_regex, has_glob, safe_token
from pipelinez.connectors.files.netfail import is_network_failure
from pipelinez.connectors.files.store import FileRef
from pipelinez.core import duck_connect, failpoints
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident, quote_literal

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa
    import pyarrow.fs as pafs


def extension_path(package: str, extension: str) -> str:
    """The `<extension>.duckdb_extension` file the PyPI package `package` ships for this DuckDB."""
    import importlib

    import duckdb

    try:
        module = importlib.import_module(package)
    except ImportError as exc:
        raise PzConnectorError(
            f"the Python package {package} (DuckDB's {extension} extension) is not installed; "
            "reinstall pipelinez",
            code="PZ0505",
        ) from exc
    folder = os.path.join(os.path.dirname(str(module.__file__)), "extensions")
    wanted = os.path.join(folder, f"v{duckdb.__version__}", f"{extension}.duckdb_extension")
    if os.path.isfile(wanted):
        return wanted
    found = sorted(glob.glob(os.path.join(folder, "*", f"{extension}.duckdb_extension")))
    if not found:
        raise PzConnectorError(
            f"the {package} package ships no {extension} extension file; reinstall pipelinez", code="PZ0505"
        )
    return found[-1]


# pyarrow's S3 client names its error kinds: these are the network and throttling ones (transient)
_TRANSIENT_AWS = (
    "AWS Error NETWORK_CONNECTION",
    "AWS Error SLOW_DOWN",
    "AWS Error THROTTLING",
    "AWS Error SERVICE_UNAVAILABLE",
    "AWS Error REQUEST_TIMEOUT",
)


def io_error(exc: BaseException, code: str, prefix: str = "") -> PzConnectorError:
    """A pyarrow file-system error as a PzConnectorError: transient for the S3 client's network and
    throttling errors and the network words of the Azure SDK's client (`netfail`: "Error while reading
    from network socket", "Failure when receiving data from the peer", ...), else by the closed list."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    whole = " ".join(str(exc).split())
    said = getattr(exc, "transient", None)  # the store's own REST calls classify themselves
    transient = (
        bool(said)
        if isinstance(said, bool)
        else any(kind in text for kind in _TRANSIENT_AWS) or is_network_failure(whole)
    )
    return PzConnectorError(f"{prefix}{text}", is_transient=transient, code=code)


class ObjectStore(ABC):
    """One bucket/container. Subclasses say how to reach it: `scheme`, the extension, the DuckDB secret
    and the pyarrow file system."""

    scheme: str = ""  # URI scheme DuckDB reads: s3, az
    kind: str = "bucket"  # what the root is called: bucket, container
    extension: tuple[str, str] = ("", "")  # (PyPI package, extension name)
    settings: tuple[str, ...] = ()  # SET statements of every session (retries off)

    def __init__(self, root: str):
        self.root = root
        self._fs: pafs.FileSystem | None = None

    # -- what subclasses provide ---------------------------------------------------------------
    @abstractmethod
    def identity(self) -> tuple[str, ...]:
        """What tells two stores apart (endpoint, account), never a secret."""
        ...

    @abstractmethod
    def secret_options(self) -> str:
        """The body of the DuckDB secret (`TYPE s3, KEY_ID '…', …`) without its SCOPE."""
        ...

    @abstractmethod
    def make_filesystem(self) -> pafs.FileSystem: ...

    # -- names ---------------------------------------------------------------------------------
    def uri(self, key: str) -> str:
        return f"{self.scheme}://{self.root}/{key}"

    def describe(self) -> str:
        return f"{self.scheme}://{self.root}"

    @property
    def fs(self) -> pafs.FileSystem:
        if self._fs is None:
            self._fs = self.make_filesystem()
        return self._fs

    def _fs_path(self, key: str) -> str:
        return f"{self.root}/{key}" if key else self.root

    def ref(self, name: str) -> FileRef:
        fs, path = self.fs, self._fs_path(name)

        def opener() -> pa.NativeFile:
            # the bytes as stored: pyarrow would otherwise decompress by the name's suffix itself, and
            # FileRef.open_text_source decompresses them a second time
            return fs.open_input_stream(path, compression=None)

        uri = self.uri(name)
        return FileRef(uri, glob_escaped(uri), opener)

    # -- listing -------------------------------------------------------------------------------
    def objects(self, prefix: str) -> list[tuple[str, int]]:
        """(key, mtime ns) of every object under `prefix` (a folder-like prefix, recursive)."""
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self._fs_path(prefix.strip("/")), recursive=True, allow_not_found=True)
        found = []
        for info in self.fs.get_file_info(selector):
            if info.type == pafs.FileType.File:
                key = info.path[len(self.root) + 1 :]
                mtime = info.mtime_ns or 0
                found.append((key, int(mtime)))
        return found

    def list(self, path: str) -> list[str]:
        """Keys `path` selects: one object, every object under a prefix, or a glob's matches; hidden
        segments (starting with '.') below the listed prefix never match."""
        import pyarrow.fs as pafs

        pattern = path.strip("/")
        if has_glob(pattern):
            segments = pattern.split("/")
            first = next(i for i, seg in enumerate(segments) if has_glob(seg))
            base = "/".join(segments[:first])
            regex = glob_regex(pattern)
            keys = [k for k, _ in self.objects(base) if regex.match(k)]
        else:
            base = pattern
            keys = []
            if pattern:
                info = self.fs.get_file_info(self._fs_path(pattern))
                if info.type == pafs.FileType.File:
                    return [pattern]
            keys = [k for k, _ in self.objects(pattern)]
        return sorted(k for k in keys if not _hidden(k, base))

    def copy(self, source: str, dest: str) -> None:
        """Copy the object `source` to `dest` (keys) inside the store: `dest` is replaced in one step (a
        reader sees the old object or the new one, never part of it)."""
        self.fs.copy_file(self._fs_path(source), self._fs_path(dest))

    def delete(self, key: str) -> None:
        """Delete the object `key`."""
        self.fs.delete_file(self._fs_path(key))

    def remove(self, prefix: str) -> None:
        """Delete a prefix (or object) and every object under it, directory markers included; gone already
        is fine."""
        import pyarrow.fs as pafs

        path = self._fs_path(prefix.strip("/"))
        info = self.fs.get_file_info(path)
        if info.type == pafs.FileType.File:
            self.fs.delete_file(path)
        elif info.type == pafs.FileType.Directory:
            self.fs.delete_dir(path)

    def discard(self, key: str) -> None:
        """Delete the object `key`; gone already is fine."""
        with contextlib.suppress(FileNotFoundError):
            self.delete(key)

    def put(self, key: str, data: bytes) -> None:
        """Write the small object `key` (one request: readers see all of it or none)."""
        with self.fs.open_output_stream(self._fs_path(key)) as stream:
            stream.write(data)

    def get(self, key: str) -> bytes | None:
        """The bytes of the small object `key`, None when there is none."""
        import pyarrow.fs as pafs

        path = self._fs_path(key)
        if self.fs.get_file_info(path).type != pafs.FileType.File:
            return None
        with self.fs.open_input_stream(path) as stream:
            return bytes(stream.read())

    def abort_uploads(self, prefix: str) -> None:
        """Abort the incomplete multipart uploads whose keys start with `prefix` (a killed or failed write
        leaves them behind, invisible but stored). Nothing to do where the store has none to abort."""
        return None

    def exists(self) -> bool:
        import pyarrow.fs as pafs

        return bool(self.fs.get_file_info(self.root).type == pafs.FileType.Directory)

    def missing(self) -> PzConnectorError | None:
        """PZ0531 when the bucket/container does not exist (asked after a read or write failed or found
        nothing); None when it exists or the store cannot tell (the original error stands)."""
        try:
            if self.exists():
                return None
        except Exception:
            return None
        return PzConnectorError(
            f"{self.kind} '{self.root}' does not exist at {self.where()}: create it, or fix the connection's "
            f"{self.kind} (and where it points) in the source or sink file; pz never creates one",
            code="PZ0531",
        )

    def where(self) -> str:
        """Where the store is, for messages (an endpoint, an account; never a secret)."""
        return " ".join(self.identity())

    # -- DuckDB --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def session(self, con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor of `con`'s database that reads and writes this store: the extension loaded, a
        temporary secret scoped to the bucket (dropped after the block), no retries inside DuckDB."""
        options = self.secret_options()
        with _claimed(self.describe(), hashlib.sha256(options.encode()).hexdigest()):
            cur = con.cursor()
            name = f"__pz_{self.scheme}_{secrets.token_hex(6)}"
            try:
                self.install(cur, name)
                yield cur
            finally:
                with contextlib.suppress(Exception):
                    cur.execute(f"DROP TEMPORARY SECRET IF EXISTS {quote_ident(name)}")
                cur.close()

    def install(
        self, cur: duckdb.DuckDBPyConnection, name: str, scope: str | None = None, *, replace: bool = False
    ) -> None:
        """Make `cur`'s database read and write this store: the extension LOADed from its PyPI package, the
        session settings (no retries inside DuckDB), and a temporary secret `name` (kept in memory, never
        in a database file) scoped to `scope` (default: the bucket; DuckDB picks the secret with the longest
        matching scope). PzConnectorError when DuckDB refuses the secret: the statement holds the
        credentials, so it is never echoed."""
        import duckdb

        cur.execute(f"LOAD {quote_literal(extension_path(*self.extension))}")
        for statement in self.settings:
            cur.execute(statement)
        verb = "CREATE OR REPLACE TEMPORARY SECRET" if replace else "CREATE TEMPORARY SECRET"
        try:
            cur.execute(
                f"{verb} {quote_ident(name)} "
                f"({self.secret_options()}, SCOPE {quote_literal(scope or self.describe())})"
            )
        except duckdb.Error as exc:
            raise PzConnectorError(
                f"DuckDB refused the credentials' settings for {self.describe()} ({type(exc).__name__}); "
                "check the connection keys",
                code="PZ0505",
            ) from None

    def connect(self) -> duckdb.DuckDBPyConnection:
        """A private in-memory DuckDB able to read the store (secret kept for the connection's life)."""
        import duckdb

        con = duck_connect.connect()
        try:
            self.install(con, "__pz_store")
        except (duckdb.Error, PzConnectorError) as exc:
            con.close()
            if isinstance(exc, PzConnectorError):
                raise
            raise PzConnectorError(
                f"DuckDB cannot load the {self.scheme} extension for {self.describe()} "
                f"({type(exc).__name__})",
                code="PZ0505",
            ) from None
        return con


# A DuckDB secret belongs to the database, and DuckDB picks a path's secret by its scope. Two sessions with
# the same scope (bucket) but other settings (another endpoint, other credentials) must not overlap, or one
# could read or write through the other's endpoint: a session waits while the scope is held by different
# settings. Sessions with the same settings share it.
_scope_change = threading.Condition()
_scope_holders: dict[str, tuple[str, int]] = {}  # scope -> (settings digest, sessions holding it)


@contextlib.contextmanager
def _claimed(scope: str, digest: str) -> Iterator[None]:
    with _scope_change:
        while scope in _scope_holders and _scope_holders[scope][0] != digest:
            _scope_change.wait()
        _scope_holders[scope] = (digest, _scope_holders.get(scope, (digest, 0))[1] + 1)
    try:
        yield
    finally:
        with _scope_change:
            held, count = _scope_holders[scope]
            if count == 1:
                del _scope_holders[scope]
            else:
                _scope_holders[scope] = (held, count - 1)
            _scope_change.notify_all()


def _hidden(key: str, base: str) -> bool:
    rest = key[len(base) :].lstrip("/") if base and key.startswith(base) else key
    return any(seg.startswith(".") for seg in rest.split("/"))


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
                if getattr(exc, "transient", True):
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
