"""The mysql connector (MySQL and MariaDB), universal tier only.

Reads: ConnectorX `read_sql(..., return_type="arrow_stream")` yields Arrow record batches straight from the
server; nothing is materialised in Python. Before each read, a `LIMIT 0` query through PyMySQL describes the
result (and fails fast with a real MySQL error number: ConnectorX's connection pool would otherwise retry a
refused or denied connection for 30 s, and connectors never retry). The column expressions and the
batch conversions are in `types.py`, with the type mapping table.

`partitions: {column, count}` reads MIN/MAX of the (integer) column once and splits [min, max] into `count`
contiguous ranges; NULLs of the column go to partition 0, so every row lands in exactly one partition.

Writes (PyMySQL, bulk path LOAD DATA LOCAL INFILE): each Arrow batch is encoded to LOAD DATA's default
tab-separated format with vectorised pyarrow kernels and streamed to a temp file; every ~64 MiB (or
CHUNK_ROWS rows) the file is loaded with one LOAD DATA LOCAL INFILE. LOAD DATA is the fastest load path
MySQL offers; multi-row INSERTs would format every value in Python. With LOCAL, MySQL turns data errors
into warnings, so every load is followed by SHOW WARNINGS and any warning fails the write (rolled back).

Work tables are named `<table head>__pz_<kind>_<run>_<hash>` (cut to 64 characters; the hash is of the full
table name, so two long names sharing a head never share a work table). Replace and merge hold a named
server lock per target (GET_LOCK) while they work, so two pz writers never interleave on one table, and
under it drop the work tables a killed writer left behind.

- replace: CREATE `<table>__pz_tmp_<run>_<hash>` from the Arrow schema, load it, failpoint `sink.before_swap`,
  then one `RENAME TABLE t TO <old>, <tmp> TO t` (atomic in MySQL/MariaDB), then DROP the old table.
  The new table is created from the result's schema: the old table's indexes and grants are not copied.
- merge: load `<table>__pz_tmp_<run>_<hash>`, then in ONE transaction: DELETE target rows whose key is
  flagged by `on_delete`, and INSERT … SELECT … ON DUPLICATE KEY UPDATE when the target has a unique index
  on exactly the keys (the sink creates the target with PRIMARY KEY(keys) when it is missing), else DELETE
  matching keys + INSERT. The `on_delete` column is a control column: it is never written to the target (not
  when the sink creates it, not on insert or update); a target column of that name is left as it is. A NULL
  flag counts as not deleted. DDL auto-commits in MySQL: only the DML is transactional.
- append: each LOAD DATA chunk is one committed batch; a failure raises PzConnectorError with the
  attribute `batches_committed`.

Tables the sink creates use utf8mb4 with a binary, no-pad collation (MariaDB `utf8mb4_nopad_bin`, MySQL 8
`utf8mb4_0900_bin`), so keys compare exactly as in DuckDB. Sessions use time_zone '+00:00'.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import secrets
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.mysql import target_types
from pipelinez.connectors.mysql.settings import (
    CONNECT_SECONDS,
    Settings,
    TableName,
    connector_error,
    is_transient,
    quote_ident,
    sql_literal,
)
from pipelinez.connectors.mysql.types import (
    KEY_BYTES,
    ColumnPlan,
    SourceField,
    arrow_schema,
    convert_batch,
    encode_tsv,
    is_binary_like,
    mysql_column_type,
    plan_column,
    write_lines,
)
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
    bounds_predicate,
)
from pipelinez.core import failpoints
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.native_stderr import Captured, native_stderr

if TYPE_CHECKING:
    import pyarrow as pa
    import pymysql
    import pymysql.cursors

BATCH_ROWS = 65_536  # rows per Arrow batch read from ConnectorX
# a partition the table's statistics say holds at most this many rows is fetched whole (see _small_parts)
WHOLE_FETCH_ROWS = 200_000
CHUNK_BYTES = 64 * 1024 * 1024  # bytes of TSV per LOAD DATA
CHUNK_ROWS = 1_000_000  # rows per LOAD DATA
NARROW_KEY_BYTES = 32  # index bytes reserved per number/date key column (DECIMAL(65) takes 30)
POOL_FAILURE = " ERROR r2d2]"  # how ConnectorX's pool (r2d2) logs a failed connect to stderr
_LOAD_FORMAT = "CHARACTER SET binary FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n'"
_CONNECTION_KEYS = ("host", "port", "database", "user", "password")


class MySQLConnector(Connector):
    def __init__(self, context: ConnectorContext):
        super().__init__(context)
        self._settings: Settings | None = None
        self._plans: dict[str, list[ColumnPlan]] = {}  # source reads' descriptions, by dataset
        self._reads_con: pymysql.connections.Connection[Any] | None = None  # see _read_plans
        self._small: dict[str, bool] = {}  # see _small_parts

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = Settings.from_connection(self.context.connection)
        return self._settings

    # -- static --------------------------------------------------------------------------------------
    @classmethod
    def validate(
        cls,
        connection: dict[str, Any],
        datasets: dict[str, dict[str, Any]],
        outputs: dict[str, dict[str, Any]],
    ) -> list[ConnectorIssue]:
        issues: list[ConnectorIssue] = []
        if connection.get("dsn") is not None:
            for key in _CONNECTION_KEYS:
                if key in connection:
                    issues.append(
                        ConnectorIssue(f"connection has both dsn and {key}; give one or the other", (key,))
                    )
            dsn = str(connection["dsn"])
            if "{{" not in dsn and not re.match(r"^(mysql|mariadb)://", dsn):
                issues.append(
                    ConnectorIssue("connection dsn must start with mysql:// (or mariadb://)", ("dsn",))
                )
        elif not connection.get("host"):
            issues.append(ConnectorIssue("connection needs host (or a dsn)", ()))
        for name, block in datasets.items():
            has_table, has_query = "table" in block, "query" in block
            if has_table == has_query:
                issues.append(
                    ConnectorIssue(
                        "dataset needs exactly one of table or query"
                        if not has_table
                        else "dataset has both table and query; keep one",
                        (),
                        "dataset",
                        name,
                    )
                )
            issues += _name_issues(block.get("table"), "dataset", name)
            if has_query and not re.match(r"^\s*(\(|select\b|with\b)", str(block["query"]), re.IGNORECASE):
                issues.append(
                    ConnectorIssue(
                        "dataset query must be a SELECT (or WITH … SELECT) statement",
                        ("query",),
                        "dataset",
                        name,
                    )
                )
        for name, block in outputs.items():
            issues += _name_issues(block.get("table", name), "output", name)  # the name is the default
        return issues

    @classmethod
    def output_target(
        cls, project_dir: Path, connection: dict[str, Any], output: str, options: dict[str, Any]
    ) -> OutputTarget | None:
        """Server (host, port) and (database, table), case-folded: whether MySQL tells `Orders` from
        `orders` depends on the server's lower_case_table_names, so pz treats them as one table."""
        issue = ""
        try:
            settings = Settings.from_connection(connection)
        except (PzConnectorError, ValueError):
            return None  # tier 3 reports it
        try:
            table = TableName.parse(str(options.get("table") or output))
        except PzConnectorError as exc:
            if "table" in options:
                return None  # tier 3 reports the table: key
            # the output's own name is the table: refused here, not when the write runs (too long...)
            issue, table = exc.message.removeprefix("table: "), TableName(None, output)
        database = (table.database or settings.database or "").lower()
        host = str(settings.host or "localhost").lower()
        return OutputTarget(
            ("mysql", host, str(settings.port)),
            (database, table.table.lower()),
            f"table {database}.{table.table} on {host}:{settings.port}",
            issue=issue,
        )

    # -- connections -------------------------------------------------------------------------------------
    def _connect(
        self, what: str, code: str, *, local_infile: bool = False
    ) -> pymysql.connections.Connection[Any]:
        import pymysql

        settings = self.settings
        try:
            con = pymysql.connect(**settings.pymysql_kwargs(local_infile=local_infile))
        except pymysql.MySQLError as exc:
            raise connector_error(
                settings, f"{what}: cannot connect to {settings.describe()}", exc, code=code
            ) from None
        try:
            with con.cursor() as cur:
                for statement in settings.session_statements():
                    cur.execute(statement)
        except pymysql.MySQLError as exc:
            con.close()
            raise connector_error(settings, f"{what}: session setup failed", exc, code=code) from None
        # connected and answering: from here a query may take as long as it takes (a big LOAD DATA, MERGE)
        con._read_timeout = con._write_timeout = None  # type: ignore[attr-defined]
        return con

    # -- source ------------------------------------------------------------------------------------------
    def _relation(self, dataset: DatasetRequest) -> str:
        options = dataset.options
        if options.get("table"):
            return TableName.parse(str(options["table"])).sql()
        query = str(options.get("query") or "").strip().rstrip(";").strip()
        if not query:
            raise PzConnectorError(f"dataset '{dataset.name}' needs table or query", code="PZ0302")
        return f"({query}) AS `_pz_q`"

    def _what(self, dataset: DatasetRequest) -> str:
        return f"source '{self.context.instance}' dataset '{dataset.name}'"

    def _describe(self, cur: pymysql.cursors.Cursor, dataset: DatasetRequest) -> list[ColumnPlan]:
        cur.execute(f"SELECT * FROM {self._relation(dataset)} LIMIT 0")
        fields = getattr(getattr(cur, "_result", None), "fields", None) or []
        found = [
            SourceField(
                str(f.name),
                int(f.type_code),
                int(f.length or 0),
                int(getattr(f, "scale", 0) or 0),
                int(f.flags or 0),
                int(f.charsetnr or 0),
            )
            for f in fields
        ]
        seen: set[str] = set()
        for field in found:
            if field.name.lower() in seen:
                raise PzConnectorError(
                    f"{self._what(dataset)}: the result has two columns named '{field.name}'; "
                    "alias them apart in the query",
                    code="PZ0505",
                )
            seen.add(field.name.lower())
        if dataset.columns:
            by_name = {field.name.lower(): field for field in found}
            missing = [name for name in dataset.columns if name.lower() not in by_name]
            if missing:
                raise PzConnectorError(
                    f"{self._what(dataset)}: declared column(s) {', '.join(missing)} not in the source "
                    f"(it has: {', '.join(f.name for f in found)})",
                    code="PZ0603",
                )
            found = [by_name[name.lower()] for name in dataset.columns]
        return [plan_column(field, dataset.columns) for field in found]

    def _plans_for(self, dataset: DatasetRequest, code: str) -> list[ColumnPlan]:
        import pymysql

        con = self._connect(self._what(dataset), code)
        try:
            with con.cursor() as cur:
                return self._describe(cur, dataset)
        except pymysql.MySQLError as exc:
            raise connector_error(
                self.settings,
                f"{self._what(dataset)}: cannot read the source",
                exc,
                code="PZ0602" if _number(exc) in (1146, 1049) else code,
            ) from None
        finally:
            con.close()

    def _read_plans(self, dataset: DatasetRequest) -> list[ColumnPlan]:
        """The plans of a source read. A partition worker reads many partitions through one connector: the
        dataset is described once, through a PyMySQL connection the connector keeps, and every later read
        only pings that connection first. The ping keeps the fail-fast the describe gave each read (a server
        that went away is reported at once, not after ConnectorX's pool retried for 30 s); a connection
        whose ping fails is dropped and a new one opened (which fails fast when the server is down)."""
        import pymysql

        what = self._what(dataset)
        con = self._reads_con
        if con is not None:
            try:
                con._read_timeout = con._write_timeout = CONNECT_SECONDS  # type: ignore[attr-defined]
                con.ping(reconnect=False)
                con._read_timeout = con._write_timeout = None  # type: ignore[attr-defined]
            except Exception:
                self._drop_reads_con()
                con = None
        if con is None:
            con = self._connect(what, "PZ0505")
            try:
                con.autocommit(True)  # kept between reads: it must hold no transaction (nor metadata lock)
            except BaseException:
                con.close()
                raise
            self._reads_con = con
        key = repr((dataset.name, sorted(dataset.options.items(), key=lambda kv: kv[0]), dataset.columns))
        if key not in self._plans:
            try:
                with con.cursor() as cur:
                    self._plans[key] = self._describe(cur, dataset)
            except pymysql.MySQLError as exc:
                self._drop_reads_con()
                raise connector_error(
                    self.settings,
                    f"{what}: cannot read the source",
                    exc,
                    code="PZ0602" if _number(exc) in (1146, 1049) else "PZ0505",
                ) from None
            except BaseException:
                self._drop_reads_con()
                raise
        return self._plans[key]

    def _small_parts(self, dataset: DatasetRequest) -> bool:
        """Whether the dataset's partitions are small: the optimizer's row estimate for the whole dataset
        (EXPLAIN: the product of its row estimates, an upper bound for joins), over the partition count, is
        at most WHOLE_FETCH_ROWS. Such a partition is fetched whole, not streamed: ConnectorX's streaming
        reader holds Python's GIL while it waits for the server's next batch, so streamed partitions would
        wait for the server one at a time, whatever max_concurrency says; a whole fetch waits with the GIL
        released. Large partitions, and a dataset EXPLAIN cannot estimate, stream, so memory stays bounded
        by the batch size. Asked once per connector (per partition worker)."""
        import pymysql

        spec = dataset.options.get("partitions")
        if not spec:
            return False
        key = repr((dataset.name, sorted(dataset.options.items(), key=lambda kv: kv[0])))
        if key not in self._small:
            con = self._reads_con
            estimate: int | None = None
            if con is not None:
                try:
                    with con.cursor() as cur:
                        cur.execute(f"EXPLAIN SELECT 1 FROM {self._relation(dataset)}")
                        names = [d[0].lower() for d in cur.description or ()]
                        rows = [r[names.index("rows")] for r in cur.fetchall()] if "rows" in names else []
                    if rows:
                        estimate = 1
                        for value in rows:
                            estimate = min(estimate * max(1, int(value or 1)), 1 << 62)
                except (pymysql.MySQLError, ValueError, TypeError):  # no estimate: stream
                    estimate = None
            count = max(1, int(dict(spec).get("count", 1)))
            self._small[key] = estimate is not None and estimate <= count * WHOLE_FETCH_ROWS
        return self._small[key]

    def _drop_reads_con(self) -> None:
        con, self._reads_con = self._reads_con, None
        if con is not None:
            with contextlib.suppress(Exception):
                con.close()

    def close(self) -> None:
        self._drop_reads_con()

    def partitions(self, dataset: DatasetRequest) -> list[Partition]:
        spec = dataset.options.get("partitions")
        if not spec:
            return [Partition(0, "all")]
        import pymysql

        column = str(spec["column"])
        count = int(spec["count"])
        bounded = self._bounds_where(dataset, self._read_plans(dataset))
        con = self._reads_con
        assert con is not None
        try:
            with con.cursor() as cur:
                col = quote_ident(column)
                where = f" WHERE {bounded}" if bounded else ""
                cur.execute(f"SELECT MIN({col}), MAX({col}) FROM {self._relation(dataset)}{where}")
                row = cur.fetchone()
        except pymysql.MySQLError as exc:
            self._drop_reads_con()
            raise connector_error(
                self.settings, f"{self._what(dataset)}: cannot compute partition bounds", exc, code="PZ0505"
            ) from None
        low, high = (row or (None, None))[:2]
        if low is None or high is None:
            return [Partition(0, f"{column}: all (no bounds)", {"column": column, "all": True})]
        low, high = _integral(low, column, self._what(dataset)), _integral(high, column, self._what(dataset))
        span = high - low + 1
        n = max(1, min(count, span))
        bounds = [low + (span * i) // n for i in range(n)] + [high]
        parts = []
        for i in range(n):
            last = i == n - 1
            lower, upper = bounds[i], bounds[i + 1]
            text = f"{column} in [{lower}, {upper}{']' if last else ')'}" + (" or NULL" if i == 0 else "")
            parts.append(
                Partition(
                    i, text, {"column": column, "lower": lower, "upper": upper, "last": last, "nulls": i == 0}
                )
            )
        return parts

    @staticmethod
    def _partition_where(partition: Partition) -> str:
        spec = partition.spec
        if not spec or spec.get("all"):
            return ""
        col = quote_ident(str(spec["column"]))
        lower, upper = int(spec["lower"]), int(spec["upper"])
        cond = f"({col} >= {lower} AND {col} {'<=' if spec.get('last') else '<'} {upper})"
        if spec.get("nulls"):
            cond = f"({cond} OR {col} IS NULL)"
        return cond

    def _bounds_where(self, dataset: DatasetRequest, plans: list[ColumnPlan]) -> str:
        """The incremental bounds as a server-side predicate, each literal CAST to the cursor's type."""
        bounds = dataset.bounds
        if not bounds.incremental:
            return ""
        plan = next((p for p in plans if p.name.lower() == str(bounds.cursor).lower()), None)
        cast = _cursor_cast(plan.duckdb) if plan is not None else None
        if plan is None or cast is None:
            found = "not a column of the dataset" if plan is None else f"of type {plan.duckdb}"
            raise PzConnectorError(
                f"{self._what(dataset)}: the cursor column '{bounds.cursor}' is {found}; a cursor needs an "
                "integer, decimal, date or datetime/timestamp column",
                code="PZ0505",
            )
        col = quote_ident(plan.name)
        zoned = plan.duckdb.upper() == "TIMESTAMP WITH TIME ZONE"  # TIMESTAMP: read in the session's UTC
        return bounds_predicate(
            col, bounds, lambda text: f"CAST({sql_literal(_utc_naive(text) if zoned else text)} AS {cast})"
        )

    def _read_where(self, dataset: DatasetRequest, partition: Partition, plans: list[ColumnPlan]) -> str:
        parts = [p for p in (self._partition_where(partition), self._bounds_where(dataset, plans)) if p]
        return f" WHERE {' AND '.join(parts)}" if parts else ""

    def extract_batches(self, dataset: DatasetRequest, partition: Partition) -> Iterator[pa.RecordBatch]:
        plans = self._read_plans(dataset)
        select = ", ".join(f"{plan.select_sql} AS {quote_ident(plan.name)}" for plan in plans)
        source = f"{self._relation(dataset)}{self._read_where(dataset, partition, plans)}"
        sql = f"SELECT {select} FROM {source}"
        schema = arrow_schema(plans)
        where = self._what(dataset)
        whole = bool(partition.spec) and self._small_parts(dataset)
        return self._stream(sql, plans, schema, where, source, whole=whole)

    def _impossible_dates(self, plans: list[ColumnPlan], source: str, where: str) -> list[str]:
        """The date/datetime/timestamp columns of `source` holding a date no calendar has (a zero date
        '0000-00-00', a zero month or day, an invalid date). Asked only after the reader failed, so a
        healthy read pays nothing; [] when the question itself fails."""
        dated = [p for p in plans if p.duckdb.startswith(("DATE", "TIMESTAMP"))]
        if not dated:
            return []
        tests = ", ".join(
            f"COALESCE(SUM({p.select_sql} IS NOT NULL AND (MONTH({p.select_sql}) = 0 OR "
            f"DAYOFMONTH({p.select_sql}) = 0 OR LAST_DAY({p.select_sql}) IS NULL)), 0)"
            for p in dated
        )
        try:
            con = self._connect(where, "PZ0505")
            try:
                with con.cursor() as cur:
                    cur.execute(f"SELECT {tests} FROM {source}")
                    row = cur.fetchone() or ()
            finally:
                con.close()
        except Exception:  # the diagnosis is best effort: the read has failed either way
            return []
        return [p.name for p, hits in zip(dated, row, strict=False) if hits]

    def _stream(
        self,
        sql: str,
        plans: list[ColumnPlan],
        schema: pa.Schema,
        where: str,
        source: str,
        *,
        whole: bool = False,
    ) -> Iterator[pa.RecordBatch]:
        """The rows of `sql` as converted batches: streamed (ConnectorX's arrow_stream), or, `whole`, fetched
        in one call that waits for the server with the GIL released (see _small_parts)."""
        reader: Any = None
        # ConnectorX's producer thread may panic at any moment while the stream is alive (between two
        # batches too), printing to fd 2: fd 2 stays captured until the reader is gone
        alive = contextlib.ExitStack()
        alive.enter_context(native_stderr())
        try:
            reader = self._start_read(sql, where, whole=whole)
            yielded = False
            while (batch := _next_batch(reader)) is not None:
                if batch.num_rows:
                    yielded = True
                    yield convert_batch(batch, plans, schema, where)
            if not yielded:  # an empty read still tells the engine its columns
                yield _empty(schema)
        except PzConnectorError:
            raise
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except (
            BaseException
        ) as exc:  # ConnectorX raises RuntimeError, and pyo3 PanicException (a BaseException)
            raise self._read_error(exc, plans, source, where) from None
        finally:
            _close_reader(reader)
            reader = None  # the stream and its producer thread go here, then fd 2 is given back
            alive.close()

    def _start_read(self, sql: str, where: str, *, whole: bool) -> Any:
        """ConnectorX's reader of `sql`: of the rows streamed (arrow_stream), or, `whole`, of the rows fetched
        in one call. The pool's connection retries print to fd 2 as well: captured on their own while the
        read starts, to be reported as notes (see _report_pool_retries)."""
        import connectorx as cx

        settings = self.settings
        reader: Any = None
        captured: Captured | None = None
        try:
            with native_stderr() as captured:
                if whole:
                    fetched = cx.read_sql(
                        settings.connectorx_url(),
                        sql,
                        return_type="arrow",
                        pre_execution_query=settings.session_statements(),
                    )
                    reader = fetched.to_reader(max_chunksize=BATCH_ROWS)
                else:
                    reader = cx.read_sql(
                        settings.connectorx_url(),
                        sql,
                        return_type="arrow_stream",
                        batch_size=BATCH_ROWS,
                        pre_execution_query=settings.session_statements(),
                    )
        finally:
            if captured is not None:
                try:
                    self._report_pool_retries(captured.text, where)
                except BaseException:
                    _close_reader(reader)  # the caller never gets the reader to close
                    reader = None
                    raise
        return reader

    def _read_error(
        self, exc: BaseException, plans: list[ColumnPlan], source: str, where: str
    ) -> PzConnectorError:
        """The error a failed ConnectorX read of `source` is reported as."""
        settings = self.settings
        if type(exc).__name__ == "PanicException" and is_transient(exc):
            # ConnectorX panics when the server connection is lost mid-read ("cx writer failed: ...
            # Connection reset by peer"): a lost connection, not a value it cannot convert
            return connector_error(settings, f"{where}: read failed", exc, code="PZ0505")
        if type(exc).__name__ == "PanicException":
            bad = self._impossible_dates(plans, source, where)
            if bad:
                return PzConnectorError(
                    f"column(s) {', '.join(bad)} hold dates no calendar has (zero dates such as "
                    "'0000-00-00', a zero month or day), which the staging database cannot hold; nothing "
                    "was staged. Read the dataset with a query: that maps them (e.g. "
                    f"NULLIF({bad[0]}, '0000-00-00'), or a WHERE that leaves them out)",
                    code="PZ0518",
                )
            return PzConnectorError(
                settings.redact(
                    f"{where}: the MySQL reader cannot convert a value: {_first_line(exc)}; zero dates "
                    "('0000-00-00') and values outside the documented types fail; select them through a "
                    "query: with NULLIF/CAST"
                ),
                code="PZ0505",
            )
        return connector_error(settings, f"{where}: read failed", exc, code="PZ0505")

    def _report_pool_retries(self, stderr: str, where: str) -> None:
        """ConnectorX builds an r2d2 connection pool, which retries a failed connect on its own (after 0.4s,
        then doubling, for up to 30s) and logs each failure to stderr. pz cannot switch that off (no setting
        reaches the pool), so it makes every such hidden retry visible as a note of the attempt."""
        failures = [line for line in stderr.splitlines() if POOL_FAILURE in line]
        if not failures:
            return
        cause = failures[-1].split(POOL_FAILURE, 1)[1].strip()
        self.context.note(
            self.settings.redact(
                f"{where}: ConnectorX's connection pool retried connecting on its own {len(failures)} "
                f"time(s) within this attempt (last failure: {cause[:200]}); a third-party retry pz cannot "
                "switch off, see Resilience > Connectors never retry"
            )
        )

    # -- sink --------------------------------------------------------------------------------------------
    def write_batches(self, output: OutputRequest, reader: pa.RecordBatchReader) -> WriteResult:
        import pymysql

        table = TableName.parse(str(output.options.get("table") or output.name))
        what = f"sink '{self.context.instance}' output '{output.name}' ({table.display()})"
        if output.strategy not in ("replace", "merge", "append"):
            raise PzConnectorError(f"{what}: unknown strategy '{output.strategy}'", code="PZ0305")
        for name in reader.schema.names:
            if len(name) > 64 or not name:
                raise PzConnectorError(
                    f"{what}: column name '{name[:80]}' is not a valid MySQL column name (1-64 characters)",
                    code="PZ0501",
                )
        con = self._connect(what, "PZ0501", local_infile=True)
        writer = _Writer(self.settings, con, table, output, reader, what)
        try:
            if output.strategy == "append":
                return writer.append()
            with writer.locked():
                return writer.replace() if output.strategy == "replace" else writer.merge()
        except pymysql.MySQLError as exc:
            with contextlib.suppress(Exception):
                con.rollback()
            raise connector_error(
                self.settings, f"{what}: {output.strategy} failed", exc, code="PZ0501"
            ) from None
        finally:
            with contextlib.suppress(Exception):
                con.close()

    def target_columns(self, output: OutputRequest) -> list[TargetColumn] | None:
        """Merge and append write into the existing table; replace renames in a table created from the
        result's types, so it keeps nothing of the old definition."""
        if output.strategy == "replace":
            return None
        import pymysql

        table = TableName.parse(str(output.options.get("table") or output.name))
        what = f"sink '{self.context.instance}' output '{output.name}' ({table.display()})"
        con = self._connect(what, "PZ0501")
        db = sql_literal(table.database) if table.database else "DATABASE()"
        try:
            with con.cursor() as cur:
                cur.execute(
                    "SELECT COLUMN_NAME, COLUMN_TYPE, COLLATION_NAME, "
                    "IS_NULLABLE = 'NO' AND COLUMN_DEFAULT IS NULL "
                    "AND EXTRA NOT LIKE '%auto_increment%' AND EXTRA NOT LIKE '%GENERATED%' "
                    "AND EXTRA NOT LIKE '%VIRTUAL%' AND EXTRA NOT LIKE '%STORED%' "
                    f"FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = {db} "
                    f"AND TABLE_NAME = {sql_literal(table.table)} ORDER BY ORDINAL_POSITION"
                )
                rows = cur.fetchall()
        except pymysql.MySQLError as exc:
            raise connector_error(
                self.settings, f"{what}: cannot read the target's columns", exc, code="PZ0501"
            ) from None
        finally:
            con.close()
        if not rows:
            return None
        return target_types.target_columns(
            {str(name): str(kind) for name, kind, _, _ in rows},
            {str(name) for name, _, _, req in rows if req},
            {str(name): None if coll is None else str(coll) for name, _, coll, _ in rows},
        )

    # -- tier 5 -------------------------------------------------------------------------------------------
    def check_connection(self) -> None:
        import pymysql

        con = self._connect(f"mysql '{self.context.instance}'", "PZ0601")
        try:
            with con.cursor() as cur:
                cur.execute("SELECT 1")
        except pymysql.MySQLError as exc:
            raise connector_error(
                self.settings, f"mysql '{self.context.instance}': connection check failed", exc, code="PZ0601"
            ) from None
        finally:
            con.close()

    def fetch_schema(self, dataset: DatasetRequest) -> list[tuple[str, str]]:
        plans = self._plans_for(dataset, "PZ0601")
        return [(plan.name, plan.duckdb) for plan in plans]

    def probe_output(self, output: OutputRequest) -> None:
        import pymysql

        table = TableName.parse(str(output.options.get("table") or output.name))
        what = f"sink '{self.context.instance}' output '{output.name}' ({table.display()})"
        con = self._connect(what, "PZ0606")
        tag = secrets.token_hex(4)
        probe, renamed = table.sibling(f"__pz_probe_{tag}"), table.sibling(f"__pz_probe2_{tag}")
        try:
            with con.cursor() as cur:
                cur.execute(f"CREATE TABLE {probe.sql()} (x INT)")
                try:
                    cur.execute(f"INSERT INTO {probe.sql()} VALUES (1)")
                    con.commit()
                    cur.execute(f"RENAME TABLE {probe.sql()} TO {renamed.sql()}")
                    cur.execute(f"DROP TABLE {renamed.sql()}")
                finally:
                    cur.execute(f"DROP TABLE IF EXISTS {probe.sql()}")
        except pymysql.MySQLError as exc:
            raise connector_error(
                self.settings,
                f"{what}: cannot create, rename and drop tables next to the target",
                exc,
                code="PZ0606",
            ) from None
        finally:
            con.close()


# -- the sink's work ---------------------------------------------------------------------------------------
class _Writer:
    def __init__(
        self,
        settings: Settings,
        con: pymysql.connections.Connection[Any],
        table: TableName,
        output: OutputRequest,
        reader: pa.RecordBatchReader,
        what: str,
    ):
        self.settings = settings
        self.con = con
        self.cur = con.cursor()
        self.table = table
        self.output = output
        self.reader = reader
        self.schema = reader.schema
        self.what = what
        run = output.run_id or secrets.token_hex(6)
        self.tmp = table.work_table("tmp", run)
        self.old = table.work_table("old", run)

    # helpers
    def exec(self, sql: str) -> int:
        return int(self.cur.execute(sql))

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """A named server lock on the target for pz writers (GET_LOCK, released with the session); under
        it the work tables a killed writer left behind are dropped."""
        db = sql_literal(self.table.database) if self.table.database else "DATABASE()"
        name = f"CONCAT('pz_', SHA1(CONCAT({db}, '.', {sql_literal(self.table.table)})))"
        self.exec(f"SELECT GET_LOCK({name}, 0)")
        row = self.cur.fetchone()
        if not (row and row[0] == 1):
            raise PzConnectorError(
                f"{self.what}: another pz writer is writing this table right now",
                is_transient=True,
                retry_after=5.0,
                code="PZ0501",
            )
        try:
            self.sweep()
            yield
        finally:
            with contextlib.suppress(Exception):
                self.exec(f"SELECT RELEASE_LOCK({name})")
                self.cur.fetchall()

    def sweep(self) -> None:
        """Drop this target's work tables of earlier runs (a killed run's `__pz_tmp_`/`__pz_old_`)."""
        db = sql_literal(self.table.database) if self.table.database else "DATABASE()"
        self.exec(
            f"SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = {db} "
            f"AND TABLE_NAME LIKE {sql_literal('%' + self.table.digest())}"
        )
        for (name,) in self.cur.fetchall():
            if self.table.is_work_table(str(name)):
                self.exec(f"DROP TABLE IF EXISTS {TableName(self.table.database, str(name)).sql()}")

    def exists(self, table: TableName) -> bool:
        db = sql_literal(table.database) if table.database else "DATABASE()"
        self.exec(
            f"SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = {db} "
            f"AND TABLE_NAME = {sql_literal(table.table)}"
        )
        row = self.cur.fetchone()
        return bool(row and row[0])

    def target_columns(self) -> dict[str, str]:
        db = sql_literal(self.table.database) if self.table.database else "DATABASE()"
        self.exec(
            f"SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = {db} "
            f"AND TABLE_NAME = {sql_literal(self.table.table)} ORDER BY ORDINAL_POSITION"
        )
        return {str(name).lower(): str(kind) for name, kind in self.cur.fetchall()}

    def collation(self) -> str:
        self.exec("SELECT VERSION()")
        row = self.cur.fetchone()
        version = str(row[0]) if row else ""
        if "mariadb" in version.lower():
            return "utf8mb4_nopad_bin"
        major = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
        if major and tuple(int(x) for x in major.groups()) >= (8, 0, 17):
            return "utf8mb4_0900_bin"
        return "utf8mb4_bin"

    def create(
        self,
        table: TableName,
        keys: tuple[str, ...] = (),
        index: tuple[str, ...] = (),
        without: str | None = None,
    ) -> None:
        """CREATE `table` from the Arrow schema (less the column `without`, merge's control column). `keys`
        become the PRIMARY KEY (NOT NULL, text/binary keys as VARCHAR/VARBINARY); `index` gets a plain index
        (prefix-indexed when text/binary), used by merge's temp table so the join to the target never scans
        it per row."""
        lowered = {k.lower() for k in keys}
        text_keys = [
            f for f in self.schema if f.name.lower() in lowered and mysql_column_type(f.type) == "LONGTEXT"
        ]
        binary_keys = [f for f in self.schema if f.name.lower() in lowered and is_binary_like(f.type)]
        wide_keys = len(text_keys) + len(binary_keys)
        key_chars = _chars_per_wide(768, wide_keys, len(lowered) - wide_keys)
        columns = []
        for f in self.schema:
            if without is not None and f.name.lower() == without.lower():
                continue
            is_key = f.name.lower() in lowered
            kind = mysql_column_type(f.type, key=is_key, key_chars=key_chars)
            columns.append(f"{quote_ident(f.name)} {kind}{' NOT NULL' if is_key else ' NULL'}")
        if keys:
            columns.append(f"PRIMARY KEY ({', '.join(quote_ident(k) for k in self._schema_names(keys))})")
        if index:
            by_lower = {f.name.lower(): f for f in self.schema}
            wide = [k for k in index if k.lower() in by_lower and _is_wide(by_lower[k.lower()].type)]
            prefix = _chars_per_wide(255, len(wide), len(index) - len(wide))
            parts = [
                quote_ident(name) + (f"({prefix})" if k in wide else "")
                for k, name in zip(index, self._schema_names(index), strict=True)
            ]
            columns.append(f"INDEX `pz_merge_keys` ({', '.join(parts)})")
        self.exec(
            f"CREATE TABLE {table.sql()} ({', '.join(columns)}) ENGINE=InnoDB "
            f"DEFAULT CHARSET=utf8mb4 COLLATE={self.collation()}"
        )

    def _schema_names(self, names: tuple[str, ...]) -> list[str]:
        by_lower = {n.lower(): n for n in self.schema.names}
        return [by_lower.get(n.lower(), n) for n in names]

    def written_names(self) -> list[str]:
        """The result columns written to the target: all of them, but merge's `on_delete` control column."""
        flag = self.output.on_delete
        if self.output.strategy != "merge" or not flag:
            return list(self.schema.names)
        return [n for n in self.schema.names if n.lower() != flag.lower()]

    def check_target_columns(self) -> None:
        have = self.target_columns()
        missing = [n for n in self.written_names() if n.lower() not in have]
        if missing:
            raise PzConnectorError(
                f"{self.what}: the target table has no column(s) {', '.join(missing)}; "
                "add them (ALTER TABLE) or write with strategy replace",
                code="PZ0501",
            )

    def load(self, into: TableName, on_chunk: Callable[[int], None] | None = None) -> int:
        """Stream the reader into `into` through LOAD DATA LOCAL INFILE, one load per chunk. `on_chunk` runs
        after each load (append commits there). Returns the rows loaded."""
        columns = ", ".join(quote_ident(n) for n in self.schema.names)
        fd, path = tempfile.mkstemp(prefix="pz_mysql_", suffix=".tsv")
        total = 0
        try:
            with os.fdopen(fd, "wb") as out:
                pending_rows = pending_bytes = 0
                for batch in self.reader:
                    if not batch.num_rows:
                        continue
                    pending_bytes += write_lines(encode_tsv(batch), out)
                    pending_rows += batch.num_rows
                    if pending_bytes >= CHUNK_BYTES or pending_rows >= CHUNK_ROWS:
                        total += self._load_file(out, path, into, columns, pending_rows)
                        pending_rows = pending_bytes = 0
                        if on_chunk:
                            on_chunk(total)
                if pending_rows:
                    total += self._load_file(out, path, into, columns, pending_rows)
                    if on_chunk:
                        on_chunk(total)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
        return total

    def _load_file(self, out: Any, path: str, into: TableName, columns: str, rows: int) -> int:
        out.flush()
        loaded = self.exec(
            f"LOAD DATA LOCAL INFILE {sql_literal(path)} INTO TABLE {into.sql()} {_LOAD_FORMAT} ({columns})"
        )
        self.exec("SHOW WARNINGS LIMIT 3")
        warnings = self.cur.fetchall()
        if warnings:
            self.con.rollback()
            shown = "; ".join(f"{level} {code}: {message}" for level, code, message in warnings)
            raise PzConnectorError(
                self.settings.redact(
                    f"{self.what}: the server changed or refused values while loading ({shown})"
                ),
                code="PZ0501",
            )
        if loaded != rows:
            self.con.rollback()
            raise PzConnectorError(f"{self.what}: loaded {loaded} rows of {rows}", code="PZ0501")
        out.seek(0)
        out.truncate()
        return rows

    def drop(self, table: TableName) -> None:
        with contextlib.suppress(Exception):
            self.con.rollback()
            self.exec(f"DROP TABLE IF EXISTS {table.sql()}")

    # strategies
    def replace(self) -> WriteResult:
        self.exec(f"DROP TABLE IF EXISTS {self.tmp.sql()}")
        self.create(self.tmp)
        try:
            rows = self.load(self.tmp)
            self.con.commit()
            if rows == 0 and not self.output.allow_empty:
                raise PzConnectorError(
                    f"{self.what}: the result has no rows; replace would empty the table "
                    "(set allow_empty: true to allow it)",
                    code="PZ0509",
                )
            failpoints.hit("sink.before_swap")
            if self.exists(self.table):
                self.exec(f"DROP TABLE IF EXISTS {self.old.sql()}")
                target, old, tmp = self.table.sql(), self.old.sql(), self.tmp.sql()
                self.exec(f"RENAME TABLE {target} TO {old}, {tmp} TO {target}")
                self.exec(f"DROP TABLE IF EXISTS {self.old.sql()}")
            else:
                self.exec(f"RENAME TABLE {self.tmp.sql()} TO {self.table.sql()}")
        except BaseException:
            self.drop(self.tmp)
            raise
        return WriteResult(rows)

    def merge(self) -> WriteResult:
        keys = tuple(self.output.keys)
        if not keys:
            raise PzConnectorError(f"{self.what}: strategy merge needs keys", code="PZ0305")
        names = {n.lower(): n for n in self.schema.names}
        missing = [k for k in keys if k.lower() not in names]
        if missing:
            raise PzConnectorError(
                f"{self.what}: merge key(s) {', '.join(missing)} not in the result "
                f"(columns: {', '.join(self.schema.names)})",
                code="PZ0501",
            )
        flag = self.output.on_delete
        if flag:
            if flag.lower() not in names:
                raise PzConnectorError(
                    f"{self.what}: on_delete column '{flag}' not in the result", code="PZ0501"
                )
            import pyarrow as pa

            flag_type = self.schema.field(names[flag.lower()]).type
            if not (pa.types.is_boolean(flag_type) or pa.types.is_integer(flag_type)):
                raise PzConnectorError(
                    f"{self.what}: on_delete column '{flag}' must be boolean, not {flag_type}", code="PZ0501"
                )
            if flag.lower() in {k.lower() for k in keys}:
                raise PzConnectorError(
                    f"{self.what}: on_delete column '{flag}' cannot be a key", code="PZ0501"
                )
        if self.exists(self.table):
            self.check_target_columns()
        else:
            self.create(self.table, keys, without=flag)
        self.exec(f"DROP TABLE IF EXISTS {self.tmp.sql()}")
        self.create(self.tmp, index=keys)
        try:
            rows = self.load(self.tmp)
            self.con.commit()
            failpoints.hit("sink.before_merge")
            rows -= self._merge_dml(keys, flag)
        except BaseException:
            self.drop(self.tmp)
            raise
        self.drop(self.tmp)
        return WriteResult(rows)

    def _has_unique_key(self, keys: tuple[str, ...]) -> bool:
        db = sql_literal(self.table.database) if self.table.database else "DATABASE()"
        self.exec(
            f"SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = {db} "
            f"AND TABLE_NAME = {sql_literal(self.table.table)} AND NON_UNIQUE = 0"
        )
        indexes: dict[str, set[str]] = {}
        for index, column in self.cur.fetchall():
            indexes.setdefault(str(index), set()).add(str(column).lower())
        wanted = {k.lower() for k in keys}
        return any(cols == wanted for cols in indexes.values())

    def _merge_dml(self, keys: tuple[str, ...], flag: str | None) -> int:
        """Upsert the temp table into the target; returns how many of its rows were delete requests."""
        target, tmp = self.table.sql(), self.tmp.sql()
        names = self.written_names()
        cols = [quote_ident(n) for n in names]
        col_list = ", ".join(cols)
        select = ", ".join(f"s.{c}" for c in cols)
        match = " AND ".join(f"t.{quote_ident(k)} <=> s.{quote_ident(k)}" for k in keys)
        flagged_sql = f"COALESCE(s.{quote_ident(flag)}, 0) <> 0" if flag else ""
        keep = f" WHERE NOT ({flagged_sql})" if flag else ""
        upsert = self._has_unique_key(keys)
        flagged = 0
        if flag:
            self.exec(f"SELECT COUNT(*) FROM {tmp} AS s WHERE {flagged_sql}")
            row = self.cur.fetchone()
            flagged = int(row[0]) if row else 0
        self.con.begin()
        if upsert:
            if flag:
                self.exec(f"DELETE t FROM {target} AS t JOIN {tmp} AS s ON {match} WHERE {flagged_sql}")
            lowered = {k.lower() for k in keys}
            updates = [
                f"{c} = VALUES({c})" for n, c in zip(names, cols, strict=True) if n.lower() not in lowered
            ]
            if not updates:  # only keys: a no-op update (a bare `k = k` is ambiguous in INSERT … SELECT)
                first = quote_ident(self._schema_names(keys[:1])[0])
                updates = [f"{first} = VALUES({first})"]
            self.exec(
                f"INSERT INTO {target} ({col_list}) SELECT {select} FROM {tmp} AS s{keep} "
                f"ON DUPLICATE KEY UPDATE {', '.join(updates)}"
            )
        else:
            self.exec(f"DELETE t FROM {target} AS t JOIN {tmp} AS s ON {match}")
            self.exec(f"INSERT INTO {target} ({col_list}) SELECT {select} FROM {tmp} AS s{keep}")
        self.con.commit()
        return flagged

    def append(self) -> WriteResult:
        if self.exists(self.table):
            self.check_target_columns()
        else:
            self.create(self.table)
        committed = 0
        rows = 0

        def commit(total: int) -> None:
            nonlocal committed, rows
            self.con.commit()
            committed += 1
            rows = total
            failpoints.hit("sink.after_batch")

        try:
            self.load(self.table, on_chunk=commit)
        except BaseException as exc:
            with contextlib.suppress(Exception):
                self.con.rollback()
            if isinstance(exc, KeyboardInterrupt | SystemExit | GeneratorExit):
                raise
            import pymysql

            if isinstance(exc, pymysql.MySQLError):
                err = connector_error(self.settings, f"{self.what}: append failed", exc, code="PZ0501")
            elif isinstance(exc, PzConnectorError):
                err = exc
            else:
                err = PzConnectorError(
                    self.settings.redact(f"{self.what}: append failed: {exc}"), code="PZ0501"
                )
            err.message = f"{err.message} ({committed} batch(es), {rows} row(s) committed before the failure)"
            err.args = (err.message,)
            err.batches_committed = committed  # type: ignore[attr-defined]
            err.rows_committed = rows  # type: ignore[attr-defined]
            raise err from exc
        return WriteResult(rows, batches_committed=committed)


def _name_issues(value: object, block: str, name: str) -> list[ConnectorIssue]:
    """A malformed `table:` is refused at validate (tier 3), never repaired."""
    if not isinstance(value, str) or "{{" in value:
        return []
    try:
        TableName.parse(value)
    except PzConnectorError as exc:
        return [ConnectorIssue(exc.message, ("table",), block, name)]
    return []


def _utc_naive(text: str) -> str:
    """A zoned bound (`2024-01-01 10:00:00+00:00`) as the UTC wall time a MySQL/MariaDB DATETIME literal holds
    (MariaDB ignores an offset in a literal)."""
    moment = dt.datetime.fromisoformat(text)
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC).replace(tzinfo=None)
    return moment.isoformat(sep=" ")


def _cursor_cast(duck: str) -> str | None:
    """The MySQL CAST target that types a cursor literal like the column (staged as DuckDB type `duck`)."""
    upper = duck.upper()
    if upper in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT"):
        return "SIGNED"
    if upper in ("UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"):
        return "UNSIGNED"
    if upper.startswith("DECIMAL"):
        return "DECIMAL(65,30)"
    if upper == "DATE":
        return "DATE"
    if upper.startswith("TIMESTAMP"):
        return "DATETIME(6)"
    return None


def _chars_per_wide(cap: int, wide: int, narrow: int) -> int:
    """Characters each of an index's `wide` text/binary columns may use (4 bytes each in utf8mb4) so that
    the index stays within InnoDB's KEY_BYTES, after its `narrow` columns (numbers, dates: at most
    NARROW_KEY_BYTES each) take their share; at most `cap`, at least 16."""
    room = KEY_BYTES - NARROW_KEY_BYTES * narrow
    return max(16, min(cap, room // (4 * max(1, wide))))


def _is_wide(dtype: Any) -> bool:
    """Text and binary columns: LONGTEXT/LONGBLOB in tables the sink creates, indexable only by a prefix."""
    return mysql_column_type(dtype) in ("LONGTEXT", "LONGBLOB", "JSON")


def _number(exc: BaseException) -> int | None:
    args = getattr(exc, "args", ())
    return int(args[0]) if args and isinstance(args[0], int) else None


def _integral(value: Any, column: str, what: str) -> int:
    from decimal import Decimal

    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise PzConnectorError(
            f"{what}: partitions.column '{column}' must be an integer column "
            f"(its bounds are {type(value).__name__})",
            code="PZ0505",
        )
    if isinstance(value, Decimal):
        if value != value.to_integral_value():
            raise PzConnectorError(
                f"{what}: partitions.column '{column}' must be an integer column", code="PZ0505"
            )
        return int(value)
    return value


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    import pyarrow as pa

    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _close_reader(reader: Any) -> None:
    """Close a ConnectorX reader (when there is one and it can be closed); a failing close is ignored."""
    if reader is not None and hasattr(reader, "close"):
        with contextlib.suppress(Exception):
            reader.close()


def _next_batch(reader: Any) -> Any:
    """The reader's next batch (None at the end), with native stderr captured only while Rust runs."""
    with native_stderr():
        try:
            return reader.read_next_batch()
        except StopIteration:
            return None
