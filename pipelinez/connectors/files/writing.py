"""File sink writes: an output is a folder (or an object prefix) of data files
(`out/orders.parquet/part-00000.parquet`). Where the files go is an `OutputFolder`: localfiles swaps local
folders, the object stores promote a temp prefix (see `objects`).

- replace: the whole result goes into a temp folder/prefix that is promoted only when it is complete.
- append: one new file `part-<run id>-<n>.<ext>` is added to the folder.
- merge: not supported (a folder of files has no keys to upsert on).
A replace with an empty result is refused (PZ0509) and nothing is swapped in, unless `allow_empty: true`.
A replace of a folder holding files pz did not write is refused (PZ0530) unless `foreign_files: replace`;
every write keeps the folder's manifest of pz's files (`ownership`).

Native tier: DuckDB `COPY (SELECT * FROM <staging table>) TO …`. Universal tier: the engine's Arrow stream is
written with pyarrow's Parquet and CSV writers; newline-delimited JSON (pyarrow has no JSON writer) is
written by an in-memory DuckDB `COPY` that consumes the same stream. No rows become Python objects.
JSON has no NaN/Infinity: a result holding them is refused (PZ0519, see `finite`), never written invalid.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pipelinez.connectors.files import finite, ownership
from pipelinez.connectors.files.formats import format_of_path, root_output_problem, safe_token
from pipelinez.connectors.files.store import FileRef
from pipelinez.connectors.sdk import OutputRequest, WriteResult
from pipelinez.connectors.sdk_sql import peek_rows
from pipelinez.core import duck_connect
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident, quote_literal

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

_COPY_OPTIONS = {"parquet": "FORMAT parquet", "csv": "FORMAT csv, HEADER true", "json": "FORMAT json"}
FIRST_PART = "part-00000"
_WIDE_INTS = ("HUGEINT", "UHUGEINT")


class OutputFolder(Protocol):
    """Where an output's files go: a local folder, an object prefix."""

    def describe(self) -> str:
        """How messages name it (a path, `s3://bucket/prefix`)."""
        ...

    def parts(self, ext: str) -> list[tuple[FileRef, int]]:
        """The folder's visible data files named `*.<ext>`, each with its modification time (ns)."""
        ...

    def replace(self, run_id: str, fill: Callable[[str], None]) -> None:
        """Call `fill(location)` to write the result's files into a fresh, empty temp folder (prefix), then
        make that the folder's whole content; on any failure the folder is left as it was."""
        ...

    def append(self, run_id: str, ext: str, fill: Callable[[str], None]) -> None:
        """Call `fill(location)` to write one new file `part-<run>-<n>.<ext>` that appears whole or not
        at all, never overwriting a file."""
        ...

    def append_tree(self, run_id: str, fill: Callable[[str], None]) -> int:
        """Call `fill(location)` to write files into a fresh, empty temp folder, then add each of them to
        the folder under the same relative path (each whole, none overwriting a file); the number added."""
        ...


@dataclass(frozen=True)
class FileOutput:
    """A file output's settings: format, folder, strategy and partitioning."""

    name: str
    fmt: str
    path: str  # the folder, relative to the connector's root/bucket
    strategy: str
    allow_empty: bool
    run_id: str
    connector: str = "localfiles"
    partition_by: tuple[str, ...] = ()  # hive-partitioned: <col>=<value>/ folders
    foreign_ok: bool = False  # foreign_files: replace (a replace may remove files pz did not write)

    @staticmethod
    def of(output: OutputRequest, connector: str = "localfiles") -> FileOutput:
        options: dict[str, Any] = dict(output.options)
        path = options.get("path")
        fmt = str(options.get("format") or (format_of_path(str(path)) if path else None) or "parquet")
        if fmt not in _COPY_OPTIONS:
            raise PzConnectorError(f"format '{fmt}' is not one of parquet, csv, json", code="PZ0303")
        if path is not None:
            problem = root_output_problem(str(path))
            if problem:
                raise PzConnectorError(problem, code="PZ0304")
        rel = str(path).rstrip("/\\") if path else f"{output.name}.{fmt}"
        if output.strategy not in ("replace", "append"):
            raise PzConnectorError(
                f"{connector} cannot '{output.strategy}' (a folder of files has "
                "no keys to upsert on); use strategy replace or append",
                code="PZ0305",
            )
        partition_by = tuple(str(c) for c in options.get("partition_by") or ())
        foreign_ok = options.get("foreign_files") == ownership.FOREIGN_OK
        return FileOutput(
            output.name,
            fmt,
            rel,
            output.strategy,
            output.allow_empty,
            output.run_id,
            connector,
            partition_by,
            foreign_ok,
        )

    def refuse_empty(self, folder: OutputFolder) -> PzConnectorError:
        return PzConnectorError(
            f"the result has no rows, and replace would leave {folder.describe()} empty; "
            "nothing was written (set allow_empty: true to allow it)",
            code="PZ0509",
        )


def latest_part(out: FileOutput, folder: OutputFolder) -> FileRef | None:
    """The newest data file of a parquet output an append adds to, or None (no files, or not an append
    of parquet: CSV and JSON carry no column types to keep)."""
    if out.strategy != "append" or out.fmt != "parquet":
        return None
    parts = folder.parts("parquet")
    return max(parts, key=lambda p: (p[1], p[0].display))[0] if parts else None


def parquet_columns(con: duckdb.DuckDBPyConnection, file: FileRef) -> list[tuple[str, str]]:
    """(name, DuckDB type) of a parquet file's columns, from its footer."""
    rows = con.execute(f"DESCRIBE SELECT * FROM read_parquet({quote_literal(file.location)})").fetchall()
    return [(str(r[0]), str(r[1])) for r in rows]


def check_append_columns(
    con: duckdb.DuckDBPyConnection, out: FileOutput, folder: OutputFolder, names: list[str]
) -> None:
    """An appended parquet file has the columns of the folder's files, so the folder stays readable as one
    table; their types are the engine's narrowing check (`target_columns`)."""
    latest = latest_part(out, folder)
    if latest is None:
        return
    have = [name for name, _ in parquet_columns(con, latest)]
    if [n.lower() for n in have] != [n.lower() for n in names]:
        raise PzConnectorError(
            f"the files in {folder.describe()} have columns ({', '.join(have)}) but the result has "
            f"({', '.join(names)}); a file with other columns would make the folder unreadable as one "
            "table, so nothing was written. Select the same columns in the same order, or write with "
            "strategy replace",
            code="PZ0517",
        )


def _select_list(columns: list[tuple[str, str]], fmt: str) -> str:
    """The COPY's select list. DuckDB's parquet writer stores 128-bit integers as DOUBLE (rounding them);
    they are written as DECIMAL(38,0), as the universal tier's Arrow stream does (a wider value fails
    loudly)."""
    if fmt != "parquet" or not any(kind in _WIDE_INTS for _, kind in columns):
        return "*"
    return ", ".join(
        f"CAST({quote_ident(name)} AS DECIMAL(38,0)) AS {quote_ident(name)}"
        if kind in _WIDE_INTS
        else quote_ident(name)
        for name, kind in columns
    )


def write_native(
    con: duckdb.DuckDBPyConnection, out: FileOutput, folder: OutputFolder, source: str
) -> WriteResult:
    """COPY the staging table `source` into the folder with the output's strategy (`con` can write there:
    for an object store, its extension and secret are set up on `con`'s database). `source` is read once,
    by the COPY, which counts the rows it writes: a pipeline streamed into this write (a view) is computed
    once. An empty replace is refused once its COPY into the temp folder found no row (nothing swapped in);
    an empty append writes no file (`SELECT … LIMIT 1` stops at the first row)."""
    cur = con.cursor()
    try:
        if out.fmt == "json":
            finite.check_staged(cur, source)
        described = cur.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
        columns = [(str(r[0]), str(r[1])) for r in described]
        select = _select_list(columns, out.fmt)
        options = _COPY_OPTIONS[out.fmt]
        written: list[int] = []

        def copy(dest: str) -> None:
            row = cur.execute(
                f"COPY (SELECT {select} FROM {source}) TO {quote_literal(dest)} ({options})"
            ).fetchone()
            written.append(int(row[0]) if row else 0)
            if out.strategy == "replace" and not out.allow_empty and not sum(written):
                raise out.refuse_empty(folder)

        if out.strategy != "replace" and cur.execute(f"SELECT 1 FROM {source} LIMIT 1").fetchone() is None:
            return WriteResult(0, batches_committed=0)
        if out.partition_by:
            options = partition_options(out, [name for name, _ in columns])
            if out.strategy == "replace":
                folder.replace(out.run_id, copy)
                return WriteResult(sum(written))
            files = folder.append_tree(out.run_id, copy)
            return WriteResult(sum(written), batches_committed=files)

        if out.strategy == "replace":
            folder.replace(out.run_id, lambda tmp: copy(f"{tmp}/{FIRST_PART}.{out.fmt}"))
            return WriteResult(sum(written))
        check_append_columns(cur, out, folder, [name for name, _ in columns])
        folder.append(out.run_id, out.fmt, copy)
        return WriteResult(sum(written), batches_committed=1)
    finally:
        cur.close()


class _Counted:
    def __init__(self, first: pa.RecordBatch | None, rest: Iterator[pa.RecordBatch]):
        self.first, self.rest, self.rows = first, rest, 0

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        if self.first is not None:
            self.rows += self.first.num_rows
            yield self.first
        for batch in self.rest:
            self.rows += batch.num_rows
            yield batch


def _write_stream(fmt: str, dest: Path, schema: pa.Schema, batches: _Counted) -> None:
    import pyarrow as pa

    if fmt == "parquet":
        import pyarrow.parquet as pq

        with pq.ParquetWriter(str(dest), schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
    else:  # csv and json: DuckDB's writer, as on the native tier (the same text for every type: lists,
        # structs, uuids, json; pyarrow's CSV writer refused lists with a raw message)
        import duckdb

        refused: list[PzConnectorError] = []

        def guarded() -> Iterator[pa.RecordBatch]:
            try:
                yield from (finite.checked(batches) if fmt == "json" else batches)
            except PzConnectorError as exc:  # DuckDB wraps what its Arrow scan raises: keep the original
                refused.append(exc)
                raise

        stream = pa.RecordBatchReader.from_batches(schema, guarded())
        con = duck_connect.connect()
        try:
            con.register("pz_sink_stream", stream)
            dest_sql = quote_literal(str(dest))
            con.execute(f"COPY (SELECT * FROM pz_sink_stream) TO {dest_sql} ({_COPY_OPTIONS[fmt]})")
        except duckdb.Error:
            if refused:
                raise refused[0] from None
            raise
        finally:
            con.close()


def _write_partitioned_stream(
    out: FileOutput, folder: OutputFolder, schema: pa.Schema, counted: _Counted
) -> WriteResult:
    """A partitioned write of the engine's Arrow stream: an in-memory DuckDB consumes it with the same COPY
    (PARTITION_BY) as the native tier, so both tiers lay the files out alike."""
    import duckdb
    import pyarrow as pa

    options = partition_options(out, list(schema.names))
    if out.strategy == "append" and counted.first is None:
        return WriteResult(0, batches_committed=0)
    refused: list[PzConnectorError] = []

    def guarded() -> Iterator[pa.RecordBatch]:
        try:
            yield from (finite.checked(counted) if out.fmt == "json" else counted)
        except PzConnectorError as exc:  # DuckDB wraps what its Arrow scan raises: keep the original
            refused.append(exc)
            raise

    con = duck_connect.connect()
    try:
        con.register("pz_sink_stream", pa.RecordBatchReader.from_batches(schema, guarded()))

        def copy(dest: str) -> None:
            con.execute(f"COPY (SELECT * FROM pz_sink_stream) TO {quote_literal(dest)} ({options})")

        if out.strategy == "replace":
            folder.replace(out.run_id, copy)
            return WriteResult(counted.rows)
        files = folder.append_tree(out.run_id, copy)
        return WriteResult(counted.rows, batches_committed=files)
    except duckdb.Error:
        if refused:
            raise refused[0] from None
        raise
    finally:
        con.close()


def partition_options(out: FileOutput, names: list[str]) -> str:
    """The COPY options of a partitioned write: format, PARTITION_BY and the file names (`part-<i>` for a
    replace, `part-<run>-<token>-<i>` for an append, so appended files never collide)."""
    if out.fmt == "json":
        raise PzConnectorError("partition_by is available for parquet and csv outputs", code="PZ0304")
    have = {n.lower() for n in names}
    missing = [c for c in out.partition_by if c.lower() not in have]
    if missing:
        raise PzConnectorError(
            f"partition_by names {', '.join(repr(m) for m in missing)}, which the result does not have "
            f"(it has: {', '.join(names)})",
            code="PZ0501",
        )
    if out.strategy == "replace":
        pattern = "part-{i}"
    else:
        pattern = f"part-{safe_token(out.run_id)}-{secrets.token_hex(3)}-{{i}}"
    return (
        f"{_COPY_OPTIONS[out.fmt]}, PARTITION_BY ({', '.join(quote_ident(c) for c in out.partition_by)}), "
        f"FILENAME_PATTERN {quote_literal(pattern)}"
    )


def write_batches(out: FileOutput, folder: OutputFolder, reader: pa.RecordBatchReader) -> WriteResult:
    """Write the engine's Arrow stream into a folder whose locations are local paths (universal tier)."""

    first, rest = peek_rows(reader)
    if first is None and out.strategy == "replace" and not out.allow_empty:
        raise out.refuse_empty(folder)
    counted = _Counted(first, rest)
    if out.partition_by:
        return _write_partitioned_stream(out, folder, reader.schema, counted)
    if out.strategy == "replace":
        folder.replace(
            out.run_id,
            lambda tmp: _write_stream(out.fmt, Path(tmp) / f"{FIRST_PART}.{out.fmt}", reader.schema, counted),
        )
        return WriteResult(counted.rows)
    if first is None:
        return WriteResult(0, batches_committed=0)
    helper = duck_connect.connect()
    try:
        check_append_columns(helper, out, folder, list(reader.schema.names))
    finally:
        helper.close()
    folder.append(
        out.run_id, out.fmt, lambda dest: _write_stream(out.fmt, Path(dest), reader.schema, counted)
    )
    return WriteResult(counted.rows, batches_committed=1)
