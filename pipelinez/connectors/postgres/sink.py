"""Writing a staged result to a PostgreSQL table: replace, merge, append, in both tiers.

Data moves in bulk only: native writes are DuckDB `INSERT INTO <attached pg table> SELECT ... FROM <staging>`
(the postgres extension streams binary COPY), universal writes are ADBC bulk ingests (binary COPY of Arrow
batches). Control statements (DDL, swap, merge) run through psycopg.

Work tables live next to the target, named `<table>__pz_<kind>_<run id>_<hash>` (the table part shortened
to fit 63 bytes; the hash is of the full target name). Replace and merge hold a session advisory lock per
target while they work, so two pz writers never interleave on one table, and a writer may drop the work
tables a killed writer left behind.

- replace: refuse an empty result (PZ0509) unless `allow_empty`; create `<table>__pz_tmp_...` from the
  staging schema, load it (committed), failpoint `sink.before_swap`, then ONE transaction: lock the old
  table, DROP it, RENAME the temp table to the target, re-GRANT the old table's table and column
  privileges, restore its comment and owner. A failure (or a kill) before that commit leaves the old
  table as it was. Indexes, constraints, triggers, policies of the old table are not carried over, and a
  view that depends on the old table makes the DROP fail (the old table stays).
- merge: load `<table>__pz_load_...` (UNLOGGED), then ONE transaction: create the target from the staging
  schema when missing, refuse NULL or duplicate keys, DELETE target rows whose key is flagged by the
  `on_delete` column (that column is a control column: it is not written), then INSERT ... ON CONFLICT
  (keys) DO UPDATE when a unique index covers exactly the keys, else MERGE (PostgreSQL 15+), else
  DELETE + INSERT; drop the load table. Merging the same result twice leaves the same table.
- append: create the target from the staging schema when missing; then batches of `batch_rows` rows, each
  one COPY in its own committed transaction. A failure raises `AppendFailed` (the SDK's `ConnectorError`)
  whose `batches_committed` / `rows_committed` say what landed; the message says it too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from pipelinez.connectors.postgres.native import attached, table_exists
from pipelinez.connectors.postgres.settings import APPEND_BATCH_ROWS, lead
from pipelinez.connectors.postgres.sink_strategies import StrategyWriter
from pipelinez.connectors.postgres.sink_target import Column, format_name
from pipelinez.connectors.postgres.sink_types import describe_types, pg_type_for_arrow, pg_type_for_duckdb
from pipelinez.connectors.sdk import WriteResult
from pipelinez.connectors.sdk_errors import ConnectorError
from pipelinez.core import failpoints
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

__all__ = ["APPEND_BATCH_ROWS", "AppendFailed", "Writer"]


class AppendFailed(ConnectorError):
    """An append that failed after `batches_committed` batches (`rows_committed` rows) had landed."""

    def __init__(
        self,
        message: str,
        *,
        batches_committed: int,
        rows_committed: int,
        is_transient: bool,
        retry_after: float | None,
    ):
        super().__init__(
            message,
            is_transient=is_transient,
            retry_after=retry_after,
            code="PZ0501",
            batches_committed=batches_committed,
            rows_committed=rows_committed,
        )


class Writer(StrategyWriter):
    """One write of a staged result into one PostgreSQL table, in either tier."""

    # -- native tier --------------------------------------------------------------------------------
    def write_native(self, con: duckdb.DuckDBPyConnection, source: str) -> WriteResult:
        import duckdb

        try:
            columns = []
            for name, typ in describe_types(con, source):
                pg_type, expr = pg_type_for_duckdb(typ)
                columns.append(Column(name, pg_type, expr))
            self._check_columns(columns)
        except duckdb.Error as exc:
            raise self.settings.error(exc, self.where, "PZ0501") from exc
        # the rows are counted by the write, never by a count(*) first: a pipeline streamed into this write
        # is a view, and each read of it computes its query again; an empty replace is refused after its
        # load into the work table, which is dropped (the target untouched)
        strategy = self.output.strategy
        if strategy == "replace":
            return self._replace(columns, lambda table: self._native_insert(con, table, source, columns))
        if strategy == "merge":
            return self._merge(columns, lambda table: self._native_insert(con, table, source, columns))
        return self._append_native(con, source, columns)

    def _select_list(self, columns: list[Column]) -> str:
        """The staged columns as the DuckDB expressions written (casts for types PostgreSQL lacks)."""
        items = []
        for col in columns:
            ref = quote_ident(col.name)
            items.append(f"{col.expr.format(c=ref)} AS {ref}" if col.expr else ref)
        return ", ".join(items)

    def _native_insert(
        self, con: duckdb.DuckDBPyConnection, table: str, source: str, columns: list[Column]
    ) -> int:
        """One DuckDB INSERT into the attached table: the extension streams it with binary COPY, in one
        PostgreSQL transaction. The rows inserted."""
        import duckdb

        names = ", ".join(quote_ident(c.name) for c in columns)
        try:
            with attached(con, self.settings, read_only=False) as alias:
                target = f"{quote_ident(alias)}.{quote_ident(self.schema)}.{quote_ident(table)}"
                con.execute(
                    f"INSERT INTO {target} ({names}) SELECT {self._select_list(columns)} FROM {source}"
                )
                count = con.fetchone()
        except duckdb.Error as exc:
            raise self.settings.error(exc, self.display, "PZ0501") from exc
        return int(count[0]) if count else 0

    def _append_native(
        self, con: duckdb.DuckDBPyConnection, source: str, columns: list[Column]
    ) -> WriteResult:
        """A stored result in batches of `batch_rows` by rowid, each its own transaction; a streamed one (a
        view) in one INSERT."""
        import duckdb

        self._ensure_append_target(columns)
        ranges: list[tuple[int, int] | None] = [None]
        if table_exists(con, source):
            try:
                row = con.execute(f"SELECT min(rowid), max(rowid) FROM {source}").fetchone()
            except duckdb.Error as exc:
                raise self.settings.error(exc, self.where, "PZ0501") from exc
            if row is not None and row[0] is not None:
                low, high = int(row[0]), int(row[1])
                ranges = [
                    (a, min(a + self.batch_rows, high + 1)) for a in range(low, high + 1, self.batch_rows)
                ]
        committed = landed = 0
        names = ", ".join(quote_ident(c.name) for c in columns)
        try:
            with attached(con, self.settings, read_only=False) as alias:
                target = f"{quote_ident(alias)}.{quote_ident(self.schema)}.{quote_ident(self.name)}"
                for span in ranges:
                    where = "" if span is None else f" WHERE rowid >= {span[0]} AND rowid < {span[1]}"
                    con.execute(
                        f"INSERT INTO {target} ({names}) SELECT {self._select_list(columns)} "
                        f"FROM {source}{where}"
                    )
                    count = con.fetchone()
                    committed += 1
                    landed += int(count[0]) if count else 0
                    failpoints.hit("sink.after_batch")
        except (duckdb.Error, PzConnectorError) as exc:
            raise self._append_failed(exc, committed, landed) from exc
        return WriteResult(rows=landed, batches_committed=committed)

    # -- universal tier ---------------------------------------------------------------------------
    def write_batches(self, reader: pa.RecordBatchReader) -> WriteResult:
        schema = reader.schema
        converters: list[Callable[[pa.Array], pa.Array] | None] = []
        columns: list[Column] = []
        try:
            for field in schema:
                pg_type, conv = pg_type_for_arrow(field.type)
                columns.append(Column(field.name, pg_type))
                converters.append(conv)
        except PzConnectorError as exc:
            named = f"column {field.name}: {exc.message}"
            raise PzConnectorError(f"{lead(self.where)}{named}", code="PZ0501") from exc
        self._check_columns(columns)
        stream = _Stream(reader, converters, [c.name for c in columns])
        strategy = self.output.strategy
        if strategy == "replace":
            if not stream.has_rows() and not self.output.allow_empty:
                raise self._refuse_empty()
            return self._replace(columns, lambda table: self._ingest(table, stream.all()))
        if strategy == "merge":
            return self._merge(columns, lambda table: self._ingest(table, stream.all()))
        return self._append_batches(stream, columns)

    def _ingest(self, table: str, batches: pa.RecordBatchReader) -> int:
        """One ADBC bulk ingest (binary COPY) of `batches` into `table`, committed."""
        conn = self.settings.adbc("PZ0501")
        try:
            cur = conn.cursor()
            try:
                count = cur.adbc_ingest(table, batches, mode="append", db_schema_name=self.schema)
                conn.commit()
                return int(count) if count is not None and count >= 0 else 0
            finally:
                with contextlib.suppress(Exception):
                    cur.close()
        except PzConnectorError:
            raise
        except Exception as exc:
            raise self._fail(exc) from exc
        finally:
            with contextlib.suppress(Exception):
                conn.close()

    def _append_batches(self, stream: _Stream, columns: list[Column]) -> WriteResult:
        existing = self._ensure_append_target(columns)
        direct = all(format_name(c.pg_type) == existing[c.name] for c in columns)
        committed = landed = 0
        load = None
        conn = None
        try:
            conn = self.settings.adbc("PZ0501")
            cur = conn.cursor()
            if not direct:
                load = self.work_table("load")
                self._create(load, columns, unlogged=True)
            try:
                for group in stream.groups(self.batch_rows):
                    if direct:
                        count = cur.adbc_ingest(self.name, group, mode="append", db_schema_name=self.schema)
                    else:
                        assert load is not None
                        cur.execute(f"TRUNCATE {self._q(load)}")
                        count = cur.adbc_ingest(load, group, mode="append", db_schema_name=self.schema)
                        names = ", ".join(quote_ident(c.name) for c in columns)
                        casts = ", ".join(f"{quote_ident(c.name)}::{existing[c.name]}" for c in columns)
                        cur.execute(
                            f"INSERT INTO {self.qualified} ({names}) SELECT {casts} FROM {self._q(load)}"
                        )
                    conn.commit()
                    committed += 1
                    landed += int(count) if count is not None and count >= 0 else 0
                    failpoints.hit("sink.after_batch")
            finally:
                with contextlib.suppress(Exception):
                    cur.close()
        except Exception as exc:
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.rollback()
            raise self._append_failed(exc, committed, landed) from exc
        finally:
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()
            if load is not None:
                self._drop(load)
        return WriteResult(rows=landed, batches_committed=committed)

    # -- strategies shared by both tiers ----------------------------------------------------------
    def _ensure_append_target(self, columns: list[Column]) -> dict[str, str]:
        try:
            self._create(self.name, columns, if_not_exists=True)
        except Exception as exc:
            raise self._fail(exc) from exc
        existing = self.target_columns()
        assert existing is not None
        missing = [c.name for c in columns if c.name not in existing]
        if missing:
            raise PzConnectorError(
                f"{lead(self.where)}{self.display} has no column(s) {', '.join(missing)} of the result; "
                "add them to the table or drop them in the pipeline",
                code="PZ0501",
            )
        return existing

    def _append_failed(self, exc: BaseException, committed: int, rows: int) -> AppendFailed:
        err = self._fail(exc)
        return AppendFailed(
            f"{err.message} (append: {committed} batch(es), {rows} row(s) committed before the failure; a "
            "retry sends every row again)",
            batches_committed=committed,
            rows_committed=rows,
            is_transient=err.is_transient,
            retry_after=err.retry_after,
        )


class _Stream:
    """The engine's record batches, converted for ADBC, consumed once: whole or in row-budget groups."""

    def __init__(
        self,
        reader: pa.RecordBatchReader,
        converters: list[Callable[[pa.Array], pa.Array] | None],
        names: list[str],
    ):
        self._iter = iter(reader)
        self._converters = converters
        self._names = names
        import pyarrow as pa

        empty = pa.RecordBatch.from_arrays(
            [pa.array([], type=f.type) for f in reader.schema], schema=reader.schema
        )
        self._schema: pa.Schema = self._convert(empty).schema
        self._first = self._next()

    def _convert(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        import pyarrow as pa

        arrays = [
            conv(col) if conv else col for conv, col in zip(self._converters, batch.columns, strict=True)
        ]
        return pa.RecordBatch.from_arrays(arrays, names=self._names)

    def _next(self) -> pa.RecordBatch | None:
        for batch in self._iter:
            return self._convert(batch)
        return None

    def has_rows(self) -> bool:
        """Whether any row is left; reads ahead past empty batches."""
        while self._first is not None and self._first.num_rows == 0:
            self._first = self._next()
        return self._first is not None

    def _batches(self, budget: int | None) -> Iterator[pa.RecordBatch]:
        taken = 0
        while self._first is not None and (budget is None or taken < budget):
            batch, self._first = self._first, None
            taken += batch.num_rows
            yield batch
            self._first = self._next()

    def _reader(self, budget: int | None) -> pa.RecordBatchReader:
        import pyarrow as pa

        return pa.RecordBatchReader.from_batches(self._schema, self._batches(budget))

    def all(self) -> pa.RecordBatchReader:
        return self._reader(None)

    def groups(self, rows: int) -> Iterator[pa.RecordBatchReader]:
        while self.has_rows():
            yield self._reader(rows)
