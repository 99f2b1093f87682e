"""Where a file-like connector's files live: `FileStore` lists them, `FileRef` names one.

A `FileRef` is one file as the kit needs it: `display` (how messages name it: an absolute path, or
`s3://bucket/key`), `location` (what DuckDB reads: the same with glob characters escaped) and `open_raw`
(its bytes as a stream, for the few things read outside DuckDB: a CSV header row, the JSON nesting scan).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from pipelinez.core.sqlnames import quote_literal

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa


@dataclass(frozen=True)
class FileRef:
    """A file to read: how it is shown, where it is, and how to open it."""

    display: str
    location: str
    opener: Callable[[], pa.NativeFile] = field(compare=False, repr=False)

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


def local_ref(path: object) -> FileRef:
    """A file on the local file system."""
    import os

    from pipelinez.connectors.files.formats import glob_escaped

    text = os.fspath(path)  # type: ignore[call-overload]

    def opener() -> pa.NativeFile:
        import pyarrow as pa

        return pa.OSFile(text, "rb")

    return FileRef(text, glob_escaped(text), opener)


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
