"""Where a file-like connector's files live: `FileStore` lists them, `FileRef` names one.

A `FileRef` is one file as the kit needs it: `display` (how messages name it: an absolute path, or
`s3://bucket/key`), `location` (what DuckDB reads: the same with glob characters escaped) and `open_raw`
(its bytes as a stream, for the few things read outside DuckDB: a CSV header row, the JSON nesting scan).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Protocol

from pipelinez.core.sqlnames import quote_literal

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa


# the names pyarrow's `Codec.detect` decompresses (its test is exactly these endings, case-sensitive)
_CODEC_SUFFIXES = (".bz2", ".gz", ".lz4", ".zst")


@dataclass(frozen=True)
class FileRef:
    """A file to read: how it is shown, where it is, and how to open it."""

    display: str
    location: str
    opener: Callable[[], pa.NativeFile] = field(compare=False, repr=False)
    local: str | None = field(default=None, compare=False, repr=False)  # its path, for a local file

    def __str__(self) -> str:
        return self.display

    def open_raw(self) -> pa.NativeFile:
        """The file's bytes as stored (compressed files stay compressed)."""
        return self.opener()

    def open_text_source(self) -> pa.NativeFile:
        """The file's bytes, decompressed when its name says it is compressed (`.gz`, `.zst`, …)."""
        import pyarrow as pa

        try:
            codec = pa.Codec.detect(self.display)
        except (TypeError, ValueError, pa.ArrowException):  # no compression suffix
            codec = None
        raw = self.opener()
        if codec is None:
            return raw
        return pa.CompressedInputStream(raw, codec.name)

    def open_start(self) -> IO[bytes] | pa.NativeFile:
        """`open_text_source` for a short read from the file's start (a CSV header row): a local file that
        is not compressed is opened by Python itself, so a native CSV read imports no pyarrow (~40 ms)."""
        if self.local is not None and not self.display.endswith(_CODEC_SUFFIXES):
            return open(self.local, "rb")  # the caller closes it, as it closes open_text_source's
        return self.open_text_source()


def local_ref(path: object) -> FileRef:
    """A file on the local file system."""
    import os

    from pipelinez.connectors.files.formats import glob_escaped

    text = os.fspath(path)  # type: ignore[call-overload]

    def opener() -> pa.NativeFile:
        import pyarrow as pa

        return pa.OSFile(text, "rb")

    return FileRef(text, glob_escaped(text), opener, text)


def file_list(files: Sequence[FileRef]) -> str:
    """A DuckDB list literal of the files' locations."""
    return "[" + ", ".join(quote_literal(f.location) for f in files) + "]"


class FileStore(Protocol):
    """A place holding a connector's files: a root folder, a bucket, a container."""

    def describe(self) -> str:
        """How messages name the place (`root /data`, `bucket s3://lake`); never a secret."""
        ...

    def list(self, path: str) -> list[str]:
        """Names of the files `path` selects (a file, a folder or prefix, a glob), relative to the place,
        sorted; empty when none. Hidden names (a segment starting with '.') never match."""
        ...

    def ref(self, name: str) -> FileRef: ...

    def connect(self) -> duckdb.DuckDBPyConnection:
        """A private in-memory DuckDB connection able to read the store's files."""
        ...
