"""The mysql connector's source side (MySQL and MariaDB, universal tier).

Before each read, a `LIMIT 0` query through PyMySQL describes the result (and fails fast with a real MySQL
error number: ConnectorX's connection pool would otherwise retry a refused or denied connection for 30 s,
and connectors never retry). The column expressions and the batch conversions are in `types.py`, with the
type mapping table; the ConnectorX read itself is in `cxread.py`.

`partitions: {column, count}` reads MIN/MAX of the (integer) column once and splits [min, max] into `count`
contiguous ranges; NULLs of the column go to partition 0, so every row lands in exactly one partition.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.mysql.cxread import stream
from pipelinez.connectors.mysql.session import connect
from pipelinez.connectors.mysql.settings import (
    CONNECT_SECONDS,
    Settings,
    TableName,
    connector_error,
    quote_ident,
    sql_literal,
)
from pipelinez.connectors.mysql.types import ColumnPlan, SourceField, arrow_schema, plan_column
from pipelinez.connectors.sdk import Connector, ConnectorContext, DatasetRequest, Partition, bounds_predicate
from pipelinez.core.diagnostics import PzConnectorError

if TYPE_CHECKING:
    import pyarrow as pa
    import pymysql
    import pymysql.cursors

# a partition the table's statistics say holds at most this many rows is fetched whole (see _small_parts)
WHOLE_FETCH_ROWS = 200_000


class MySQLSource(Connector):
    """The source half of `MySQLConnector`: describing, partitioning and reading datasets."""

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

    def _connect(
        self, what: str, code: str, *, local_infile: bool = False
    ) -> pymysql.connections.Connection[Any]:
        return connect(self.settings, what, code, local_infile=local_infile)

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
        return stream(self.settings, self.context.note, sql, plans, schema, where, source, whole=whole)

    def fetch_schema(self, dataset: DatasetRequest) -> list[tuple[str, str]]:
        plans = self._plans_for(dataset, "PZ0601")
        return [(plan.name, plan.duckdb) for plan in plans]


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
