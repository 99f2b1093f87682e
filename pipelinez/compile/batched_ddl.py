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

if TYPE_CHECKING:
    import duckdb

BATCH = 250  # statements per transaction


class BatchedDdl:
    def __init__(self, con: duckdb.DuckDBPyConnection, batch: int = BATCH):
        self.con = con
        self.batch = batch
        self.pending: list[str] = []  # statements that succeeded in the open transaction

    def execute(self, sql: str) -> None:
        """Run one statement; raises what DuckDB raises for it alone, the ones before it kept."""
        import duckdb

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
        self.pending.append(sql)
        if len(self.pending) >= self.batch:
            self.commit()

    def commit(self) -> None:
        """End the open transaction (none open: nothing to do). Call before any other statement runs."""
        import duckdb

        if not self.pending:
            return
        try:
            self.con.execute("COMMIT")
        except duckdb.Error:
            self._replay_alone()
            return
        self.pending = []

    def _replay_alone(self) -> None:
        """Roll the open transaction back and run what had succeeded in it again, one statement at a time."""
        done, self.pending = self.pending, []
        self._rollback()
        for statement in done:
            self.con.execute(statement)

    def _rollback(self) -> None:
        import duckdb

        with contextlib.suppress(duckdb.Error):  # none open: nothing to end
            self.con.execute("ROLLBACK")
