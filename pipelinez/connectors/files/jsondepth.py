"""A nesting-depth scan of JSON files, run before DuckDB reads them.

DuckDB's JSON reader recurses once per nesting level and crashes the whole process (a segfault, no
message) somewhere past ten thousand levels. pz refuses files nested deeper than `MAX_DEPTH` before DuckDB
sees them. The scan never walks bytes in Python: escapes are dropped with `bytes.replace`, everything but
brackets and quotes with `bytes.translate`, string contents by splitting on quotes, and the running depth
is a cumulative sum in Arrow.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from pipelinez.connectors.files.store import FileRef, local_ref
from pipelinez.core.diagnostics import PzConnectorError

MAX_DEPTH = 1000
_CHUNK = 4 << 20
_OPEN, _CLOSE = ord("{"), ord("}")
_BRACKETS = bytes.maketrans(b"[]", b"{}")
_DROP = bytes(b for b in range(256) if b not in b'{}[]"')


def _ref(path: FileRef | Path) -> FileRef:
    return path if isinstance(path, FileRef) else local_ref(path)


def _brackets(path: FileRef | Path) -> Iterator[bytes]:
    """Each chunk of the file as its brackets outside strings only ('{' opens, '}' closes)."""
    in_string = False
    with _ref(path).open_text_source() as f:  # a compressed file is scanned decompressed
        while chunk := f.read(_CHUNK):
            while chunk.endswith(b"\\") and (len(chunk) - len(chunk.rstrip(b"\\"))) % 2:
                more = f.read(1)  # an escape cut by the chunk boundary: take the escaped byte too
                if not more:
                    break
                chunk += more
            if b"\\" in chunk:
                chunk = chunk.replace(b"\\\\", b"").replace(b'\\"', b"")
            kept = chunk.translate(_BRACKETS, _DROP)
            # adjacent quotes border no outside text: dropping them keeps every string's extent
            kept = ((b'"' if in_string else b"") + kept).replace(b'""', b"")
            if b'"' in kept:
                parts = kept.split(b'"')
                in_string = len(parts) % 2 == 0  # a string left open runs into the next chunk
                kept = b"".join(parts[0::2])
            else:
                in_string = False
            yield kept


def _deepest(brackets: bytes, depth: int) -> tuple[int, int]:
    """(deepest level reached, level at the end) of `brackets`, starting at level `depth`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not brackets:
        return depth, depth
    codes = pa.Array.from_buffers(pa.int8(), len(brackets), [None, pa.py_buffer(brackets)])
    steps = pc.subtract(pc.multiply(pc.equal(codes, _OPEN).cast(pa.int32()), 2), 1)
    levels = pc.cumulative_sum(steps, start=depth)
    return max(depth, pc.max(levels).as_py()), levels[-1].as_py()


def too_deep(path: FileRef | Path, limit: int = MAX_DEPTH) -> bool:
    """Whether `path` nests values more than `limit` levels deep (arrays and objects both count)."""
    depth = 0
    for brackets in _brackets(path):
        deepest, depth = _deepest(brackets, depth)
        if deepest > limit:
            return True
        depth = max(0, depth)
    return False


def refuse_too_deep(files: Sequence[FileRef | Path]) -> None:
    """PzConnectorError (PZ0505) naming the first file nested deeper than MAX_DEPTH levels."""
    for path in files:
        try:
            deep = too_deep(path)
        except OSError as exc:
            reason = exc.strerror or exc
            raise PzConnectorError(f"cannot read {_ref(path)}: {reason}", code="PZ0505") from None
        if deep:
            raise PzConnectorError(
                f"{path} nests JSON values more than {MAX_DEPTH} levels deep, which DuckDB cannot read "
                "safely; flatten the file, or store the deep part as a JSON string",
                code="PZ0505",
            )
