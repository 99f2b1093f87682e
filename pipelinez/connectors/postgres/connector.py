"""The `postgres` connector: PostgreSQL tables and queries as sources, tables as sinks, in both tiers.

Source (see `source.py`; `native.py` and `nan_guard.py` for the native tier, `reader.py` and
`arrow_convert.py` for the universal tier; type mapping in `types.py`):
- native: DuckDB's postgres extension, LOADed from the file the `duckdb-extension-postgres-scanner` package
  ships (no network). Unpartitioned tables are read with the extension's parallel binary table scan, queries
  and partitions with `postgres_query` and a server-side projection.
- universal: ADBC's PostgreSQL driver (COPY BINARY streamed as Arrow record batches), converted with
  pyarrow kernels to the same Arrow types; no row passes through Python objects.
- both tiers stage the same DuckDB types with the same values; `partitions: {column, count}` splits a
  table or query into contiguous ranges that land one after another into the staging table.

Sink (see `sink.py`; the target table in `sink_target.py`, replace and merge in `sink_strategies.py`,
column types in `sink_types.py`): replace (temp table, then one swap transaction that keeps grants), merge
(load table, then one transaction: delete flagged keys, INSERT ... ON CONFLICT or MERGE), append (COPY in
batches, each its own transaction; `batches_committed` on the result and on the error). Native writes go
through the extension (ATTACH READ_WRITE, binary COPY), universal writes through ADBC's bulk ingest
(binary COPY).

Errors are `PzConnectorError`s classified by SQLSTATE / connection failure (`settings.classify`), with the
password scrubbed from every message.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.postgres import native, target_types, views
from pipelinez.connectors.postgres.native import Attachment, extract_native, preload_extension
from pipelinez.connectors.postgres.settings import APPEND_BATCH_ROWS, Settings, TableRef, lead
from pipelinez.connectors.postgres.source import Relation, describe, make_partitions
from pipelinez.connectors.sdk import (
    Connector,
    ConnectorContext,
    ConnectorIssue,
    DatasetRequest,
    OutputRequest,
    OutputTarget,
    Partition,
    TargetColumn,
    WriteResult,
)
from pipelinez.core.diagnostics import PzConnectorError

if TYPE_CHECKING:
    import duckdb
    import psycopg
    import pyarrow as pa

    from pipelinez.connectors.postgres import sink
    from pipelinez.connectors.postgres.reader import ReaderConnection

_DSN_EXCLUSIVE = ("host", "port", "database", "user", "sslmode")
_CONNECT_FAILED = "Unable to connect to Postgres"  # the extension's words for an ATTACH that found no server
# what the extension says before libpq's reason: the whole connection string (the server is named by pz)
_CONNECT_PREFIX = re.compile(r'(?:IO Error: )?Unable to connect to Postgres at ".*?": ', re.DOTALL)


class PostgresConnector(Connector):
    # rows per committed append batch (each batch is one COPY in its own transaction)
    append_batch_rows: int = APPEND_BATCH_ROWS

    def __init__(self, context: ConnectorContext):
        super().__init__(context)
        self._settings: Settings | None = None
        self._control: psycopg.Connection[Any] | None = None
        self._relations: dict[str, Relation] = {}
        # kept across source reads (a partition worker reads many partitions through one connector)
        self._attachment: Attachment | None = None
        self._reader: ReaderConnection | None = None

    # -- static ------------------------------------------------------------------------------
    @classmethod
    def validate(
        cls,
        connection: dict[str, Any],
        datasets: dict[str, dict[str, Any]],
        outputs: dict[str, dict[str, Any]],
    ) -> list[ConnectorIssue]:
        issues: list[ConnectorIssue] = []
        if connection.get("dsn"):
            for key in _DSN_EXCLUSIVE:
                if key in connection:
                    issues.append(
                        ConnectorIssue(
                            f"connection: '{key}' and 'dsn' exclude each other; put {key} into the dsn "
                            "or drop the dsn",
                            (key,),
                        )
                    )
        for name, block in datasets.items():
            has_table, has_query = bool(block.get("table")), bool(block.get("query"))
            if has_table == has_query:
                issues.append(
                    ConnectorIssue(
                        "a postgres dataset needs exactly one of table: or query:",
                        ("table",) if has_table else (),
                        "dataset",
                        name,
                    )
                )
            issues += _name_issues(block.get("table"), "dataset", name)
        for name, block in outputs.items():
            issues += _name_issues(block.get("table", name), "output", name)  # the name is the default
        return issues

    @classmethod
    def output_target(
        cls, project_dir: Path, connection: dict[str, Any], output: str, options: dict[str, Any]
    ) -> OutputTarget | None:
        """Server (host, port, database) and (schema, table) as written: pz quotes every name, so case
        counts. An unqualified table is taken to be in `public` unless the connection's options set a
        search_path."""
        try:
            settings = Settings.from_connection(connection)
            ref = TableRef.parse(str(options.get("table") or output))
        except (PzConnectorError, ValueError):
            return None  # tier 3 reports it
        params = settings.params
        host = params.get("host", "localhost").lower()
        port = params.get("port", "5432")
        database = params.get("dbname") or params.get("user", "")
        schema = ref.schema or ("" if "search_path" in params.get("options", "") else "public")
        # an output named in no sink file: its name is the table, checked here (validate checks declared ones)
        long_part = next((p for p in (ref.schema, ref.name) if p is not None and _too_long(p)), None)
        # the server cuts a longer name to its first 63 bytes: the table it would really write
        schema, name = _server_cut(schema), _server_cut(ref.name)
        return OutputTarget(
            ("postgres", host, port, database),
            (schema, name),
            f"table {schema + '.' if schema else ''}{name} in database {database} on {host}:{port}",
            issue=_too_long_message(long_part) if long_part is not None else "",
        )

    # -- helpers -----------------------------------------------------------------------------
    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = Settings.from_connection(self.context.connection)
        return self._settings

    def control(self, code: str = "PZ0601") -> psycopg.Connection[Any]:
        """The psycopg connection for catalog lookups and control statements (autocommit)."""
        if self._control is None or self._control.closed:
            self._control = self.settings.psycopg(autocommit=True, code=code)
        return self._control

    def _where(self, dataset: DatasetRequest) -> str:
        """Message prefix of source errors: none (the engine names the node in front of the message)."""
        return ""

    def _sink_where(self, output: OutputRequest) -> str:
        return ""

    def _writer(self, output: OutputRequest, code: str) -> sink.Writer:
        """The sink side, imported when a write needs it (a run that only reads does not import it)."""
        from pipelinez.connectors.postgres import sink

        return sink.Writer(
            self.settings, self.control(code), output, self._sink_where(output), self.append_batch_rows
        )

    def relation(self, dataset: DatasetRequest, code: str = "PZ0505") -> Relation:
        key = _relation_key(dataset)
        if key not in self._relations:
            where = self._where(dataset)
            try:
                self._relations[key] = describe(self.control(code), dataset, where, code)
            except PzConnectorError:
                raise
            except Exception as exc:
                raise self.settings.error(exc, where, code) from exc
        return self._relations[key]

    @classmethod
    def staging_extensions(cls) -> tuple[str, ...]:
        """The postgres extension file `duckdb-extension-postgres-scanner` ships (`native.extension_path`)."""
        try:
            return (native.extension_path(),)
        except PzConnectorError:  # no file shipped: the ATTACH's LOAD reports it
            return ()

    # -- source ------------------------------------------------------------------------------
    def partitions(self, dataset: DatasetRequest) -> list[Partition]:
        spec = dataset.options.get("partitions")
        if not spec:
            return [Partition(0, "all")]
        relation = self.relation(dataset)
        try:
            return make_partitions(
                self.control("PZ0505"), relation, dict(spec), self._where(dataset), dataset.bounds
            )
        except PzConnectorError:
            raise
        except Exception as exc:
            raise self.settings.error(exc, self._where(dataset), "PZ0505") from exc

    def extract_native(
        self, con: duckdb.DuckDBPyConnection, dataset: DatasetRequest, partition: Partition, target: str
    ) -> None:
        if _relation_key(dataset) in self._relations:
            relation = self.relation(dataset)
        elif dataset.options.get("table") and not dataset.options.get("query"):
            relation = self._relation_attached(con, dataset)
        elif self._attachment is None:
            relation = self._relation_while_loading(con, dataset)
        else:
            relation = self.relation(dataset)
        if self._attachment is None:
            self._attachment = Attachment(self.settings, read_only=True)
        extract_native(
            con,
            lambda: self.control("PZ0505"),
            self.settings,
            relation,
            partition,
            target,
            self._where(dataset),
            dataset.bounds,
            self._attachment,
            dataset.staging_compression,
        )

    def _relation_attached(self, con: duckdb.DuckDBPyConnection, dataset: DatasetRequest) -> Relation:
        """A table dataset described through the attachment the read uses anyway (`catalog`): no psycopg
        import, connection or second server session to describe it (a full read's NaN check on a `numeric`
        column still asks psycopg, after the load). Errors as the read's own: a failed
        ATTACH names the server as a failed psycopg connect did; the attachment is dropped after a failure."""
        import duckdb

        from pipelinez.connectors.postgres.catalog import ExtensionCatalog

        if self._attachment is None:
            self._attachment = Attachment(self.settings, read_only=True)
        where, code = self._where(dataset), "PZ0505"
        try:
            alias = self._attachment.alias_in(con)
        except duckdb.Error as exc:
            self._attachment.drop()
            message = None
            if _CONNECT_FAILED in str(exc):
                where = f"{lead(where)}cannot connect to PostgreSQL at {self.settings.describe()}"
                message = _CONNECT_PREFIX.sub("", str(exc), count=1)
            raise self.settings.error(exc, where, code, message) from exc
        try:
            relation = describe(ExtensionCatalog(con, alias), dataset, where, code)
        except PzConnectorError:
            raise
        except Exception as exc:
            self._attachment.drop()
            raise self.settings.error(exc, where, code) from exc
        self._relations[_relation_key(dataset)] = relation
        return relation

    def _relation_while_loading(self, con: duckdb.DuckDBPyConnection, dataset: DatasetRequest) -> Relation:
        """A first read's two fixed costs side by side: DuckDB LOADs the postgres extension (a local file,
        the GIL released) on a helper thread while psycopg is imported, connects and describes the relation
        here. The ATTACH stays after the relation (its own LOAD is then a no-op), so the statements, the
        errors and the connections of an attempt are those of one after the other."""
        with ThreadPoolExecutor(1, thread_name_prefix="pz-pg-load") as pool:
            loading = pool.submit(preload_extension, con)
            try:
                return self.relation(dataset)
            finally:
                loading.result()  # quiet: the ATTACH reports a LOAD that failed

    def extract_batches(self, dataset: DatasetRequest, partition: Partition) -> Iterator[pa.RecordBatch]:
        from pipelinez.connectors.postgres.reader import ReaderConnection, extract_batches  # universal only

        relation = self.relation(dataset)
        if self._reader is None:
            self._reader = ReaderConnection(self.settings)
        return extract_batches(
            self.settings, relation, partition, self._where(dataset), dataset.bounds, self._reader
        )

    def staging_columns(self, dataset: DatasetRequest) -> list[tuple[str, str]]:
        """The (name, DuckDB type) columns both tiers stage for `dataset` (before any contract cast)."""
        return [(p.name, p.duck) for p in self.relation(dataset).plans]

    # -- sink --------------------------------------------------------------------------------
    def write_native(self, con: duckdb.DuckDBPyConnection, output: OutputRequest, source: str) -> WriteResult:
        writer = self._writer(output, "PZ0501")
        return writer.write_native(con, source)

    def write_batches(self, output: OutputRequest, reader: pa.RecordBatchReader) -> WriteResult:
        writer = self._writer(output, "PZ0501")
        return writer.write_batches(reader)

    def target_columns(self, output: OutputRequest) -> list[TargetColumn] | None:
        """Merge and append write into the existing table; replace swaps in a table created from the
        result's types, so it keeps nothing of the old definition."""
        if output.strategy == "replace":
            return None
        writer = self._writer(output, "PZ0501")
        try:
            columns = writer.target_columns()
            required = writer.required_columns() if columns is not None else set()
            compared = writer.column_comparisons() if columns is not None else {}
        except PzConnectorError:
            raise
        except Exception as exc:
            raise self.settings.error(exc, self._sink_where(output), "PZ0501") from exc
        return None if columns is None else target_types.target_columns(columns, required, compared)

    @classmethod
    def view_relation(cls, connection: dict[str, Any], output: str, options: dict[str, Any]) -> str | None:
        return views.view_relation(output, options)

    def write_view(self, output: OutputRequest, sql: str) -> WriteResult:
        try:
            views.write_view(
                self.control("PZ0501"), TableRef.parse(str(output.options.get("table") or output.name)), sql
            )
        except PzConnectorError:
            raise
        except Exception as exc:
            raise self.settings.error(exc, self._sink_where(output), "PZ0501") from exc
        return WriteResult(rows=0)

    # -- connectivity (tier 5) ------------------------------------------------------------------
    def check_connection(self) -> None:
        where = ""
        try:
            self.control().execute("SELECT 1").fetchone()
        except PzConnectorError as exc:
            raise PzConnectorError(
                exc.message,
                is_transient=exc.is_transient,
                retry_after=exc.retry_after,
                code="PZ0601",
            ) from exc
        except Exception as exc:
            raise self.settings.error(exc, where, "PZ0601") from exc

    def fetch_schema(self, dataset: DatasetRequest) -> list[tuple[str, str]]:
        plain = DatasetRequest(dataset.name, dataset.options, None, dataset.force_universal)
        return [(p.name, p.duck) for p in self.relation(plain, code="PZ0602").plans]

    def probe_output(self, output: OutputRequest) -> None:
        self._writer(output, "PZ0606").probe()

    def close(self) -> None:
        if self._attachment is not None:
            self._attachment.drop()
        if self._reader is not None:
            self._reader.close()
        if self._control is not None:
            with contextlib.suppress(Exception):
                self._control.close()
            self._control = None


def _name_issues(value: object, block: str, name: str) -> list[ConnectorIssue]:
    if not isinstance(value, str) or "{{" in value or not value:
        return []
    try:
        ref = TableRef.parse(value)
    except ValueError as exc:
        return [ConnectorIssue(f"table: {exc}", ("table",), block, name)]
    for part in (ref.schema, ref.name):
        if part is not None and _too_long(part):
            return [ConnectorIssue(f"table: {_too_long_message(part)}", ("table",), block, name)]
    return []


NAME_BYTES = 63  # PostgreSQL's identifier limit (NAMEDATALEN - 1): longer names are cut to it


def _too_long(part: str) -> bool:
    return len(part.encode("utf-8")) > NAME_BYTES


def _too_long_message(part: str) -> str:
    return (
        f"name part {part[:24]!r}... ({len(part.encode('utf-8'))} bytes) is longer than PostgreSQL's "
        f"{NAME_BYTES} bytes (the server would cut it, so two long names could land in one table); give it "
        "a shorter table:"
    )


def _server_cut(part: str) -> str:
    """The name as PostgreSQL keeps it: its first 63 bytes, never half a character."""
    return part.encode("utf-8")[:NAME_BYTES].decode("utf-8", "ignore")


def _relation_key(dataset: DatasetRequest) -> str:
    return repr((dataset.name, sorted(dataset.options.items(), key=lambda kv: kv[0]), dataset.columns))
