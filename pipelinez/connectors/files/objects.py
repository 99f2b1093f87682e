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

An output prefix and its replace and append writes are `ObjectFolder` (`objfolder.py`).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import secrets
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pipelinez.connectors.files.conditional import ConditionalObjects
from pipelinez.connectors.files.formats import glob_escaped, glob_regex, has_glob
from pipelinez.connectors.files.netfail import is_network_failure
from pipelinez.connectors.files.store import FileRef
from pipelinez.connectors.sdk_errors import ObjectStoreError
from pipelinez.core import duck_connect
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
    transient = (
        exc.transient  # the store's own REST calls classify themselves
        if isinstance(exc, ObjectStoreError)
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

    def conditional(self) -> ConditionalObjects:
        """The store's conditional calls (`files.conditional`): what a lease or an atomic state document
        needs. PZ0593 where the store has none."""
        raise PzConnectorError(
            f"{self.describe()} offers no conditional writes (If-None-Match, If-Match): it cannot hold a "
            "lease or an atomic state document; use an s3 or azureblob store",
            code="PZ0593",
        )

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
