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
  one COPY in its own committed transaction. A failure raises `AppendFailed` (a PzConnectorError) whose
  `batches_committed` / `rows_committed` say what landed; the message says it too.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.postgres.settings import Settings, TableRef, lead
from pipelinez.connectors.postgres.source import attached, table_exists
from pipelinez.connectors.postgres.types import describe_types, pg_type_for_arrow, pg_type_for_duckdb
from pipelinez.connectors.sdk import OutputRequest, WriteResult
from pipelinez.core import failpoints
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident

if TYPE_CHECKING:
    import duckdb
    import psycopg
    import pyarrow as pa

APPEND_BATCH_ROWS = 1_000_000
LOCK_TIMEOUT = "30s"
_LOCK_CLASS = 0x507A  # advisory lock class of pz writers ("Pz")
_PRIVILEGES = {"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER", "MAINTAIN"}
_FORMAT_NAMES = {
    "timestamp": "timestamp without time zone",
    "timestamptz": "timestamp with time zone",
    "time": "time without time zone",
    "timetz": "time with time zone",
}


class AppendFailed(PzConnectorError):
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
        super().__init__(message, is_transient=is_transient, retry_after=retry_after, code="PZ0501")
        self.batches_committed = batches_committed
        self.rows_committed = rows_committed


@dataclass(frozen=True)
class Column:
    name: str
    pg_type: str  # as format_type renders it
    expr: str | None = None  # DuckDB expression template over {c} (native), or None


def format_name(pg_type: str) -> str:
    """A type as PostgreSQL's format_type renders it (for comparing with the catalog)."""
    suffix = ""
    base = pg_type
    while base.endswith("[]"):
        base, suffix = base[:-2], suffix + "[]"
    return _FORMAT_NAMES.get(base, base) + suffix


class Writer:
    def __init__(
        self,
        settings: Settings,
        control: psycopg.Connection[Any],
        output: OutputRequest,
        where: str,
        batch_rows: int = APPEND_BATCH_ROWS,
    ):
        self.settings = settings
        self.conn = control
        self.output = output
        self.where = where
        self.batch_rows = max(1, int(batch_rows))
        try:
            ref = TableRef.parse(str(output.options.get("table") or output.name))
        except ValueError as exc:
            raise PzConnectorError(f"{lead(where)}table: {exc}", code="PZ0303") from exc
        schema = ref.schema
        if schema is None:
            row = self._run("SELECT current_schema()").fetchone()
            if row is None or row[0] is None:
                raise PzConnectorError(
                    f"{lead(where)}the connection has no current schema; write schema.table", code="PZ0303"
                )
            schema = str(row[0])
        self.schema, self.name = schema, ref.name
        self.qualified = f"{quote_ident(schema)}.{quote_ident(ref.name)}"
        self.display = f"{schema}.{ref.name}"

    # -- plumbing ---------------------------------------------------------------------------------
    def _run(self, sql: str, params: list[Any] | None = None) -> psycopg.Cursor[Any]:
        try:
            return self.conn.execute(sql, params)
        except Exception as exc:
            raise self.settings.error(exc, self.where, "PZ0501") from exc

    def _fail(self, exc: BaseException) -> PzConnectorError:
        if isinstance(exc, PzConnectorError):
            return exc
        return self.settings.error(exc, self.display, "PZ0501")

    def work_table(self, kind: str) -> str:
        """`<table>__pz_<kind>_<run id>_<hash>`, at most 63 bytes."""
        digest = hashlib.sha1(self.display.encode("utf-8")).hexdigest()[:6]
        run = "".join(ch for ch in (self.output.run_id or secrets.token_hex(4)) if ch.isalnum() or ch in "-_")
        suffix = f"__pz_{kind}_{run[-24:]}_{digest}"
        head = self.name.encode("utf-8")[: 63 - len(suffix.encode("utf-8"))].decode("utf-8", "ignore")
        return head + suffix

    def _work_pattern(self, kind: str) -> tuple[str, str]:
        digest = hashlib.sha1(self.display.encode("utf-8")).hexdigest()[:6]
        return f"__pz_{kind}_", f"_{digest}"

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """A session advisory lock on the target for pz writers; stale work tables are dropped under it."""
        row = self._run(
            "SELECT pg_try_advisory_lock(%s, hashtext(%s))", [_LOCK_CLASS, self.display]
        ).fetchone()
        if not (row and row[0]):
            raise PzConnectorError(
                f"{lead(self.where)}another pz writer is writing {self.display} right now",
                is_transient=True,
                retry_after=5.0,
                code="PZ0501",
            )
        try:
            self._drop_stale()
            yield
        finally:
            with contextlib.suppress(Exception):
                self.conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", [_LOCK_CLASS, self.display])

    def _drop_stale(self) -> None:
        for kind in ("tmp", "load"):
            middle, tail = self._work_pattern(kind)
            rows = self._run(
                "SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
                "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r' "
                "AND strpos(c.relname, %s) > 0 AND right(c.relname, %s) = %s",
                [self.schema, middle, len(tail), tail],
            ).fetchall()
            for (relname,) in rows:
                self._drop(str(relname))

    def _drop(self, name: str) -> None:
        with contextlib.suppress(Exception):
            self.conn.execute(f"DROP TABLE IF EXISTS {quote_ident(self.schema)}.{quote_ident(name)}")

    def _q(self, name: str) -> str:
        return f"{quote_ident(self.schema)}.{quote_ident(name)}"

    def target_columns(self, cur: Any = None) -> dict[str, str] | None:
        """The existing target's columns (name -> format_type), or None when it does not exist."""
        runner = cur if cur is not None else self.conn
        row = runner.execute("SELECT to_regclass(%s)::oid::int8", [self.qualified]).fetchone()
        if row is None or row[0] is None:
            return None
        rows = runner.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_catalog.pg_attribute "
            "WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            [int(row[0])],
        ).fetchall()
        return {str(r[0]): str(r[1]) for r in rows}

    def column_comparisons(self, cur: Any = None) -> dict[str, tuple[str, bool, str]]:
        """Each target column's (type name, deterministic collation, ICU locale or collate), for how the
        target compares its values."""
        runner = cur if cur is not None else self.conn
        row = runner.execute("SELECT to_regclass(%s)::oid::int8", [self.qualified]).fetchone()
        if row is None or row[0] is None:
            return {}
        rows = runner.execute(
            "SELECT a.attname, t.typname, coalesce((to_jsonb(c) ->> 'collisdeterministic')::boolean, true), "
            "coalesce(to_jsonb(c) ->> 'colliculocale', to_jsonb(c) ->> 'colllocale', c.collcollate, '') "
            "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid "
            "LEFT JOIN pg_catalog.pg_collation c ON c.oid = a.attcollation "
            "WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped",
            [int(row[0])],
        ).fetchall()
        return {str(r[0]): (str(r[1]), bool(r[2]), str(r[3] or "")) for r in rows}

    def required_columns(self, cur: Any = None) -> set[str]:
        """The target's columns an insert must give a value: NOT NULL, no default, not identity or
        generated."""
        runner = cur if cur is not None else self.conn
        row = runner.execute("SELECT to_regclass(%s)::oid::int8", [self.qualified]).fetchone()
        if row is None or row[0] is None:
            return set()
        rows = runner.execute(
            "SELECT attname FROM pg_catalog.pg_attribute a WHERE attrelid = %s AND attnum > 0 "
            "AND NOT attisdropped AND attnotnull AND NOT atthasdef "
            "AND coalesce(to_jsonb(a) ->> 'attidentity', '') = '' "
            "AND coalesce(to_jsonb(a) ->> 'attgenerated', '') = ''",
            [int(row[0])],
        ).fetchall()
        return {str(r[0]) for r in rows}

    def _create(
        self,
        name: str,
        columns: list[Column],
        *,
        unlogged: bool = False,
        if_not_exists: bool = False,
        cur: Any = None,
    ) -> None:
        body = ", ".join(f"{quote_ident(c.name)} {c.pg_type}" for c in columns)
        kind = "UNLOGGED TABLE" if unlogged else "TABLE"
        exists = "IF NOT EXISTS " if if_not_exists else ""
        (cur or self.conn).execute(f"CREATE {kind} {exists}{self._q(name)} ({body})")

    def _refuse_empty(self) -> PzConnectorError:
        return PzConnectorError(
            f"{lead(self.where)}the result has no rows, so replace would empty {self.display}; it was left "
            "as it was (set allow_empty: true on the output to allow an empty replace)",
            code="PZ0509",
        )

    def _check_columns(self, columns: list[Column]) -> None:
        names = [c.name for c in columns]
        keys = list(self.output.keys)
        if self.output.strategy == "merge":
            if not keys:
                raise PzConnectorError(f"{lead(self.where)}merge needs keys", code="PZ0305")
            missing = [k for k in keys if k not in names]
            if missing:
                raise PzConnectorError(
                    f"{lead(self.where)}merge key(s) {', '.join(missing)} are not columns of the "
                    f"result (it has: {', '.join(names)})",
                    code="PZ0501",
                )
            flag = self.output.on_delete
            if flag and flag not in names:
                raise PzConnectorError(
                    f"{lead(self.where)}on_delete column {flag} is not a column of the result", code="PZ0501"
                )
            if flag and flag in keys:
                raise PzConnectorError(
                    f"{lead(self.where)}on_delete column {flag} cannot be a key", code="PZ0501"
                )
        if self.output.strategy not in ("replace", "merge", "append"):
            raise PzConnectorError(
                f"{lead(self.where)}unknown strategy '{self.output.strategy}'", code="PZ0305"
            )

    # -- native tier --------------------------------------------------------------------------------
    def write_native(self, con: duckdb.DuckDBPyConnection, source: str) -> WriteResult:
        import duckdb

        try:
            columns = []
            for name, typ in describe_types(con, source):
                pg_type, expr = pg_type_for_duckdb(typ)
                columns.append(Column(name, pg_type, expr))
            self._check_columns(columns)
            row = con.execute(f"SELECT count(*) FROM {source}").fetchone()
            rows = int(row[0]) if row else 0
        except duckdb.Error as exc:
            raise self.settings.error(exc, self.where, "PZ0501") from exc
        strategy = self.output.strategy
        if strategy == "replace":
            if rows == 0 and not self.output.allow_empty:
                raise self._refuse_empty()

            def load_replace(table: str) -> int:
                self._native_insert(con, table, source, columns)
                return rows

            return self._replace(columns, load_replace)
        if strategy == "merge":

            def load_merge(table: str) -> int:
                self._native_insert(con, table, source, columns)
                return rows

            return self._merge(columns, load_merge)
        return self._append_native(con, source, columns, rows)

    def _select_list(self, columns: list[Column]) -> str:
        """The staged columns as the DuckDB expressions written (casts for types PostgreSQL lacks)."""
        items = []
        for col in columns:
            ref = quote_ident(col.name)
            items.append(f"{col.expr.format(c=ref)} AS {ref}" if col.expr else ref)
        return ", ".join(items)

    def _native_insert(
        self, con: duckdb.DuckDBPyConnection, table: str, source: str, columns: list[Column]
    ) -> None:
        """One DuckDB INSERT into the attached table: the extension streams it with binary COPY, in one
        PostgreSQL transaction."""
        import duckdb

        names = ", ".join(quote_ident(c.name) for c in columns)
        try:
            with attached(con, self.settings, read_only=False) as alias:
                target = f"{quote_ident(alias)}.{quote_ident(self.schema)}.{quote_ident(table)}"
                con.execute(
                    f"INSERT INTO {target} ({names}) SELECT {self._select_list(columns)} FROM {source}"
                )
        except duckdb.Error as exc:
            raise self.settings.error(exc, self.display, "PZ0501") from exc

    def _append_native(
        self, con: duckdb.DuckDBPyConnection, source: str, columns: list[Column], rows: int
    ) -> WriteResult:
        import duckdb

        self._ensure_append_target(columns)
        ranges: list[tuple[int, int] | None] = [None]
        if rows and table_exists(con, source):
            row = con.execute(f"SELECT min(rowid), max(rowid) FROM {source}").fetchone()
            assert row is not None
            low, high = int(row[0]), int(row[1])
            ranges = [(a, min(a + self.batch_rows, high + 1)) for a in range(low, high + 1, self.batch_rows)]
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

    def _replace(self, columns: list[Column], load: Callable[[str], int]) -> WriteResult:
        with self.locked():
            tmp = self.work_table("tmp")
            try:
                self._create(tmp, columns)
            except Exception as exc:
                raise self._fail(exc) from exc
            try:
                rows = load(tmp)
                if rows == 0 and not self.output.allow_empty:
                    raise self._refuse_empty()
                failpoints.hit("sink.before_swap")
                self._swap(tmp)
            except BaseException:
                self._drop(tmp)
                raise
        return WriteResult(rows=rows)

    def _swap(self, tmp: str) -> None:
        """One transaction: lock and drop the old table, rename the temp table, re-grant, keep the comment
        and the owner."""
        try:
            with self.conn.transaction():
                cur = self.conn.cursor()
                cur.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                row = cur.execute("SELECT to_regclass(%s)::oid::int8", [self.qualified]).fetchone()
                old = int(row[0]) if row and row[0] is not None else None
                grants: list[str] = []
                owner: str | None = None
                comment: str | None = None
                if old is not None:
                    cur.execute(f"LOCK TABLE {self.qualified} IN ACCESS EXCLUSIVE MODE")
                    grants = self._grants(cur, old, tmp)
                    info = cur.execute(
                        "SELECT pg_get_userbyid(relowner), obj_description(oid, 'pg_class'), "
                        "pg_get_userbyid(relowner) <> current_user FROM pg_catalog.pg_class WHERE oid = %s",
                        [old],
                    ).fetchone()
                    assert info is not None
                    owner = str(info[0]) if info[2] else None
                    comment = None if info[1] is None else str(info[1])
                    cur.execute(f"DROP TABLE {self.qualified}")
                cur.execute(f"ALTER TABLE {self._q(tmp)} RENAME TO {quote_ident(self.name)}")
                for grant in grants:
                    cur.execute(grant)
                if comment is not None:
                    from psycopg import sql

                    cur.execute(
                        sql.SQL("COMMENT ON TABLE {} IS {}").format(
                            sql.SQL(self.qualified), sql.Literal(comment)
                        )
                    )
                if owner is not None:
                    cur.execute("SAVEPOINT pz_owner")
                    try:
                        cur.execute(f"ALTER TABLE {self.qualified} OWNER TO {quote_ident(owner)}")
                    except Exception:  # not a member of the old owner's role: the writer keeps ownership
                        cur.execute("ROLLBACK TO SAVEPOINT pz_owner")
        except PzConnectorError:
            raise
        except Exception as exc:
            raise self._fail(exc) from exc

    def _grants(self, cur: Any, old: int, tmp: str) -> list[str]:
        """GRANT statements that give the new table the old table's table and column privileges."""
        target = self.qualified
        rows = cur.execute(
            "SELECT a.grantee = 0, pg_get_userbyid(a.grantee), a.privilege_type, a.is_grantable "
            "FROM pg_catalog.pg_class c, aclexplode(c.relacl) a WHERE c.oid = %s AND a.grantee <> c.relowner",
            [old],
        ).fetchall()
        out = []
        for public, grantee, privilege, grantable in rows:
            if str(privilege) not in _PRIVILEGES:
                continue
            who = "PUBLIC" if public else quote_ident(str(grantee))
            option = " WITH GRANT OPTION" if grantable else ""
            out.append(f"GRANT {privilege} ON {target} TO {who}{option}")
        cols = cur.execute(
            "SELECT att.attname, a.grantee = 0, pg_get_userbyid(a.grantee), a.privilege_type, a.is_grantable "
            "FROM pg_catalog.pg_attribute att, aclexplode(att.attacl) a "
            "WHERE att.attrelid = %s AND att.attnum > 0 AND NOT att.attisdropped AND att.attacl IS NOT NULL",
            [old],
        ).fetchall()
        new_columns = {
            str(r[0])
            for r in cur.execute(
                "SELECT attname FROM pg_catalog.pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 "
                "AND NOT attisdropped",
                [self._q(tmp)],
            ).fetchall()
        }
        for column, public, grantee, privilege, grantable in cols:
            if str(privilege) not in _PRIVILEGES or str(column) not in new_columns:
                continue
            who = "PUBLIC" if public else quote_ident(str(grantee))
            option = " WITH GRANT OPTION" if grantable else ""
            out.append(f"GRANT {privilege} ({quote_ident(str(column))}) ON {target} TO {who}{option}")
        return out

    def _merge(self, columns: list[Column], load: Callable[[str], int]) -> WriteResult:
        keys = list(self.output.keys)
        flag = self.output.on_delete
        data = [c for c in columns if c.name != flag]
        with self.locked():
            work = self.work_table("load")
            try:
                self._create(work, columns, unlogged=True)
            except Exception as exc:
                raise self._fail(exc) from exc
            try:
                rows = load(work)
                failpoints.hit("sink.before_merge")
                deleted = self._merge_transaction(work, keys, flag, data)
            finally:
                self._drop(work)
        return WriteResult(rows=rows - deleted)

    def _merge_transaction(self, work: str, keys: list[str], flag: str | None, data: list[Column]) -> int:
        """Upsert the work table into the target; returns how many of its rows were delete requests."""
        src = self._q(work)
        flagged = 0
        try:
            with self.conn.transaction():
                cur = self.conn.cursor()
                cur.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                existing = self.target_columns(cur)
                if existing is None:
                    self._create(self.name, data, cur=cur)
                    existing = {c.name: format_name(c.pg_type) for c in data}
                missing = [c.name for c in data if c.name not in existing]
                if missing:
                    raise PzConnectorError(
                        f"{lead(self.where)}{self.display} has no column(s) {', '.join(missing)} of the "
                        "result; add them to the table or drop them in the pipeline",
                        code="PZ0501",
                    )
                self._check_keys(cur, src, keys)
                on = " AND ".join(f"t.{quote_ident(k)} = s.{quote_ident(k)}::{existing[k]}" for k in keys)
                if flag:
                    row = cur.execute(
                        f"SELECT count(*) FROM {src} WHERE {quote_ident(flag)} IS TRUE"
                    ).fetchone()
                    flagged = int(row[0]) if row else 0
                    cur.execute(
                        f"DELETE FROM {self.qualified} AS t USING {src} AS s WHERE {on} "
                        f"AND s.{quote_ident(flag)} IS TRUE"
                    )
                keep = f" WHERE s.{quote_ident(flag)} IS NOT TRUE" if flag else ""
                names = [c.name for c in data]
                cols = ", ".join(quote_ident(n) for n in names)
                vals = ", ".join(f"s.{quote_ident(n)}::{existing[n]}" for n in names)
                others = [n for n in names if n not in keys]
                if self._has_unique_index(cur, keys):
                    action = (
                        (
                            "DO UPDATE SET "
                            + ", ".join(f"{quote_ident(n)} = EXCLUDED.{quote_ident(n)}" for n in others)
                        )
                        if others
                        else "DO NOTHING"
                    )
                    conflict = ", ".join(quote_ident(k) for k in keys)
                    cur.execute(
                        f"INSERT INTO {self.qualified} AS t ({cols}) SELECT {vals} FROM {src} AS s{keep} "
                        f"ON CONFLICT ({conflict}) {action}"
                    )
                elif self.conn.info.server_version >= 150000:
                    update = (
                        (
                            " WHEN MATCHED THEN UPDATE SET "
                            + ", ".join(
                                f"{quote_ident(n)} = s.{quote_ident(n)}::{existing[n]}" for n in others
                            )
                        )
                        if others
                        else ""
                    )
                    cur.execute(
                        f"MERGE INTO {self.qualified} AS t USING (SELECT * FROM {src} AS s{keep}) AS s "
                        f"ON {on}{update} WHEN NOT MATCHED THEN INSERT ({cols}) VALUES ({vals})"
                    )
                else:
                    cur.execute(f"DELETE FROM {self.qualified} AS t USING {src} AS s WHERE {on}")
                    cur.execute(f"INSERT INTO {self.qualified} ({cols}) SELECT {vals} FROM {src} AS s{keep}")
                cur.execute(f"DROP TABLE {src}")
        except PzConnectorError:
            raise
        except Exception as exc:
            raise self._fail(exc) from exc
        return flagged

    def _check_keys(self, cur: Any, src: str, keys: list[str]) -> None:
        nulls = " OR ".join(f"{quote_ident(k)} IS NULL" for k in keys)
        row = cur.execute(f"SELECT count(*) FROM {src} WHERE {nulls}").fetchone()
        if row and row[0]:
            raise PzConnectorError(
                f"{lead(self.where)}{row[0]} row(s) of the result have a NULL merge key ({', '.join(keys)}); "
                "a NULL key never matches, so merge refuses it",
                code="PZ0501",
            )
        group = ", ".join(quote_ident(k) for k in keys)
        row = cur.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {src} GROUP BY {group} HAVING count(*) > 1) d"
        ).fetchone()
        if row and row[0]:
            raise PzConnectorError(
                f"{lead(self.where)}{row[0]} merge key value(s) appear more than once in the result; "
                f"merge needs one row per key ({', '.join(keys)})",
                code="PZ0501",
            )

    def _has_unique_index(self, cur: Any, keys: list[str]) -> bool:
        rows = cur.execute(
            "SELECT array_agg(a.attname::text ORDER BY a.attname) FROM pg_catalog.pg_index i "
            "JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
            "WHERE i.indrelid = to_regclass(%s) AND i.indisunique AND i.indisvalid AND i.indpred IS NULL "
            "AND i.indexprs IS NULL GROUP BY i.indexrelid, i.indnkeyatts HAVING count(*) = i.indnkeyatts",
            [self.qualified],
        ).fetchall()
        wanted = sorted(keys)
        return any(sorted(r[0]) == wanted for r in rows)

    # -- tier 5 -------------------------------------------------------------------------------------
    def probe(self) -> None:
        """Whether this user may create/replace/merge/append the target; every problem at once (PZ0606)."""
        problems: list[str] = []
        row = self._run(
            "SELECT has_schema_privilege(current_user, n.oid, 'CREATE'), has_schema_privilege(current_user, "
            "n.oid, 'USAGE'), current_user FROM pg_catalog.pg_namespace n WHERE n.nspname = %s",
            [self.schema],
        ).fetchone()
        if row is None:
            raise PzConnectorError(
                f"{lead(self.where)}schema {self.schema} does not exist; create it first", code="PZ0606"
            )
        can_create, can_use, user = bool(row[0]), bool(row[1]), str(row[2])
        if not can_use:
            problems.append(f"no USAGE on schema {self.schema}")
        target = self._run(
            "SELECT c.relkind, pg_has_role(current_user, c.relowner, 'USAGE'), "
            "has_table_privilege(current_user, c.oid, 'INSERT'), "
            "has_table_privilege(current_user, c.oid, 'UPDATE'), "
            "has_table_privilege(current_user, c.oid, 'DELETE') FROM pg_catalog.pg_class c WHERE c.oid = "
            "to_regclass(%s)",
            [self.qualified],
        ).fetchone()
        strategy = self.output.strategy
        if target is None:
            if not can_create:
                problems.append(
                    f"no CREATE on schema {self.schema} (the table {self.name} does not exist yet)"
                )
        else:
            relkind, owner, can_insert, can_update, can_delete = target
            if relkind not in ("r", "p"):
                problems.append(f"{self.display} is not a table (relkind {relkind})")
            if strategy == "replace":
                if not owner:
                    problems.append(f"not the owner of {self.display} (replace drops and recreates it)")
                if not can_create:
                    problems.append(f"no CREATE on schema {self.schema} (replace writes a temp table)")
            elif strategy == "merge":
                if not can_create:
                    problems.append(f"no CREATE on schema {self.schema} (merge loads a work table)")
                for ok, what in ((can_insert, "INSERT"), (can_update, "UPDATE")):
                    if not ok:
                        problems.append(f"no {what} on {self.display}")
                if self.output.on_delete and not can_delete:
                    problems.append(f"no DELETE on {self.display} (on_delete)")
            elif not can_insert:
                problems.append(f"no INSERT on {self.display}")
        if problems:
            raise PzConnectorError(
                f"{lead(self.where)}user {user} cannot {strategy} {self.display}: " + "; ".join(problems),
                code="PZ0606",
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
