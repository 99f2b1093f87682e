"""What a file dataset reads: its files, partitions, schema and the native SELECT of one partition.

Parquet and JSON are native-only (DuckDB `read_parquet`, `read_json`); CSV is both (see `csvformat`).
The schema a dataset lands is decided once per dataset and used for every partition: the `columns:`
contract (exact types, contract order), else what DuckDB reads from the files (parquet: the union of all
files' columns, by name; json: keys and types sampled from the files; csv: the first file's header, sniffed).
Parquet files are matched by column name; a schema column that no file of one read has is an error (a
parquet file that lacks it while another file of the same read has it reads as NULL). JSON keys missing from
a record are NULL, as JSON usually omits nulls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.files import csvformat, jsonread
from pipelinez.connectors.files.csvformat import CsvDialect, ReadSchema
from pipelinez.connectors.files.formats import format_of_path
from pipelinez.connectors.files.jsondepth import refuse_too_deep
from pipelinez.connectors.files.store import FileRef, FileStore, file_list
from pipelinez.connectors.sdk import DatasetRequest, Partition
from pipelinez.connectors.sdk_sql import canonical_contract
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident

if TYPE_CHECKING:
    import duckdb

# How a read asks for a DuckDB connection, only when it needs one: a schema the contract decides and a CSV or
# JSON select are built without DuckDB (a caller can skip opening an instance: ~15 ms each).
Connect = Callable[[], "duckdb.DuckDBPyConnection"]


@dataclass(frozen=True)
class FileDataset:
    name: str
    fmt: str
    store: FileStore
    path: str
    files_per_partition: int | None
    dialect: CsvDialect
    contract: tuple[tuple[str, str], ...] | None
    hive: bool = False  # `key=value` folders add columns (hive_partitioning: true)

    @staticmethod
    def of(store: FileStore, request: DatasetRequest) -> FileDataset:
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
            store,
            path,
            int(per) if per else None,
            CsvDialect.of(options),
            tuple(contract) if contract else None,
            bool(options.get("hive_partitioning", False)),
        )

    def files(self) -> list[str]:
        return self.store.list(self.path)

    def require_files(self) -> list[str]:
        files = self.files()
        if not files:
            raise PzConnectorError(
                f"no file matches '{self.path}' under {self.store.describe()}", code="PZ0505"
            )
        return files

    def absolute(self, files: Sequence[str]) -> list[FileRef]:
        return [self.store.ref(f) for f in files]

    def partitions(self) -> list[Partition]:
        files = self.require_files()
        size = self.files_per_partition or len(files)
        chunks = [files[i : i + size] for i in range(0, len(files), size)]
        return [
            Partition(i, _describe(chunk, i * size, len(files)), {"files": chunk})
            for i, chunk in enumerate(chunks)
        ]

    def partition_files(self, partition: Partition) -> list[FileRef]:
        files = partition.spec.get("files")
        if not files:
            files = self.require_files()
        return self.absolute([str(f) for f in files])


def _describe(chunk: Sequence[str], start: int, total: int) -> str:
    if len(chunk) == 1:
        return f"file {start + 1} of {total}: {chunk[0]}"
    return f"files {start + 1}-{start + len(chunk)} of {total}: {chunk[0]} … {chunk[-1]}"


def _describe_columns(con: duckdb.DuckDBPyConnection, select: str) -> list[tuple[str, str]]:
    return [(str(r[0]), str(r[1])) for r in con.execute(f"DESCRIBE {select}").fetchall()]


def hive_keys(file: FileRef) -> list[str]:
    """The partition columns a file's `key=value` folders name (as DuckDB's hive_partitioning reads them)."""
    folders = file.display.replace("\\", "/").split("/")[:-1]
    return [seg.split("=", 1)[0] for seg in folders if "=" in seg and not seg.startswith("=")]


def _hive_arg(ds: FileDataset) -> str:
    return ", hive_partitioning=true" if ds.hive else ""


def resolve_schema(connect: Connect, ds: FileDataset, files: Sequence[FileRef]) -> ReadSchema:
    """The schema every read of the dataset lands, from the contract or from `files` (all of them). With
    hive_partitioning, the partition columns follow the files' columns (as DuckDB orders them) unless the
    contract places them. `connect` is called only when the files are looked at (no contract)."""
    if ds.fmt == "csv":
        if ds.contract:
            return csvformat.contract_schema(ds.contract, ds.dialect)
        con = connect()
        schema = csvformat.resolve_schema(con, files[0], ds.dialect, None)
        if ds.hive:
            scan = (
                f"read_csv({file_list(files[:1])}, {ds.dialect.duckdb_args()}, auto_detect=false, "
                f"columns={jsonread.struct_literal(schema.columns)}, hive_partitioning=true)"
            )
            extra = _describe_columns(con, f"SELECT * FROM {scan}")[len(schema.columns) :]
            schema = ReadSchema((*schema.columns, *extra), schema.dateformat, schema.timestampformat)
        return schema
    if ds.fmt == "json":
        refuse_too_deep(files)  # before DuckDB parses them: past ~10,000 levels it crashes the process
    if ds.contract:
        return ReadSchema(ds.contract)
    if ds.fmt == "parquet":
        scan = f"read_parquet({file_list(files)}, union_by_name=true{_hive_arg(ds)})"
        return ReadSchema(tuple(_describe_columns(connect(), f"SELECT * FROM {scan}")))
    return ReadSchema(jsonread.infer_columns(connect(), files, hive=ds.hive))


def native_select(connect: Connect, ds: FileDataset, schema: ReadSchema, files: Sequence[FileRef]) -> str:
    """The SELECT that reads `files` as exactly the schema's columns, in order, with its types. `connect` is
    called for parquet only (its files' columns are looked up)."""
    hive = hive_keys(files[0]) if ds.hive else []
    if ds.fmt == "csv":
        return csvformat.native_select(files, ds.dialect, schema, hive)
    if ds.fmt == "json":
        return jsonread.select(files, schema.columns, hive)
    scan = f"read_parquet({file_list(files)}, union_by_name=true{_hive_arg(ds)})"
    present = {name for name, _ in _describe_columns(connect(), f"SELECT * FROM {scan}")}
    missing = [name for name, _ in schema.columns if name not in present]
    if missing:
        raise PzConnectorError(
            f"column(s) {', '.join(repr(m) for m in missing)} of the dataset's schema are in none of "
            f"{len(files)} parquet file(s) ({files[0]} …); they have: {', '.join(sorted(present))}",
            code="PZ0505",
        )
    cols = ", ".join(f"CAST({quote_ident(n)} AS {t}) AS {quote_ident(n)}" for n, t in schema.columns)
    return f"SELECT {cols} FROM {scan}"
