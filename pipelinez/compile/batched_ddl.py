"""Tier 4's CREATE TABLE statements, many to a transaction.

Each statement in autocommit mode is a transaction of its own, and beginning and committing one is about a
seventh of what a pipeline's bind costs. Here statements run BATCH at a time in one transaction. A statement
that fails aborts its transaction, so the batch is rolled back, the statements of it that had succeeded are
run again one by one, and the failing one is run again alone: what it leaves behind and the error it raises
are exactly what autocommit mode would give, so callers handle errors as before.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from pipelinez.core.sqlnames import quote_ident

if TYPE_CHECKING:
    import duckdb

BATCH = 250  # statements per transaction


class BatchedDdl:
    def __init__(self, con: duckdb.DuckDBPyConnection, batch: int = BATCH):
        self.con = con
        self.batch = batch
        self.pending: list[tuple[str, str]] = []  # (statement, table it created) of the open transaction

    def execute(self, sql: str, table: str) -> None:
        """Run one statement that creates `table`; raises what DuckDB raises for it alone, the ones before
        it kept. Text holding a `;` (it may be several statements, a COMMIT among them) is never batched:
        it runs alone, in autocommit mode, after the open transaction is committed."""
        import duckdb

        if ";" in sql:
            self.commit()
            self.con.execute(sql)
            return
        if not self.pending:
            try:
                self.con.execute("BEGIN TRANSACTION")
            except duckdb.Error:  # one was left open (and this aborted it): end it, run the statement alone
                self._rollback()
                self.con.execute(sql)
                return
        try:
            self.con.execute(sql)
        except duckdb.Error:
            self._replay_alone()
            self.con.execute(sql)  # the statement's own error, as autocommit mode raises it
            return  # it succeeded alone (it failed only because of the transaction): kept
        self.pending.append((sql, table))
        if len(self.pending) >= self.batch:
            self.commit()

    def commit(self) -> None:
        """End the open transaction (none open: nothing to do). Call before any other statement runs.
        DuckDB commits an aborted transaction by rolling it back without a word, so what was committed is
        checked: any table missing is made again, statement by statement."""
        import duckdb

        if not self.pending:
            return
        try:
            self.con.execute("COMMIT")
        except duckdb.Error:
            self._replay_alone()
            return
        wanted = [table for _, table in self.pending]
        found = self.con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'main' AND table_name IN "
            "(SELECT unnest(?::VARCHAR[]))",
            [wanted],
        ).fetchone()
        if found is None or found[0] != len(set(wanted)):
            self._replay_alone()
            return
        self.pending = []

    def _replay_alone(self) -> None:
        """Roll the open transaction back and run what had succeeded in it again, one statement at a time
        (a table a statement had made and a rollback did not undo is made afresh)."""
        done, self.pending = self.pending, []
        self._rollback()
        for statement, table in done:
            self.con.execute(f"DROP TABLE IF EXISTS {quote_ident(table)}")
            self.con.execute(statement)

    def _rollback(self) -> None:
        import duckdb

        with contextlib.suppress(duckdb.Error):  # none open: nothing to end
            self.con.execute("ROLLBACK")
