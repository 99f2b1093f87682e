"""The work tables pz derives from a target's name for atomic replace and merge (temp, backup, load) fit the
server's identifier limit and never collide: two names at the limit that share their head get their own."""

from __future__ import annotations

from typing import Any

from pipelinez.connectors.mysql.settings import TableName
from pipelinez.connectors.postgres.sink import Writer
from pipelinez.connectors.sdk import OutputRequest
from pipelinez.core.vocabulary import Strategy

RUN = "20261201T153000000Z-4f2a"


def _pg_work(table: str, kind: str) -> str:
    output = OutputRequest("o", {"table": table}, Strategy.REPLACE, run_id=RUN)
    none: Any = None  # no server: a qualified table needs no lookup
    return Writer(none, none, output, "sink 'pg' output 'o'").work_table(kind)


def test_postgres_work_tables_fit_63_bytes_and_keep_long_names_apart() -> None:
    a, b = "é" * 30 + "xa", "é" * 30 + "xb"  # 62 bytes each, same 61-byte head
    names = {_pg_work(f"public.{t}", kind) for t in (a, b) for kind in ("tmp", "old", "load")}
    assert len(names) == 6
    assert all(len(n.encode("utf-8")) <= 63 for n in names), names
    assert all(n.encode("utf-8").decode("utf-8") == n for n in names)  # never half a character


def test_mysql_work_tables_fit_64_characters_and_keep_long_names_apart() -> None:
    a, b = TableName(None, "m" * 63 + "a"), TableName(None, "m" * 63 + "b")
    names = {t.work_table(kind, RUN).table for t in (a, b) for kind in ("tmp", "old")}
    assert len(names) == 4 and all(len(n) <= 64 for n in names), names
    assert all(a.is_work_table(a.work_table(kind, RUN).table) for kind in ("tmp", "old"))
    assert not a.is_work_table(b.work_table("tmp", RUN).table)
