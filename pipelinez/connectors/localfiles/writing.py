"""localfiles sink writes: an output is a folder of data files (`out/orders.parquet/part-00000.parquet`).

- replace: the whole result goes into a temp folder that is swapped in atomically (see `folders`).
- append: one new file `part-<run id>-<n>.<ext>` is added to the folder.
- merge: not supported (a folder of files has no keys to upsert on).
A replace with an empty result is refused (PZ0509) before anything is written, unless `allow_empty: true`.

Native tier: DuckDB `COPY (SELECT * FROM <staging table>) TO …`. Universal tier: the engine's Arrow stream is
written with pyarrow's Parquet and CSV writers; newline-delimited JSON (pyarrow has no JSON writer) is
written by an in-memory DuckDB `COPY` that consumes the same stream. No rows become Python objects.
JSON has no NaN/Infinity: a result holding them is refused (PZ0519, see `finite`), never written invalid.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.localfiles import finite
from pipelinez.connectors.localfiles.folders import append_file, replace_folder
from pipelinez.connectors.localfiles.paths import format_of_path, under_root
from pipelinez.connectors.sdk import OutputRequest, WriteResult
from pipelinez.connectors.sdk_sql import peek_rows
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident, quote_literal

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

_COPY_OPTIONS = {"parquet": "FORMAT parquet", "csv": "FORMAT csv, HEADER true", "json": "FORMAT json"}
FIRST_PART = "part-00000"
_WIDE_INTS = ("HUGEINT", "UHUGEINT")


@dataclass(frozen=True)
class FileOutput:
    name: str
    fmt: str
    folder: Path
    strategy: str
    allow_empty: bool
    run_id: str

    @staticmethod
    def of(root: Path, output: OutputRequest) -> FileOutput:
        options: dict[str, Any] = dict(output.options)
        path = options.get("path")
        fmt = str(options.get("format") or (format_of_path(str(path)) if path else None) or "parquet")
        if fmt not in _COPY_OPTIONS:
            raise PzConnectorError(f"format '{fmt}' is not one of parquet, csv, json", code="PZ0303")
        rel = str(path).rstrip("/\\") if path else f"{output.name}.{fmt}"
        if output.strategy not in ("replace", "append"):
            raise PzConnectorError(
                f"localfiles cannot '{output.strategy}' (a folder of files has "
                "no keys to upsert on); use strategy replace or append",
                code="PZ0305",
            )
        return FileOutput(
            output.name, fmt, under_root(root, rel), output.strategy, output.allow_empty, output.run_id
        )

    def refuse_empty(self) -> PzConnectorError:
        return PzConnectorError(
            f"the result has no rows, and replace would leave {self.folder} empty; "
            "nothing was written (set allow_empty: true to allow it)",
            code="PZ0509",
        )


def latest_part(out: FileOutput) -> Path | None:
    """The newest data file of a parquet output an append adds to, or None (no files, or not an append
    of parquet: CSV and JSON carry no column types to keep)."""
    if out.strategy != "append" or out.fmt != "parquet" or not out.folder.is_dir():
        return None
    parts = [p for p in out.folder.glob("*.parquet") if p.is_file() and not p.name.startswith(".")]
    return max(parts, key=lambda p: (p.stat().st_mtime_ns, p.name)) if parts else None


def parquet_columns(path: Path) -> list[tuple[str, str]]:
    """(name, DuckDB type) of a parquet file's columns, from its footer."""
    import duckdb

    con = duckdb.connect()
    try:
        rows = con.execute(f"DESCRIBE SELECT * FROM read_parquet({quote_literal(str(path))})").fetchall()
    finally:
        con.close()
    return [(str(r[0]), str(r[1])) for r in rows]


def check_append_columns(out: FileOutput, names: list[str]) -> None:
    """An appended parquet file has the columns of the folder's files, so the folder stays readable as one
    table; their types are the engine's narrowing check (`target_columns`)."""
    latest = latest_part(out)
    if latest is None:
        return
    have = [name for name, _ in parquet_columns(latest)]
    if [n.lower() for n in have] != [n.lower() for n in names]:
        raise PzConnectorError(
            f"the files in {out.folder} have columns ({', '.join(have)}) but the result has "
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


def write_native(con: duckdb.DuckDBPyConnection, out: FileOutput, source: str) -> WriteResult:
    cur = con.cursor()
    try:
        row = cur.execute(f"SELECT count(*) FROM {source}").fetchone()
        rows = int(row[0]) if row else 0
        if rows == 0 and out.strategy == "replace" and not out.allow_empty:
            raise out.refuse_empty()
        if out.fmt == "json":
            finite.check_staged(cur, source)

        described = cur.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
        columns = [(str(r[0]), str(r[1])) for r in described]
        select = _select_list(columns, out.fmt)
        options = _COPY_OPTIONS[out.fmt]

        def copy(dest: Path) -> None:
            cur.execute(f"COPY (SELECT {select} FROM {source}) TO {quote_literal(str(dest))} ({options})")

        if out.strategy == "replace":
            replace_folder(out.folder, out.run_id, lambda tmp: copy(tmp / f"{FIRST_PART}.{out.fmt}"))
            return WriteResult(rows)
        if rows == 0:
            return WriteResult(0, batches_committed=0)
        check_append_columns(out, [name for name, _ in columns])
        append_file(out.folder, out.run_id, out.fmt, copy)
        return WriteResult(rows, batches_committed=1)
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
    elif fmt == "csv":
        import pyarrow.csv as pacsv

        options = pacsv.WriteOptions(include_header=True, quoting_style="needed")
        with pacsv.CSVWriter(str(dest), schema, write_options=options) as writer:
            for batch in batches:
                writer.write_batch(batch)
    else:
        import duckdb

        refused: list[PzConnectorError] = []

        def guarded() -> Iterator[pa.RecordBatch]:
            try:
                yield from finite.checked(batches)
            except PzConnectorError as exc:  # DuckDB wraps what its Arrow scan raises: keep the original
                refused.append(exc)
                raise

        stream = pa.RecordBatchReader.from_batches(schema, guarded())
        con = duckdb.connect()
        try:
            con.register("pz_sink_stream", stream)
            con.execute(f"COPY (SELECT * FROM pz_sink_stream) TO {quote_literal(str(dest))} (FORMAT json)")
        except duckdb.Error:
            if refused:
                raise refused[0] from None
            raise
        finally:
            con.close()


def write_batches(out: FileOutput, reader: pa.RecordBatchReader) -> WriteResult:
    first, rest = peek_rows(reader)
    if first is None and out.strategy == "replace" and not out.allow_empty:
        raise out.refuse_empty()
    counted = _Counted(first, rest)
    if out.strategy == "replace":
        replace_folder(
            out.folder,
            out.run_id,
            lambda tmp: _write_stream(out.fmt, tmp / f"{FIRST_PART}.{out.fmt}", reader.schema, counted),
        )
        return WriteResult(counted.rows)
    if first is None:
        return WriteResult(0, batches_committed=0)
    check_append_columns(out, list(reader.schema.names))
    append_file(
        out.folder, out.run_id, out.fmt, lambda dest: _write_stream(out.fmt, dest, reader.schema, counted)
    )
    return WriteResult(counted.rows, batches_committed=1)
