"""The portable helpers render the SQL docs/project-files.md says they do, and refuse what they cannot
render."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import pytest

from pipelinez.compile.helpers import (
    HelperError,
    date_trunc,
    dateadd,
    datediff,
    generate_surrogate_key,
    safe_cast,
    star,
)

DOCS = (Path(__file__).parents[2] / "docs" / "project-files.md").read_text(encoding="utf-8")

CASES = [
    (
        generate_surrogate_key(["id", "note"]),
        "md5(coalesce(CAST(id AS VARCHAR), '_pz_surrogate_key_null_') || '-' || "
        "coalesce(CAST(note AS VARCHAR), '_pz_surrogate_key_null_'))",
    ),
    (date_trunc("month", "placed_at"), "date_trunc('month', placed_at)"),
    (dateadd("day", 2, "shipped_on"), "date_add(shipped_on, INTERVAL (2) DAY)"),
    (datediff("day", "placed_at", "shipped_on"), "date_diff('day', placed_at, shipped_on)"),
    (star("t", **{"except": ["a", "b"]}), '* EXCLUDE ("a", "b")'),
    (star("t", **{"except": ["a", "b"], "relation_alias": "o"}), '"o".* EXCLUDE ("a", "b")'),
    (star("t"), "*"),
    (safe_cast("note", "integer"), "TRY_CAST(note AS INTEGER)"),
]


@pytest.mark.parametrize(("rendered", "expected"), CASES)
def test_each_helper_renders_what_the_docs_say(rendered: str, expected: str) -> None:
    assert rendered == expected
    assert f"`{expected}`".replace("|", "\\|") in DOCS


def test_dbt_keyword_names_are_accepted() -> None:
    assert dateadd(datepart="day", interval=2, from_date_or_timestamp="d") == dateadd("day", 2, "d")
    assert datediff(first_date="a", second_date="b", datepart="day") == datediff("day", "a", "b")
    assert date_trunc(datepart="month", date="d") == date_trunc("month", "d")
    assert safe_cast(field="x", type="integer") == safe_cast("x", "integer")
    assert generate_surrogate_key(field_list=["a"]) == generate_surrogate_key(["a"])


def test_the_rendered_sql_runs_in_duckdb() -> None:
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t AS SELECT 1 AS id, NULL::VARCHAR AS note, TIMESTAMP '2024-03-15 10:30' AS placed_at, "
        "DATE '2024-03-20' AS shipped_on, 1 AS a, 2 AS b"
    )
    sql = ", ".join(rendered for rendered, _ in CASES if "EXCLUDE" not in rendered and rendered != "*")
    row = con.execute(f"SELECT {sql} FROM t").fetchone()
    assert row is not None and row[1:] == (dt.datetime(2024, 3, 1), dt.datetime(2024, 3, 22), 5, None)
    assert con.execute(f"SELECT {star('t', **{'except': ['a', 'b']})} FROM t").description is not None
    assert [
        d[0] for d in con.execute(f"SELECT {star('t', **{'except': ['a', 'b']})} FROM t").description
    ] == [
        "id",
        "note",
        "placed_at",
        "shipped_on",
    ]


@pytest.mark.parametrize(
    "call",
    [
        lambda: date_trunc("fortnight", "x"),
        lambda: dateadd("days; DROP TABLE t", 1, "x"),
        lambda: safe_cast("x", "integer); DROP TABLE t; --"),
        lambda: generate_surrogate_key("id"),
        lambda: generate_surrogate_key([]),
        lambda: star("t", columns=["a"]),
        lambda: star("t", **{"except": "a"}),
    ],
)
def test_a_helper_refuses_what_it_cannot_render(call: object) -> None:
    with pytest.raises(HelperError):
        call()  # type: ignore[operator]
