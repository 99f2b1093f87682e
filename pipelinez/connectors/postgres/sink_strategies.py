"""The replace and merge strategies of a PostgreSQL write, over a loaded work table: replace swaps it in
for the target in one transaction (grants, comment and owner carried over); merge upserts it into the
target in one transaction (ON CONFLICT, MERGE, or DELETE + INSERT)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipelinez.connectors.postgres.settings import lead
from pipelinez.connectors.postgres.sink_target import LOCK_TIMEOUT, Column, TargetTable, format_name
from pipelinez.connectors.sdk import WriteResult
from pipelinez.core import failpoints
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident

_PRIVILEGES = {"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER", "MAINTAIN"}


class StrategyWriter(TargetTable):
    """Replace and merge of a write (see the module docstring of `sink.py` for their guarantees)."""

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
                existing = self._merge_target(cur, data)
                self._check_keys(cur, src, keys)
                on = " AND ".join(f"t.{quote_ident(k)} = s.{quote_ident(k)}::{existing[k]}" for k in keys)
                if flag:
                    flagged = self._delete_flagged(cur, src, on, flag)
                self._upsert(cur, src, on, keys, flag, [c.name for c in data], existing)
                cur.execute(f"DROP TABLE {src}")
        except PzConnectorError:
            raise
        except Exception as exc:
            raise self._fail(exc) from exc
        return flagged

    def _merge_target(self, cur: Any, data: list[Column]) -> dict[str, str]:
        """The target's columns (name -> format_type), the target created when missing; refuses a target
        without some column of the result."""
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
        return existing

    def _delete_flagged(self, cur: Any, src: str, on: str, flag: str) -> int:
        """Delete the target rows whose key the work table flags; returns how many rows are flagged."""
        row = cur.execute(f"SELECT count(*) FROM {src} WHERE {quote_ident(flag)} IS TRUE").fetchone()
        cur.execute(
            f"DELETE FROM {self.qualified} AS t USING {src} AS s WHERE {on} AND s.{quote_ident(flag)} IS TRUE"
        )
        return int(row[0]) if row else 0

    def _upsert(
        self,
        cur: Any,
        src: str,
        on: str,
        keys: list[str],
        flag: str | None,
        names: list[str],
        existing: dict[str, str],
    ) -> None:
        """Insert or update the work table's unflagged rows: ON CONFLICT when a unique index covers exactly
        the keys, else MERGE (PostgreSQL 15+), else DELETE + INSERT."""
        keep = f" WHERE s.{quote_ident(flag)} IS NOT TRUE" if flag else ""
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
                    + ", ".join(f"{quote_ident(n)} = s.{quote_ident(n)}::{existing[n]}" for n in others)
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
