"""Type names parsed by DuckDB on private connections: each thread its own cursor, all of one instance."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from pipelinez.core import duck_connect, duck_types


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every DuckDB instance opened, from a process that has parsed no type yet."""
    opened: list[str] = []
    original = duck_connect.connect

    def counted(database: str = ":memory:", **kwargs: Any) -> Any:
        opened.append(database)
        return original(database, **kwargs)

    monkeypatch.setattr(duck_connect, "connect", counted)
    monkeypatch.setattr(duck_types, "_instance", None)
    monkeypatch.setattr(duck_types, "_local", threading.local())
    return opened


def _in_thread(work: Any) -> Any:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(work()))
    thread.start()
    thread.join()
    return out[0]


def test_threads_parse_on_one_instance(connects: list[str]) -> None:
    assert duck_types.parse_type("decimal(18,2)") == "DECIMAL(18,2)"
    assert _in_thread(lambda: duck_types.parse_type("varchar")) == "VARCHAR"
    assert _in_thread(lambda: duck_types.parse_type("int[]")) == "INTEGER[]"
    assert connects == [":memory:"]


def test_a_thread_s_aborted_transaction_leaves_the_others_parsing(connects: list[str]) -> None:
    import duckdb

    duck_types.parse_type("bigint")
    mine = duck_types._connection()
    mine.execute("BEGIN")
    with pytest.raises(duckdb.Error):
        mine.execute("SELECT CAST('x' AS INTEGER)")  # the transaction is aborted now
    assert _in_thread(lambda: duck_types.parse_type("date")) == "DATE"
    with pytest.raises(ValueError):
        duck_types.parse_type("no_such_type")
    mine.execute("ROLLBACK")
    assert duck_types.parse_type("timestamp") == "TIMESTAMP"
