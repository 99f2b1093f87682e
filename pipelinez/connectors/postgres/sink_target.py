"""The target table of a PostgreSQL write: its name and schema, the work tables next to it, the advisory
lock pz writers hold on it, catalog lookups (columns, comparisons, required columns), DDL, and the tier-5
probe. `sink.Writer` builds the strategies on top of it (`sink_strategies.py`)."""

from __future__ import annotations

import contextlib
import hashlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.postgres.settings import APPEND_BATCH_ROWS, Settings, TableRef, lead
from pipelinez.connectors.sdk import OutputRequest
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident

if TYPE_CHECKING:
    import psycopg

LOCK_TIMEOUT = "30s"
_LOCK_CLASS = 0x507A  # advisory lock class of pz writers ("Pz")
_FORMAT_NAMES = {
    "timestamp": "timestamp without time zone",
    "timestamptz": "timestamp with time zone",
    "time": "time without time zone",
    "timetz": "time with time zone",
}


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


class TargetTable:
    """A write's target table and the work around it, before any data moves."""

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
