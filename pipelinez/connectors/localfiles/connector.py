"""The `localfiles` connector: CSV, Parquet and JSON files under a root folder, as sources and sinks.

Source: `format` csv (native `read_csv` and universal pyarrow streams, same result), parquet and json
(native-only: PZ0312 when the universal tier is forced). `path` is a file, a folder or a glob under `root`;
matching files are read in sorted order, `files_per_partition: N` splits them into resumable partitions.
Sink: an output is a folder of data files; replace swaps a temp folder in atomically, append adds one file.
See `reading`, `csvformat`, `writing` and `folders` for the exact rules.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.files import formats, writing
from pipelinez.connectors.localfiles.local import LocalFolder, LocalStore
from pipelinez.connectors.localfiles.paths import escape_problem, resolve_root, under_root
from pipelinez.connectors.sdk import (
    NATIVE,
    UNIVERSAL,
    Connector,
    ConnectorContext,
    ConnectorIssue,
    DataLocation,
    DatasetRequest,
    OutputRequest,
    OutputTarget,
    Partition,
    TargetColumn,
    WriteResult,
)
from pipelinez.connectors.sdk_sql import bounded_batches, bounded_select, land, os_error, wrap
from pipelinez.core import duck_connect
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.vocabulary import Strategy

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from pipelinez.connectors.files import reading
    from pipelinez.connectors.files.csvformat import ReadSchema


class LocalFilesConnector(Connector):
    def __init__(self, context: ConnectorContext):
        super().__init__(context)
        self.root = resolve_root(context.project_dir, context.connection.get("root"))
        self.store = LocalStore(self.root)
        self._schemas: dict[str, ReadSchema] = {}
        self._lock = threading.Lock()
        self._helper: duckdb.DuckDBPyConnection | None = None  # see helper()

    # -- static ------------------------------------------------------------------------------
    @classmethod
    def validate(
        cls,
        connection: dict[str, Any],
        datasets: dict[str, dict[str, Any]],
        outputs: dict[str, dict[str, Any]],
    ) -> list[ConnectorIssue]:
        issues: list[ConnectorIssue] = []
        for name, block in datasets.items():
            if isinstance(block, dict):
                issues += _dataset_issues(name, block)
        for name, block in outputs.items():
            if isinstance(block, dict):
                issues += _output_issues(name, block)
        return issues

    @classmethod
    def output_target(
        cls, project_dir: Path, connection: dict[str, Any], output: str, options: dict[str, Any]
    ) -> OutputTarget | None:
        """The output's folder, absolute with symlinks resolved; a folder inside another output's folder
        overlaps it (a replace swaps the whole folder)."""
        root = resolve_root(project_dir, connection.get("root"))
        try:
            out = writing.FileOutput.of(OutputRequest(output, options, Strategy.REPLACE))
            folder = under_root(root, out.path)
        except PzConnectorError:
            return None  # tier 3 reports it
        real = Path(os.path.normcase(os.path.realpath(folder)))
        shown = os.path.relpath(folder, project_dir) if folder.is_relative_to(project_dir) else str(folder)
        return OutputTarget(
            ("files",),
            real.parts,
            f"folder {shown}",
            nested=True,
            local_path=real.parts,
            owns_local_path=True,
        )

    @classmethod
    def dataset_location(
        cls, project_dir: Path, connection: dict[str, Any], dataset: str, options: dict[str, Any]
    ) -> DataLocation | None:
        """The dataset's file or folder (a glob: its fixed leading folders), absolute, symlinks resolved."""
        root = resolve_root(project_dir, connection.get("root"))
        path = options.get("path")
        if not isinstance(path, str):
            return None
        fixed, glob = formats.split_glob(path)
        try:
            where = under_root(root, fixed or ".")
        except PzConnectorError:
            return None  # tier 3 reports it
        real = Path(os.path.normcase(os.path.realpath(where)))
        shown = os.path.relpath(root / path, project_dir) if root.is_relative_to(project_dir) else path
        return DataLocation(("files",), real.parts, f"path {shown}", glob, local_path=real.parts)

    def source_tier(self, dataset: DatasetRequest) -> str:
        ds = self._dataset(dataset)
        fmt = ds.fmt
        if not dataset.force_universal:
            return NATIVE
        if ds.hive:
            raise PzConnectorError(
                "force_universal needs the universal tier, but hive_partitioning is read natively only; "
                "remove force_universal for this source, or declare the partition values as columns",
                code="PZ0312",
            )
        if fmt != "csv":
            raise PzConnectorError(
                f"force_universal needs the universal tier, but localfiles reads "
                f"{fmt} natively only (DuckDB read_{fmt}); remove force_universal for this source, or "
                "convert the files to csv",
                code="PZ0312",
            )
        return UNIVERSAL

    def static_schema(self, dataset: DatasetRequest) -> list[tuple[str, str]] | None:
        ds = self._dataset(dataset)
        if not ds.files():
            return None
        return list(self._schema(ds, dataset).columns)

    # -- source ------------------------------------------------------------------------------
    def helper(self) -> duckdb.DuckDBPyConnection:
        """A private in-memory DuckDB the connector describes parquet files with, opened once per connector
        (a partition worker reads all its partitions through one connector: opening a database per
        partition cost more than reading a small file)."""

        with self._lock:
            if self._helper is None:
                self._helper = duck_connect.connect()
            return self._helper

    def close(self) -> None:
        with self._lock:
            helper, self._helper = self._helper, None
        if helper is not None:
            helper.close()

    def partitions(self, dataset: DatasetRequest) -> list[Partition]:
        return self._dataset(dataset).partitions()

    def extract_native(
        self, con: duckdb.DuckDBPyConnection, dataset: DatasetRequest, partition: Partition, target: str
    ) -> None:
        import duckdb

        from pipelinez.connectors.files import reading  # the read side: imported on the first read

        ds = self._dataset(dataset)
        files = ds.partition_files(partition)
        try:
            schema = self._schema(ds, dataset)
            select = reading.native_select(self.helper, ds, schema, files)  # opened for parquet only
            land(con, target, bounded_select(select, dataset.bounds), dataset.staging_compression)
        except duckdb.Error as exc:
            raise wrap(exc, "PZ0505", _part(ds, partition)) from exc

    def extract_batches(self, dataset: DatasetRequest, partition: Partition) -> Iterator[pa.RecordBatch]:
        import duckdb

        from pipelinez.connectors.files import csvformat  # the read side: imported on the first read

        ds = self._dataset(dataset)
        if ds.fmt != "csv":
            raise PzConnectorError(f"localfiles reads {ds.fmt} natively only", code="PZ0312")
        files = ds.partition_files(partition)
        try:
            schema = self._schema(ds, dataset)
            yield from bounded_batches(csvformat.universal_batches(files, ds.dialect, schema), dataset.bounds)
        except duckdb.Error as exc:
            raise wrap(exc, "PZ0505", _part(ds, partition)) from exc

    # -- sink --------------------------------------------------------------------------------
    def write_native(self, con: duckdb.DuckDBPyConnection, output: OutputRequest, source: str) -> WriteResult:
        import duckdb

        out, folder = self._output(output)
        try:
            return writing.write_native(con, out, folder, source)
        except duckdb.Error as exc:
            raise wrap(exc, "PZ0501") from exc
        except OSError as exc:
            raise os_error(exc, "PZ0501") from exc

    def write_batches(self, output: OutputRequest, reader: pa.RecordBatchReader) -> WriteResult:
        import duckdb
        import pyarrow as pa

        out, folder = self._output(output)
        try:
            return writing.write_batches(out, folder, reader)
        except duckdb.Error as exc:
            raise wrap(exc, "PZ0501") from exc
        except OSError as exc:
            raise os_error(exc, "PZ0501") from exc
        except pa.ArrowException as exc:
            raise PzConnectorError(str(exc), code="PZ0501") from exc

    def target_columns(self, output: OutputRequest) -> list[TargetColumn] | None:
        """An append to a parquet folder that already holds files keeps their schema: the last file's
        columns. CSV and JSON store no types (a reader infers them over all files), and a replace swaps in
        a new folder, so neither keeps a definition."""
        import duckdb

        out, folder = self._output(output)
        latest = writing.latest_part(out, folder)
        if latest is None:
            return None
        try:
            con = duck_connect.connect()
            try:
                cols = writing.parquet_columns(con, latest)
            finally:
                con.close()
        except duckdb.Error as exc:
            raise wrap(exc, "PZ0501", f"cannot read the schema of {latest}: ") from exc
        return [TargetColumn(name, kind, kind, required=True) for name, kind in cols]  # every file has them

    # -- connectivity ----------------------------------------------------------------------------
    def check_connection(self) -> None:
        if os.path.lexists(self.root) and not self.root.is_dir():
            raise PzConnectorError(f"root {self.root} is not a folder", code="PZ0601")

    def fetch_schema(self, dataset: DatasetRequest) -> list[tuple[str, str]]:
        import duckdb

        ds = self._dataset(dataset)
        files = ds.files()
        if not files:
            raise PzConnectorError(f"no file matches '{ds.path}' under root {self.root}", code="PZ0602")
        try:
            return list(self._schema(ds, dataset).columns)
        except duckdb.Error as exc:
            raise wrap(exc, "PZ0602") from exc

    def probe_output(self, output: OutputRequest) -> None:
        target = self._output(output)[1].folder
        if os.path.lexists(target) and not target.is_dir():
            raise PzConnectorError(f"{target} exists and is not a folder", code="PZ0606")
        existing = target if target.is_dir() else target.parent
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        probe = existing / f".pz-probe-{secrets.token_hex(4)}"
        try:
            probe.mkdir()
        except OSError as exc:
            raise PzConnectorError(
                f"cannot create folders in {existing}: {exc.strerror or exc}",
                code="PZ0606",
            ) from exc
        shutil.rmtree(probe, ignore_errors=True)

    # -- helpers -----------------------------------------------------------------------------
    def _dataset(self, dataset: DatasetRequest) -> reading.FileDataset:
        """The dataset's files and format (`files.reading`, imported on the first read: a validate, which
        asks only the static rules and targets above, does not import the readers and CSV dialects)."""
        from pipelinez.connectors.files import reading

        return reading.FileDataset.of(self.store, dataset)

    def _output(self, output: OutputRequest) -> tuple[writing.FileOutput, LocalFolder]:
        out = writing.FileOutput.of(output)
        return out, LocalFolder(under_root(self.root, out.path), out.foreign_ok)

    def _schema(self, ds: reading.FileDataset, dataset: DatasetRequest) -> ReadSchema:
        """The dataset's schema, decided once per connector instance over all of the dataset's files."""

        key = json.dumps([dataset.name, dataset.options, ds.contract], sort_keys=True, default=str)
        with self._lock:
            cached = self._schemas.get(key)
            if cached is not None:
                return cached
            files = ds.absolute(ds.require_files())
            opened: list[duckdb.DuckDBPyConnection] = []  # none when the contract decides

            def connect() -> duckdb.DuckDBPyConnection:
                if not opened:
                    opened.append(duck_connect.connect())
                return opened[0]

            try:
                from pipelinez.connectors.files import reading  # the read side: on the first read

                schema = reading.resolve_schema(connect, ds, files)
            finally:
                for con in opened:
                    con.close()
            self._schemas[key] = schema
            return schema


def _part(ds: reading.FileDataset, partition: Partition) -> str:
    """Message prefix of a read's errors: which partition, when the dataset is split (the engine puts the
    node's name in front of every message)."""
    return f"{partition.description}: " if ds.files_per_partition else ""


def _dataset_issues(name: str, block: dict[str, Any]) -> list[ConnectorIssue]:
    return [
        ConnectorIssue(message, path, "dataset", name)
        for message, path in formats.dataset_issues(block, escape_problem)
    ]


def _output_issues(name: str, block: dict[str, Any]) -> list[ConnectorIssue]:
    return [
        ConnectorIssue(message, path, "output", name)
        for message, path in formats.output_issues(block, escape_problem)
    ]
