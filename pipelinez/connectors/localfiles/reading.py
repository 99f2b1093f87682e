"""What a localfiles dataset reads: its files, partitions, schema and the native SELECT of one partition.

Parquet and JSON are native-only (DuckDB `read_parquet`, `read_json`); CSV is both (see `csvformat`).
The schema a dataset lands is decided once per dataset and used for every partition: the `columns:`
contract (exact types, contract order), else what DuckDB reads from the files (parquet: the union of all
files' columns, by name; json: keys and types sampled from the files; csv: the first file's header, sniffed).
Parquet files are matched by column name; a schema column that no file of one read has is an error (a
parquet file that lacks it while another file of the same read has it reads as NULL). JSON keys missing from
a record are NULL, as JSON usually omits nulls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.localfiles import csvformat
from pipelinez.connectors.localfiles.csvformat import CsvDialect, ReadSchema
from pipelinez.connectors.localfiles.jsondepth import refuse_too_deep
from pipelinez.connectors.localfiles.paths import duckdb_path, format_of_path, list_files, under_root
from pipelinez.connectors.sdk import DatasetRequest, Partition
from pipelinez.connectors.sdk_sql import canonical_contract
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident, quote_literal

if TYPE_CHECKING:
    import duckdb

INFER_DEPTH = 16  # levels of nesting typed as STRUCT/LIST when inferring; deeper values are JSON
INFER_SAMPLE = 20480  # records sampled per file when inferring (DuckDB's default, pinned)


@dataclass(frozen=True)
class FileDataset:
    name: str
    fmt: str
    root: Path
    path: str
    files_per_partition: int | None
    dialect: CsvDialect
    contract: tuple[tuple[str, str], ...] | None

    @staticmethod
    def of(root: Path, request: DatasetRequest) -> FileDataset:
        options: Mapping[str, Any] = request.options
        path = str(options.get("path", ""))
        fmt = str(options.get("format") or format_of_path(path) or "")
        if fmt not in ("csv", "parquet", "json"):
            raise PzConnectorError(
                f"cannot tell the format of '{path}'; set format: csv, parquet or json",
                code="PZ0505",
            )
        columns = request.columns
        if columns is None and isinstance(options.get("columns"), Mapping):
            columns = {str(k): str(v) for k, v in options["columns"].items()}
        contract = canonical_contract(columns)
        per = options.get("files_per_partition")
        return FileDataset(
            request.name,
            fmt,
            root,
            path,
            int(per) if per else None,
            CsvDialect.of(options),
            tuple(contract) if contract else None,
        )

    def files(self) -> list[str]:
        return list_files(self.root, self.path)

    def require_files(self) -> list[str]:
        files = self.files()
        if not files:
            raise PzConnectorError(f"no file matches '{self.path}' under root {self.root}", code="PZ0505")
        return files

    def absolute(self, files: Sequence[str]) -> list[Path]:
        return [under_root(self.root, f) for f in files]

    def partitions(self) -> list[Partition]:
        files = self.require_files()
        size = self.files_per_partition or len(files)
        chunks = [files[i : i + size] for i in range(0, len(files), size)]
        return [
            Partition(i, _describe(chunk, i * size, len(files)), {"files": chunk})
            for i, chunk in enumerate(chunks)
        ]

    def partition_files(self, partition: Partition) -> list[Path]:
        files = partition.spec.get("files")
        if not files:
            files = self.require_files()
        return self.absolute([str(f) for f in files])


def _describe(chunk: Sequence[str], start: int, total: int) -> str:
    if len(chunk) == 1:
        return f"file {start + 1} of {total}: {chunk[0]}"
    return f"files {start + 1}-{start + len(chunk)} of {total}: {chunk[0]} … {chunk[-1]}"


def _file_list(files: Sequence[Path]) -> str:
    return "[" + ", ".join(quote_literal(duckdb_path(f)) for f in files) + "]"


def _struct(pairs: Sequence[tuple[str, str]]) -> str:
    return "{" + ", ".join(f"{quote_literal(n)}: {quote_literal(t)}" for n, t in pairs) + "}"


def _describe_columns(con: duckdb.DuckDBPyConnection, select: str) -> list[tuple[str, str]]:
    return [(str(r[0]), str(r[1])) for r in con.execute(f"DESCRIBE {select}").fetchall()]


def resolve_schema(con: duckdb.DuckDBPyConnection, ds: FileDataset, files: Sequence[Path]) -> ReadSchema:
    """The schema every read of the dataset lands, from the contract or from `files` (all of them)."""
    if ds.fmt == "csv":
        return csvformat.resolve_schema(con, files[0], ds.dialect, ds.contract)
    if ds.fmt == "json":
        refuse_too_deep(files)  # before DuckDB parses them: past ~10,000 levels it crashes the process
    if ds.contract:
        return ReadSchema(ds.contract)
    if ds.fmt == "parquet":
        return ReadSchema(
            tuple(
                _describe_columns(con, f"SELECT * FROM read_parquet({_file_list(files)}, union_by_name=true)")
            )
        )
    return _infer_json(con, files)


def _infer_json(con: duckdb.DuckDBPyConnection, files: Sequence[Path]) -> ReadSchema:
    """Keys and types sampled from the files, bounded: nesting below INFER_DEPTH levels stays JSON."""
    import duckdb

    scan = f"read_json({_file_list(files)}, maximum_depth={INFER_DEPTH}, sample_size={INFER_SAMPLE})"
    try:
        return ReadSchema(tuple(_describe_columns(con, f"SELECT * FROM {scan}")))
    except duckdb.Error as exc:
        raise PzConnectorError(
            f"cannot infer the columns of {files[0]}{' …' if len(files) > 1 else ''}: "
            f"{str(exc).splitlines()[0]}; declare columns: for the dataset",
            code="PZ0505",
        ) from None


def native_select(
    con: duckdb.DuckDBPyConnection, ds: FileDataset, schema: ReadSchema, files: Sequence[Path]
) -> str:
    """The SELECT that reads `files` as exactly the schema's columns, in order, with its types."""
    if ds.fmt == "csv":
        return csvformat.native_select(files, ds.dialect, schema)
    if ds.fmt == "json":
        return (
            f"SELECT * FROM read_json({_file_list(files)}, auto_detect=false, format='auto', "
            f"columns={_struct(schema.columns)})"
        )
    scan = f"read_parquet({_file_list(files)}, union_by_name=true)"
    present = {name for name, _ in _describe_columns(con, f"SELECT * FROM {scan}")}
    missing = [name for name, _ in schema.columns if name not in present]
    if missing:
        raise PzConnectorError(
            f"column(s) {', '.join(repr(m) for m in missing)} of the dataset's schema are in none of "
            f"{len(files)} parquet file(s) ({files[0]} …); they have: {', '.join(sorted(present))}",
            code="PZ0505",
        )
    cols = ", ".join(f"CAST({quote_ident(n)} AS {t}) AS {quote_ident(n)}" for n, t in schema.columns)
    return f"SELECT {cols} FROM {scan}"
