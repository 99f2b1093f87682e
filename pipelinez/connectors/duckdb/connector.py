"""The `duckdb` connector: tables of a DuckDB database file, as sources and sinks (the default warehouse).

Source: `table` (`orders`, `analytics.orders`) or `query`. A query runs with the source file as the default
database, so it names tables as it would inside that file (`orders`, `analytics.orders`), never the staging
tables. A `columns:` contract selects those columns, cast to the contract's types.
- native: the file is attached READ_ONLY to the staging database under a unique alias, the rows are copied
  with CREATE TABLE … AS / INSERT INTO … BY NAME, and the file is detached.
- universal: a separate read-only connection to the file streams Arrow record batches.
Sink: replace / merge / append in one transaction each (see `strategies`), into the file attached to the
staging database (native) or opened by a separate connection that ingests the Arrow stream (universal).
The file (and its folder) is created when missing. After each committed write the file is checkpointed, so
it stands alone (no pending `.wal`) and a replaced table's space is reused rather than growing the file.
"""

from __future__ import annotations

import itertools
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.duckdb import strategies, views
from pipelinez.connectors.duckdb.files import attached, connected, looked_up, resolve_path
from pipelinez.connectors.duckdb.names import TableName
from pipelinez.connectors.sdk import (
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
from pipelinez.connectors.sdk_feed import ArrowFeed
from pipelinez.connectors.sdk_sql import (
    bounded_select,
    canonical_contract,
    land,
    os_error,
    peek_rows,
    summary,
    with_schema,
    wrap,
)
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident, split_qualified

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

BATCH_ROWS = 122_880
_STREAM = "__pz_stream"
_SHAPE = "__pz_shape"
_INCOMING = "__pz_incoming"
_STAGED = f'"temp"."main"."{_INCOMING}"'


class DuckDBConnector(Connector):
    def __init__(self, context: ConnectorContext):
        super().__init__(context)
        self.path: Path = resolve_path(context.project_dir, context.connection.get("path", ""))

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
            if not isinstance(block, dict):
                continue
            has_table, has_query = "table" in block, "query" in block
            if has_table == has_query:
                issues.append(
                    ConnectorIssue(
                        "a duckdb dataset needs exactly one of table: or query:",
                        ("table",) if has_table else (),
                        "dataset",
                        name,
                    )
                )
            issues += _name_issue(block.get("table"), "dataset", name)
        for name, block in outputs.items():
            if isinstance(block, dict):
                issues += _name_issue(block.get("table"), "output", name)
        return issues

    @classmethod
    def output_target(
        cls, project_dir: Path, connection: dict[str, Any], output: str, options: dict[str, Any]
    ) -> OutputTarget | None:
        """The file (symlinks resolved) and the table, case-folded: DuckDB identifiers ignore case."""
        try:
            table = TableName.parse(str(options.get("table") or output))
        except ValueError:
            return None  # tier 3 reports the name
        path = resolve_path(project_dir, connection.get("path", ""))
        real = os.path.normcase(os.path.realpath(path))
        shown = os.path.relpath(path, project_dir) if path.is_relative_to(project_dir) else str(path)
        return OutputTarget(
            ("duckdb", real),
            (table.schema.lower(), table.table.lower()),
            f"table {table} in {shown}",
            local_path=Path(real).parts,
        )

    @classmethod
    def dataset_location(
        cls, project_dir: Path, connection: dict[str, Any], dataset: str, options: dict[str, Any]
    ) -> DataLocation | None:
        """The database file (symlinks resolved): a folder output holding it would delete it. A duckdb
        output into the same file is another table of it (`output_target`'s system), not an overlap."""
        path = resolve_path(project_dir, connection.get("path", ""))
        real = os.path.normcase(os.path.realpath(path))
        shown = os.path.relpath(path, project_dir) if path.is_relative_to(project_dir) else str(path)
        return DataLocation(("duckdb", real), (), f"database file {shown}", local_path=Path(real).parts)

    def static_schema(self, dataset: DatasetRequest) -> list[tuple[str, str]] | None:
        if not self.path.is_file():
            return None
        try:
            return self.fetch_schema(dataset)
        except PzConnectorError:
            return None

    # -- source ------------------------------------------------------------------------------
    def extract_native(
        self, con: duckdb.DuckDBPyConnection, dataset: DatasetRequest, partition: Partition, target: str
    ) -> None:
        import duckdb

        self._require_file("PZ0505")
        try:
            with attached(con, self.path, read_only=True) as alias:
                if "query" not in dataset.options:
                    land(con, target, self._select(dataset, alias), dataset.staging_compression)
                    return
                row = con.execute("SELECT current_database(), current_schema()").fetchone()
                assert row is not None
                qualified = _qualify(target, str(row[0]), str(row[1]))
                con.execute(f"USE {quote_ident(alias)}")
                try:
                    land(con, qualified, self._select(dataset, None), dataset.staging_compression)
                finally:
                    con.execute(f"USE {quote_ident(str(row[0]))}.{quote_ident(str(row[1]))}")
        except duckdb.Error as exc:
            raise wrap(exc, "PZ0505") from exc

    def extract_batches(self, dataset: DatasetRequest, partition: Partition) -> Iterator[pa.RecordBatch]:
        import duckdb

        self._require_file("PZ0505")
        try:
            with connected(self.path, read_only=True) as con:
                con.execute("SET arrow_lossless_conversion = true")
                reader = con.execute(self._select(dataset, None)).to_arrow_reader(BATCH_ROWS)
                yield from with_schema(reader, reader.schema)
        except duckdb.Error as exc:
            raise wrap(exc, "PZ0505") from exc

    # -- sink --------------------------------------------------------------------------------
    def write_native(self, con: duckdb.DuckDBPyConnection, output: OutputRequest, source: str) -> WriteResult:
        import duckdb

        target = self._target(output)
        cur = con.cursor()
        try:
            rows, cols = self._prepare(cur, output, source, target)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # only a replace sweeps earlier runs' work tables: append and merge open the file no extra time
            leftovers = self._leftovers(target) if output.strategy == "replace" else None
            with attached(con, self.path, read_only=False) as alias:
                result = strategies.write(cur, alias, target, output, source, cols, rows, leftovers=leftovers)
                self._checkpoint(cur, alias)
                return result
        except duckdb.Error as exc:
            raise wrap(exc, "PZ0501") from exc
        except OSError as exc:
            raise os_error(exc, "PZ0501") from exc
        finally:
            cur.close()

    def write_batches(self, output: OutputRequest, reader: pa.RecordBatchReader) -> WriteResult:
        """Replace and append stream `reader` straight into the target; merge lands it in a temp table
        first (it reads the result more than once: key checks, then MERGE)."""
        import duckdb
        import pyarrow as pa

        target = self._target(output)
        first, rest = peek_rows(reader)
        if first is None and output.strategy == "replace" and not output.allow_empty:
            raise strategies.refuse_empty(target)
        batches = itertools.chain([first] if first is not None else [], rest)
        feed = ArrowFeed(pa.RecordBatchReader.from_batches(reader.schema, batches), _STREAM)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with connected(self.path, read_only=False) as con:
                row = con.execute("SELECT current_database()").fetchone()
                assert row is not None
                catalog = str(row[0])
                # the stream's columns, no rows (Schema.empty_table() fails on some Arrow extension types)
                con.register(_SHAPE, pa.Table.from_batches([], schema=reader.schema))
                if output.strategy == "merge":
                    con.execute(
                        f"CREATE TEMP TABLE {quote_ident(_INCOMING)} AS SELECT * FROM {_SHAPE} WITH NO DATA"
                    )
                    feed.insert_into(con, _STAGED)
                    rows, cols = self._prepare(con, output, _STAGED, target)
                    result = strategies.write(con, catalog, target, output, _STAGED, cols, rows)
                else:
                    if output.strategy not in ("replace", "append"):
                        raise PzConnectorError(f"unknown strategy '{output.strategy}'", code="PZ0305")
                    cols = strategies.columns_of(con, _SHAPE)
                    result = strategies.write(
                        con, catalog, target, output, _SHAPE, cols, None, shape=_SHAPE, feed=feed
                    )
                self._checkpoint(con, catalog)
                return result
        except duckdb.Error as exc:
            raise wrap(exc, "PZ0501") from exc
        except OSError as exc:
            raise os_error(exc, "PZ0501") from exc

    @classmethod
    def view_relation(cls, connection: dict[str, Any], output: str, options: dict[str, Any]) -> str | None:
        return views.view_relation(output, options)

    def write_view(self, output: OutputRequest, sql: str) -> WriteResult:
        import duckdb

        try:
            views.write_view(self.path, self._target(output), sql)
        except duckdb.Error as exc:
            raise wrap(exc, "PZ0501") from exc
        except OSError as exc:
            raise os_error(exc, "PZ0501") from exc
        return WriteResult(rows=0)

    def target_columns(self, output: OutputRequest) -> list[TargetColumn] | None:
        """Merge and append write into the existing table; replace swaps in a table created from the
        result (CREATE TABLE … AS), so it keeps nothing of the old definition."""
        import duckdb

        if output.strategy == "replace" or not self.path.is_file():
            return None
        target = self._target(output)
        try:
            with looked_up(self.path) as (con, alias):
                # the table's CREATE statement (its collations), then its columns as DESCRIBE tells them
                # (name, type, nullable, default); not duckdb_columns(), whose first call in a process
                # builds every built-in view of the catalog (15-25 ms of a delta run)
                found = con.execute(
                    "SELECT sql FROM duckdb_tables() WHERE database_name = ? AND lower(schema_name) = "
                    "lower(?) AND lower(table_name) = lower(?)",
                    [alias, target.schema, target.table],
                ).fetchone()
                if found is None:
                    return None
                described = con.execute(f"DESCRIBE {target.sql(alias)}").fetchall()
        except duckdb.Error as exc:
            raise wrap(exc, "PZ0501") from exc
        collations = strategies.collations(str(found[0] or ""))
        return [
            TargetColumn(
                str(name),
                str(kind),
                str(kind),
                folds=strategies.collation_folds(collations.get(str(name).lower(), "")),
                required=nullable == "NO" and default is None,
            )
            for name, kind, nullable, _key, default, *_extra in described
        ]

    # -- connectivity ----------------------------------------------------------------------------
    def check_connection(self) -> None:
        import duckdb

        if not self.path.exists():
            return  # a sink creates it; a source's datasets report PZ0602 from fetch_schema
        try:
            with connected(self.path, read_only=True, rows=False) as con:
                con.execute("SELECT 1").fetchall()
        except duckdb.Error as exc:
            raise wrap(exc, "PZ0601", f"cannot open {self.path}: ") from exc

    def fetch_schema(self, dataset: DatasetRequest) -> list[tuple[str, str]]:
        import duckdb

        self._require_file("PZ0602")
        try:
            with connected(self.path, read_only=True, rows=False) as con:
                return strategies.columns_of(con, f"({self._select(dataset, None)})")
        except duckdb.Error as exc:
            raise wrap(exc, "PZ0602") from exc

    def probe_output(self, output: OutputRequest) -> None:
        import duckdb

        target = self._target(output)
        if not self.path.exists():
            folder = self.path.parent
            while not folder.exists() and folder != folder.parent:
                folder = folder.parent
            if not os.access(folder, os.W_OK | os.X_OK):
                raise PzConnectorError(
                    f"cannot create {self.path}: folder {folder} is not writable", code="PZ0606"
                )
            return
        try:
            with connected(self.path, read_only=False, rows=False) as con:
                con.execute("BEGIN TRANSACTION")
                try:
                    con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(target.schema)}")
                    probe = TableName(target.schema, f"__pz_probe_{secrets.token_hex(4)}")
                    con.execute(f"CREATE TABLE {probe.sql()} (x INTEGER)")
                finally:
                    con.execute("ROLLBACK")
        except duckdb.Error as exc:
            raise wrap(exc, "PZ0606", f"cannot write table {target} in {self.path}: ") from exc

    # -- helpers -----------------------------------------------------------------------------
    def _leftovers(self, target: TableName) -> list[str]:
        """The target's work tables of earlier runs, listed with the file attached to the helper instance
        (`looked_up`): listing them once the file is attached to the staging instance would enumerate every
        database attached there (the other nodes' ones too)."""
        if not self.path.is_file():
            return []
        with looked_up(self.path) as (con, alias):
            return strategies.leftover_work_tables(con, alias, target)

    def _checkpoint(self, cur: duckdb.DuckDBPyConnection, catalog: str) -> None:
        """Fold the committed write into the database file, so the file stands alone (a copy without its
        `.wal` holds every table) and space freed by a replaced table is reused instead of growing the
        file. The write is committed already: a failed checkpoint is a note, not a failed write (the WAL
        still holds the data and the next write checkpoints it)."""
        import duckdb

        try:
            cur.execute(f"CHECKPOINT {quote_ident(catalog)}")
        except duckdb.Error as exc:
            self.context.note(
                f"sink '{self.context.instance}': the write committed, but {self.path} could not be "
                f"checkpointed ({summary(str(exc))}); its .wal file holds the change until the next write"
            )

    def _require_file(self, code: str) -> None:
        if not self.path.is_file():
            raise PzConnectorError(f"database file {self.path} does not exist", code=code)

    def _target(self, output: OutputRequest) -> TableName:
        text = output.options.get("table") or output.name
        try:
            return TableName.parse(str(text))
        except ValueError as exc:
            raise PzConnectorError(f"table: {exc}", code="PZ0303") from exc

    def _select(self, dataset: DatasetRequest, catalog: str | None) -> str:
        """The dataset's SELECT: its table (in `catalog` when given) or its query, cast to the contract."""
        if "query" in dataset.options:
            query = str(dataset.options["query"]).strip().rstrip(";").strip()
            base = f"SELECT * FROM (\n{query}\n) AS pz_query"
        else:
            try:
                table = TableName.parse(str(dataset.options.get("table", "")))
            except ValueError as exc:
                raise PzConnectorError(f"table: {exc}", code="PZ0302") from exc
            base = f"SELECT * FROM {table.sql(catalog)}"
        columns = dataset.columns
        if columns is None and isinstance(dataset.options.get("columns"), dict):
            columns = {str(k): str(v) for k, v in dataset.options["columns"].items()}
        contract = canonical_contract(columns)
        if not contract:
            return bounded_select(base, dataset.bounds)
        cols = ", ".join(f"CAST({quote_ident(n)} AS {t}) AS {quote_ident(n)}" for n, t in contract)
        return bounded_select(f"SELECT {cols} FROM ({base}) AS pz_src", dataset.bounds)

    def _prepare(
        self,
        cur: duckdb.DuckDBPyConnection,
        output: OutputRequest,
        source: str,
        target: TableName,
    ) -> tuple[int | None, list[tuple[str, str]]]:
        """Columns of the source, after the checks that pass before the target is touched, and its row count
        for a merge (which reads it more than once). Replace and append read the source once, in the write,
        and count what they wrote: a pipeline streamed into the write (a view) is computed once (an empty
        replace is refused from its first row, before the file is opened)."""
        if output.strategy == "replace" and not output.allow_empty and strategies.is_empty(cur, source):
            raise strategies.refuse_empty(target)
        if output.strategy not in ("replace", "merge", "append"):
            raise PzConnectorError(f"unknown strategy '{output.strategy}'", code="PZ0305")
        cols = strategies.columns_of(cur, source)
        if output.strategy != "merge":
            return None, cols
        rows = strategies.count_rows(cur, source)
        strategies.check_merge(cur, output, source, cols)
        return rows, cols


def _qualify(target: str, database: str, schema: str) -> str:
    """`target` (quoted, maybe qualified) with its database and schema spelled out."""
    parts = split_qualified(target)
    if len(parts) == 1:
        parts = [database, schema, *parts]
    elif len(parts) == 2:
        parts = [database, *parts]
    return ".".join(quote_ident(p) for p in parts)


def _name_issue(value: object, block: str, name: str) -> list[ConnectorIssue]:
    if not isinstance(value, str) or "{{" in value:
        return []
    try:
        TableName.parse(value)
    except ValueError as exc:
        return [ConnectorIssue(f"table: {exc}", ("table",), block, name)]
    return []
