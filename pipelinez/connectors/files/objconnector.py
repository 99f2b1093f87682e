"""The connector shared by the object stores (`s3`, `azureblob`): native-only reads and writes of the
kit's formats in one bucket or container. A subclass says how to build its `ObjectStore` from a connection
and which connection keys hold secrets.

Source: `path` is one object, a prefix (every object under it, at any depth) or a glob (`*`, `?`, `[..]`,
`**`) under the bucket; objects are read in key order as one table with the kit's format rules
(`reading`). There is no universal tier, so `engine.force_universal` and `files_per_partition` are refused
at plan time (PZ0312), and again here should a load start anyway.
Sink: an output is a prefix of data files; replace promotes a temp prefix, append adds one object
(`objects`). merge is not supported.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
from abc import abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pipelinez.connectors.files import formats, reading, writing
from pipelinez.connectors.files.csvformat import ReadSchema
from pipelinez.connectors.files.netfail import as_transient
from pipelinez.connectors.files.objects import ObjectStore, io_error
from pipelinez.connectors.files.objfolder import ObjectFolder
from pipelinez.connectors.sdk import (
    NATIVE,
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
from pipelinez.connectors.sdk_sql import bounded_select, land, wrap
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.vocabulary import Strategy

if TYPE_CHECKING:
    import duckdb

REDACTED = "***"  # how tier 3 shows a value that came from a secret env var


def key_problem(path: str) -> str | None:
    """Why an object path can't be used, or None."""
    if "\x00" in path:
        return "path holds a NUL byte"
    if any(seg == ".." for seg in path.split("/")):
        return f"path '{path}' holds a '..' segment; object keys have no parent folders"
    return None


def native_only(what: str) -> PzConnectorError:
    return PzConnectorError(
        f"{what}; this connector is native-only (DuckDB reads and writes the objects itself), so the "
        "universal tier cannot be used: remove it for this source",
        code="PZ0312",
    )


class ObjectStoreConnector(Connector):
    secret_keys: ClassVar[tuple[str, ...]] = ()  # connection keys whose values must come from secret env

    def __init__(self, context: ConnectorContext):
        super().__init__(context)
        self.store = self.make_store(context.connection)
        self._schemas: dict[str, ReadSchema] = {}
        self._lock = threading.Lock()

    @classmethod
    @abstractmethod
    def make_store(cls, connection: dict[str, Any]) -> ObjectStore:
        """The store of this connector's connection block (s3, azureblob)."""

    # -- static --------------------------------------------------------------------------------
    @classmethod
    def validate(
        cls,
        connection: dict[str, Any],
        datasets: dict[str, dict[str, Any]],
        outputs: dict[str, dict[str, Any]],
    ) -> list[ConnectorIssue]:
        issues = cls.connection_issues(connection)
        for key in cls.secret_keys:
            value = connection.get(key)
            if isinstance(value, str) and value != REDACTED:
                issues.append(
                    ConnectorIssue(
                        f"{key} must come from a secret environment variable, so it is never printed: "
                        f"write {key}: \"{{{{ env('NAME') }}}}\" and declare NAME with secret: true in "
                        "project.yml",
                        (key,),
                    )
                )
        for name, block in datasets.items():
            if isinstance(block, dict):
                issues += [
                    ConnectorIssue(m, p, "dataset", name)
                    for m, p in formats.dataset_issues(block, key_problem)
                ]
        for name, block in outputs.items():
            if isinstance(block, dict):
                issues += [
                    ConnectorIssue(m, p, "output", name) for m, p in formats.output_issues(block, key_problem)
                ]
        return issues

    @classmethod
    def connection_issues(cls, connection: dict[str, Any]) -> list[ConnectorIssue]:
        return []

    @classmethod
    def output_target(
        cls, project_dir: Path, connection: dict[str, Any], output: str, options: dict[str, Any]
    ) -> OutputTarget | None:
        try:
            store = cls.make_store(connection)
            out = writing.FileOutput.of(OutputRequest(output, options, Strategy.REPLACE), cls.manifest().name)
        except (PzConnectorError, ValueError, KeyError):
            return None
        prefix = out.path.strip("/")
        return OutputTarget(
            (store.scheme, *store.identity(), store.root),
            tuple(p for p in prefix.split("/") if p),
            f"prefix {store.uri(prefix)}",
            nested=True,
        )

    @classmethod
    def dataset_location(
        cls, project_dir: Path, connection: dict[str, Any], dataset: str, options: dict[str, Any]
    ) -> DataLocation | None:
        """The dataset's object or prefix (a glob: its fixed leading segments) in the store's terms of
        `output_target`."""
        path = options.get("path")
        try:
            store = cls.make_store(connection)
        except (PzConnectorError, ValueError, KeyError):
            return None
        if not isinstance(path, str):
            return None
        fixed, glob = formats.split_glob(path.strip("/"))
        return DataLocation(
            (store.scheme, *store.identity(), store.root),
            tuple(p for p in fixed.split("/") if p),
            f"path {store.uri(path.strip('/'))}",
            glob,
        )

    def source_tier(self, dataset: DatasetRequest) -> str:
        if dataset.force_universal:
            raise native_only("engine.force_universal asks for the universal tier")
        return NATIVE

    def sink_tier(self, output: OutputRequest, force_universal: bool) -> str:
        return NATIVE

    # -- source --------------------------------------------------------------------------------
    def partitions(self, dataset: DatasetRequest) -> list[Partition]:
        if dataset.options.get("files_per_partition"):
            raise native_only("files_per_partition splits a read into universal-tier partitions")
        return [Partition(0, "all")]

    def extract_native(
        self, con: duckdb.DuckDBPyConnection, dataset: DatasetRequest, partition: Partition, target: str
    ) -> None:
        ds = self._dataset(dataset)
        with self._store_errors("PZ0505"):
            files = ds.partition_files(partition)
            with self.store.session(con) as cur:
                schema = self._schema(ds, dataset, cur, files)
                select = reading.native_select(lambda: cur, ds, schema, files)
                land(cur, target, bounded_select(select, dataset.bounds), dataset.staging_compression)

    # -- sink ----------------------------------------------------------------------------------
    def write_native(self, con: duckdb.DuckDBPyConnection, output: OutputRequest, source: str) -> WriteResult:
        out, folder = self._output(output)
        with self._store_errors("PZ0501"), self.store.session(con) as cur:
            result = writing.write_native(cur, out, folder, source)
        return result

    def target_columns(self, output: OutputRequest) -> list[TargetColumn] | None:
        """An append to a parquet prefix that already holds files keeps their schema (the newest file's)."""
        import duckdb

        out, folder = self._output(output)
        try:
            latest = writing.latest_part(out, folder)
            if latest is None:
                return None
            con = self.store.connect()
            try:
                cols = writing.parquet_columns(con, latest)
            finally:
                con.close()
        except duckdb.Error as exc:
            raise as_transient(
                wrap(exc, "PZ0501", "cannot read the schema of the newest file: "), exc
            ) from exc
        except OSError as exc:
            raise io_error(exc, "PZ0501") from exc
        return [TargetColumn(name, kind, kind, required=True) for name, kind in cols]  # every file has them

    # -- connectivity --------------------------------------------------------------------------
    def check_connection(self) -> None:
        try:
            found = self.store.exists()
        except OSError as exc:
            raise io_error(exc, "PZ0601", f"cannot reach {self.store.describe()}: ") from exc
        if not found:
            raise PzConnectorError(f"{self.store.describe()} does not exist", code="PZ0601")

    def fetch_schema(self, dataset: DatasetRequest) -> list[tuple[str, str]]:
        ds = self._dataset(dataset)
        with self._store_errors("PZ0602"):
            files = ds.files()
            if not files:
                raise PzConnectorError(
                    f"no object matches '{ds.path}' in {self.store.describe()}", code="PZ0602"
                )
            con = self.store.connect()
            try:
                columns = list(self._schema(ds, dataset, con, ds.absolute(files)).columns)
            finally:
                con.close()
        return columns

    def probe_output(self, output: OutputRequest) -> None:
        _, folder = self._output(output)
        probe = f"{folder.prefix}/.pz-probe-{secrets.token_hex(4)}"
        path = f"{self.store.root}/{probe}"
        try:
            with self.store.fs.open_output_stream(path) as f:
                f.write(b"")
            self.store.fs.delete_file(path)
        except OSError as exc:
            raise io_error(exc, "PZ0606", f"cannot write objects under {folder.describe()}: ") from exc

    # -- helpers -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _store_errors(self, code: str) -> Iterator[None]:
        """Around a read or write of the store: a DuckDB error or an OSError becomes PzConnectorError `code`
        (transient when it is a network failure), and any PzConnectorError of a bucket/container that does
        not exist becomes PZ0531 naming it (`_gone_bucket`)."""
        import duckdb

        try:
            try:
                yield
            except duckdb.Error as exc:
                raise as_transient(wrap(exc, code), exc) from exc
            except OSError as exc:
                raise io_error(exc, code) from exc
        except PzConnectorError as exc:
            gone = self._gone_bucket(exc)
            if gone is None:
                raise
            raise gone from exc

    def _gone_bucket(self, exc: PzConnectorError) -> PzConnectorError | None:
        """A failed read or write (or one that found nothing) of a bucket/container that does not exist is
        PZ0531 naming it; None when that is not why (the error stands). Asked only after a failure: a
        working read or write costs no extra request."""
        if exc.is_transient or exc.code in (
            "PZ0531",
            "PZ0304",
            "PZ0305",
            "PZ0312",
            "PZ0509",
            "PZ0519",
            "PZ0517",
        ):
            return None  # a missing bucket answers 404, never a transient error
        return self.store.missing()

    def _dataset(self, dataset: DatasetRequest) -> reading.FileDataset:
        return reading.FileDataset.of(self.store, dataset)

    def _output(self, output: OutputRequest) -> tuple[writing.FileOutput, ObjectFolder]:
        out = writing.FileOutput.of(output, self.manifest().name)
        problem = key_problem(out.path)
        if problem:
            raise PzConnectorError(problem, code="PZ0304")
        return out, ObjectFolder(self.store, out.path.strip("/"), out.foreign_ok)

    def _schema(
        self,
        ds: reading.FileDataset,
        dataset: DatasetRequest,
        con: duckdb.DuckDBPyConnection,
        files: list[Any],
    ) -> ReadSchema:
        key = json.dumps([dataset.name, dataset.options, ds.contract], sort_keys=True, default=str)
        with self._lock:
            cached = self._schemas.get(key)
        if cached is not None:
            return cached
        schema = reading.resolve_schema(lambda: con, ds, files)
        with self._lock:
            self._schemas[key] = schema
        return schema
