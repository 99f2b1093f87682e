"""The mysql connector's sink side (PyMySQL, bulk path LOAD DATA LOCAL INFILE).

Each Arrow batch is encoded to LOAD DATA's default tab-separated format with vectorised pyarrow kernels and
streamed to a temp file; every ~64 MiB (or CHUNK_ROWS rows) the file is loaded with one LOAD DATA LOCAL
INFILE. LOAD DATA is the fastest load path MySQL offers; multi-row INSERTs would format every value in
Python. With LOCAL, MySQL turns data errors into warnings, so every load is followed by SHOW WARNINGS and
any warning fails the write (rolled back).

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
- append: each LOAD DATA chunk is one committed batch; a failure raises a `ConnectorError` whose
  `batches_committed` / `rows_committed` say what landed.

Tables the sink creates use utf8mb4 with a binary, no-pad collation (MariaDB `utf8mb4_nopad_bin`, MySQL 8
`utf8mb4_0900_bin`), so keys compare exactly as in DuckDB. Sessions use time_zone '+00:00'.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import tempfile
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.mysql.settings import Settings, TableName, connector_error, quote_ident, sql_literal
from pipelinez.connectors.mysql.types import (
    KEY_BYTES,
    encode_tsv,
    is_binary_like,
    mysql_column_type,
    write_lines,
)
from pipelinez.connectors.sdk import OutputRequest, WriteResult
from pipelinez.connectors.sdk_errors import ConnectorError
from pipelinez.core import failpoints
from pipelinez.core.diagnostics import PzConnectorError

if TYPE_CHECKING:
    import pyarrow as pa
    import pymysql

CHUNK_BYTES = 64 * 1024 * 1024  # bytes of TSV per LOAD DATA
CHUNK_ROWS = 1_000_000  # rows per LOAD DATA
NARROW_KEY_BYTES = 32  # index bytes reserved per number/date key column (DECIMAL(65) takes 30)
_LOAD_FORMAT = "CHARACTER SET binary FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n'"


class Writer:
    """One write of a result into one target table, by strategy (replace, merge, append)."""

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
            raise ConnectorError.after_commits(
                err,
                batches_committed=committed,
                rows_committed=rows,
                message=f"{err.message} ({committed} batch(es), {rows} row(s) committed before the failure)",
            ) from exc
        return WriteResult(rows, batches_committed=committed)


def _chars_per_wide(cap: int, wide: int, narrow: int) -> int:
    """Characters each of an index's `wide` text/binary columns may use (4 bytes each in utf8mb4) so that
    the index stays within InnoDB's KEY_BYTES, after its `narrow` columns (numbers, dates: at most
    NARROW_KEY_BYTES each) take their share; at most `cap`, at least 16."""
    room = KEY_BYTES - NARROW_KEY_BYTES * narrow
    return max(16, min(cap, room // (4 * max(1, wide))))


def _is_wide(dtype: Any) -> bool:
    """Text and binary columns: LONGTEXT/LONGBLOB in tables the sink creates, indexable only by a prefix."""
    return mysql_column_type(dtype) in ("LONGTEXT", "LONGBLOB", "JSON")
