"""BatchedDdl: CREATE TABLE statements many to a transaction, with autocommit's outcome when one fails."""

from __future__ import annotations

import duckdb
import pytest

from pipelinez.compile.batched_ddl import BatchedDdl


def _tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]


def test_statements_run_in_transactions_of_a_batch_and_commit_lands_the_rest() -> None:
    con = duckdb.connect()
    ddl = BatchedDdl(con, batch=3)
    for i in range(7):
        ddl.execute(f"CREATE TABLE t{i} (x INTEGER)", f"t{i}")
    assert len(ddl.pending) == 1  # two batches of three committed, the seventh still open
    ddl.commit()
    assert ddl.pending == []
    assert _tables(con) == [f"t{i}" for i in range(7)]
    con.execute("BEGIN TRANSACTION")  # no transaction was left open
    con.execute("ROLLBACK")


def test_a_failing_statement_raises_its_own_error_and_keeps_what_came_before() -> None:
    con = duckdb.connect()
    ddl = BatchedDdl(con, batch=100)
    ddl.execute("CREATE TABLE a (x INTEGER)", "a")
    ddl.execute("CREATE TABLE b AS SELECT x FROM a WITH NO DATA", "b")
    with pytest.raises(duckdb.BinderException, match='"nope" not found'):
        ddl.execute("CREATE TABLE c AS SELECT nope FROM a WITH NO DATA", "c")
    assert ddl.pending == []
    assert _tables(con) == ["a", "b"]  # rolled back and replayed one by one: both kept
    ddl.execute("CREATE TABLE d AS SELECT x FROM b WITH NO DATA", "d")  # goes on in a new transaction
    ddl.commit()
    assert _tables(con) == ["a", "b", "d"]
    assert [r[1] for r in con.execute("DESCRIBE d").fetchall()] == ["INTEGER"]


def test_the_error_is_the_one_autocommit_mode_gives() -> None:
    sql = "CREATE TABLE c AS SELECT FROM WHERE WITH NO DATA"
    alone = duckdb.connect()
    with pytest.raises(duckdb.Error) as expected:
        alone.execute(sql)
    con = duckdb.connect()
    ddl = BatchedDdl(con, batch=100)
    ddl.execute("CREATE TABLE a (x INTEGER)", "a")
    with pytest.raises(duckdb.Error) as got:
        ddl.execute(sql, "c")
    assert str(got.value) == str(expected.value)
    assert type(got.value) is type(expected.value)


def test_a_transaction_left_open_is_ended_and_the_statement_runs_alone() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE kept (x INTEGER)")
    con.execute("BEGIN TRANSACTION")
    con.execute("CREATE TABLE dropped (x INTEGER)")
    ddl = BatchedDdl(con, batch=100)
    ddl.execute("CREATE TABLE a (x INTEGER)", "a")
    assert ddl.pending == []  # ran in autocommit mode: nothing of ours left to commit
    assert _tables(con) == ["a", "kept"]


def test_text_with_a_semicolon_runs_alone_after_a_commit() -> None:
    con = duckdb.connect()
    ddl = BatchedDdl(con, batch=100)
    ddl.execute("CREATE TABLE a (x INTEGER)", "a")
    with pytest.raises(duckdb.Error, match="no transaction is active"):
        ddl.execute("CREATE TABLE b (x INTEGER); COMMIT; SELECT 1", "b")  # as autocommit mode runs it
    assert ddl.pending == []
    assert _tables(con) == ["a", "b"]  # a was committed first; b was made before COMMIT failed


def test_a_transaction_aborted_behind_its_back_is_found_at_commit_and_made_again() -> None:
    con = duckdb.connect()
    ddl = BatchedDdl(con, batch=100)
    ddl.execute("CREATE TABLE a (x INTEGER)", "a")
    ddl.execute("CREATE TABLE b AS SELECT x FROM a WITH NO DATA", "b")
    with pytest.raises(duckdb.Error):
        con.execute("SELECT error('boom')")  # aborts the open transaction; DuckDB's COMMIT then rolls back
    ddl.commit()
    assert ddl.pending == []
    assert _tables(con) == ["a", "b"]
