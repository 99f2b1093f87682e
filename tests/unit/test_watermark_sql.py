"""The SQL-route inference on DuckDB's parse tree: recognised shapes, refused shapes, and a property test
that generated comparisons never crash it and never make it accept an upper bound or another table's cursor.
Also the literal watermark() renders, and that tier 4 binds the pipeline with that literal's type."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelinez.compile.compiler import compile_project
from pipelinez.compile.incremental import IncrementalRoute, IncrementalSpec
from pipelinez.compile.nodes import PipelineNode
from pipelinez.compile.watermark_literal import cursor_type, watermark_literal
from pipelinez.compile.watermark_sql import Cause, Recognized, Unrecognized, analyse, parse_queries
from pipelinez.config.loader import load_project
from tests.conftest import write_project

CON = duckdb.connect(":memory:")  # one connection for every parse here: connecting costs more than parsing
STAGING = {"src_a__orders": ("a", "orders"), "src_a__customers": ("a", "customers")}
ORDERS = '"src_a__orders"'
CUSTOMERS = '"src_a__customers"'
WM = "__pz_wm_0__"
WM_CALL = "{{ watermark('files', 'orders') }}"


def outcome(sql: str) -> Recognized | Unrecognized:
    (tree,) = parse_queries([sql], CON)
    assert tree is not None, sql
    return analyse(tree, STAGING, {0: ("a", "orders")}).outcome(0)


@pytest.mark.parametrize(
    ("sql", "cursor", "inclusive"),
    [
        (f"SELECT * FROM {ORDERS} WHERE ts > {WM}", "ts", False),
        (f"SELECT * FROM {ORDERS} o WHERE o.ts >= {WM} - INTERVAL 2 HOUR", "ts", True),
        (f"SELECT * FROM {ORDERS} o WHERE {WM} < o.ts", "ts", False),
        (f"SELECT * FROM {ORDERS} o WHERE {WM} <= o.ts", "ts", True),
        (f"SELECT * FROM {ORDERS} o JOIN {CUSTOMERS} c ON c.id = o.id AND o.ts > {WM}", "ts", False),
        (f"WITH x AS (SELECT * FROM {ORDERS}) SELECT * FROM x WHERE x.ts > {WM}", "ts", False),
        (f"WITH x AS (SELECT id, ts AS ts FROM {ORDERS} o) SELECT * FROM x WHERE ts > {WM}", "ts", False),
        (f"SELECT * FROM (SELECT o.* FROM {ORDERS} o) s WHERE s.ts > {WM}", "ts", False),
        (f"SELECT * FROM {CUSTOMERS} WHERE id IN (SELECT id FROM {ORDERS} WHERE ts > {WM})", "ts", False),
        (f"SELECT * FROM {ORDERS} WHERE ts > greatest({WM}, TIMESTAMP '2024-01-01')", "ts", False),
        (f'SELECT * FROM {ORDERS} AS "O" WHERE "O"."Ts" > {WM}', "Ts", False),
    ],
)
def test_recognised(sql: str, cursor: str, inclusive: bool) -> None:
    assert outcome(sql) == Recognized(cursor, inclusive)


@pytest.mark.parametrize(
    ("sql", "cause"),
    [
        (f"SELECT * FROM {ORDERS} WHERE ts < {WM}", Cause.UPPER_BOUND),
        (f"SELECT * FROM {ORDERS} WHERE {WM} >= ts", Cause.UPPER_BOUND),
        (f"SELECT * FROM {ORDERS} WHERE ts = {WM}", Cause.EQUALITY),
        (f"SELECT * FROM {ORDERS} WHERE ts IS DISTINCT FROM {WM}", Cause.EQUALITY),
        (f"SELECT * FROM {ORDERS} WHERE ts BETWEEN {WM} AND now()", Cause.EQUALITY),
        (f"SELECT * FROM {ORDERS} WHERE ts IN ({WM})", Cause.EQUALITY),
        (f"SELECT * FROM {ORDERS} WHERE ts::DATE > {WM}", Cause.CURSOR_EXPRESSION),
        (f"SELECT * FROM {ORDERS} WHERE 1 > {WM}", Cause.CURSOR_EXPRESSION),
        (f"SELECT * FROM {ORDERS} WHERE ts > {WM} + id", Cause.VALUE_COLUMN),
        (f"SELECT * FROM {ORDERS} WHERE ts > (SELECT max(ts) FROM {CUSTOMERS}) + {WM}", Cause.VALUE_COLUMN),
        (f"SELECT {WM} FROM {ORDERS}", Cause.OUTSIDE_COMPARISON),
        (f"SELECT * FROM {ORDERS} -- {WM}", Cause.OUTSIDE_COMPARISON),
        (f"SELECT * FROM {ORDERS} WHERE coalesce({WM}, ts) IS NOT NULL", Cause.OUTSIDE_COMPARISON),
        (f"SELECT * FROM {ORDERS} WHERE ts > {WM} OR id = 1", Cause.NOT_A_FILTER),
        (f"SELECT ts > {WM} AS fresh FROM {ORDERS}", Cause.NOT_A_FILTER),
        (f"SELECT * FROM {ORDERS} WHERE CASE WHEN ts > {WM} THEN true END", Cause.NOT_A_FILTER),
        (
            f"SELECT * FROM {ORDERS} o LEFT JOIN {CUSTOMERS} c ON c.id = o.id AND o.ts > {WM}",
            Cause.NOT_A_FILTER,
        ),
        (f"SELECT * FROM {ORDERS} o, {CUSTOMERS} c WHERE ts > {WM}", Cause.UNQUALIFIED),
        (f"SELECT * FROM (SELECT * FROM {ORDERS} o, {CUSTOMERS} c) s WHERE s.ts > {WM}", Cause.UNQUALIFIED),
        (
            f"SELECT * FROM (SELECT * FROM {ORDERS} UNION ALL SELECT * FROM {ORDERS}) WHERE ts > {WM}",
            Cause.UNQUALIFIED,
        ),
        (f"SELECT * FROM {ORDERS} o, {CUSTOMERS} c WHERE c.ts > {WM}", Cause.WRONG_DATASET),
        (f"SELECT * FROM __pz_ref_up__ u WHERE u.ts > {WM}", Cause.WRONG_DATASET),
        (f"SELECT * FROM range(3) r(ts) WHERE ts > {WM}", Cause.UNTRACEABLE),
        (f"SELECT * FROM (SELECT ts + 1 AS ts FROM {ORDERS}) s WHERE s.ts > {WM}", Cause.CURSOR_EXPRESSION),
        (
            f"SELECT * FROM (SELECT * REPLACE (ts + 1 AS ts) FROM {ORDERS}) s WHERE s.ts > {WM}",
            Cause.CURSOR_EXPRESSION,
        ),
        (f"WITH x(a) AS (SELECT ts FROM {ORDERS}) SELECT * FROM x WHERE a > {WM}", Cause.UNTRACEABLE),
        (f"SELECT * FROM {ORDERS} o WHERE z.ts > {WM}", Cause.UNTRACEABLE),
    ],
)
def test_refused(sql: str, cause: Cause) -> None:
    found = outcome(sql)
    assert isinstance(found, Unrecognized), (sql, found)
    assert found.cause == cause, (sql, found)


def _reads(sql: str) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    (tree,) = parse_queries([sql], CON)
    assert tree is not None
    result = analyse(tree, STAGING, {0: ("a", "orders")})
    return result.filtered, result.unfiltered


def test_every_read_must_be_filtered() -> None:
    filtered, unfiltered = _reads(f"WITH x AS (SELECT * FROM {ORDERS}) SELECT * FROM x WHERE ts > {WM}")
    assert ("a", "orders") in filtered and ("a", "orders") not in unfiltered
    # a CTE read twice and filtered outside: its second read is not filtered
    _, unfiltered = _reads(
        f"WITH x AS (SELECT * FROM {ORDERS}) SELECT * FROM x WHERE ts > {WM} UNION ALL SELECT * FROM x"
    )
    assert ("a", "orders") in unfiltered
    # filtered inside the CTE: every read of the CTE is filtered
    _, unfiltered = _reads(
        f"WITH x AS (SELECT * FROM {ORDERS} WHERE ts > {WM}) SELECT * FROM x UNION ALL SELECT * FROM x"
    )
    assert ("a", "orders") not in unfiltered
    # a self-join: the second read has no filter of its own
    _, unfiltered = _reads(f"SELECT * FROM {ORDERS} a JOIN {ORDERS} b ON a.id = b.id WHERE a.ts > {WM}")
    assert ("a", "orders") in unfiltered


def test_unparsable_queries_are_left_to_tier_4() -> None:
    found = parse_queries(["SELEC 1", "SELECT 1; SELECT 2", "INSERT INTO t VALUES (1)"], CON)
    assert found == [None, None, None]


# -- the property test ---------------------------------------------------------------------------

OPS = [">", ">=", "<", "<=", "=", "<>", "!="]
LOWER = {">": False, ">=": True}  # cursor on the left
MIRROR = {"<": False, "<=": True}  # cursor on the right


@st.composite
def comparisons(draw: st.DrawFn) -> tuple[str, bool, str | None]:
    """(query, may be recognised, the only cursor the inference may name when it recognises the call).

    The generated queries read orders as `o` and perhaps customers as `c`; watermark() names orders. A
    recognition is allowed only for a lower bound, in a filter position, with a bare cursor of `o` (or an
    unqualified one when `o` is the only table) and no column on the value side."""
    two_tables = draw(st.booleans())
    column = draw(st.sampled_from(["ts", "id", "Ts"]))
    qualifier = draw(st.sampled_from(["o", "c", "", "z"]))
    if not two_tables and qualifier == "c":
        qualifier = "o"
    cursor_ref = f"{qualifier}.{column}" if qualifier else column
    cursor_shape = draw(st.sampled_from(["bare", "cast", "function", "arith"]))
    cursor = {
        "bare": cursor_ref,
        "cast": f"CAST({cursor_ref} AS DATE)",
        "function": f"abs({cursor_ref})",
        "arith": f"{cursor_ref} + 1",
    }[cursor_shape]
    value_shape = draw(st.sampled_from(["plain", "interval", "function", "column", "subquery", "nested"]))
    value = {
        "plain": WM,
        "interval": f"{WM} - INTERVAL 1 DAY",
        "function": f"greatest({WM}, 0)",
        "column": f"{WM} + o.id",
        "subquery": f"(SELECT max(id) FROM {CUSTOMERS}) + {WM}",
        "nested": f"CAST(CAST({WM} AS BIGINT) * 2 AS BIGINT)",
    }[value_shape]
    op = draw(st.sampled_from(OPS))
    cursor_left = draw(st.booleans())
    comparison = f"{cursor} {op} {value}" if cursor_left else f"{value} {op} {cursor}"
    place = draw(st.sampled_from(["where", "and", "or", "select", "inner_on", "left_on", "exists"]))
    wrap = draw(st.sampled_from(["none", "cte", "subquery", "cte_twice"]))

    orders = f"{ORDERS} o"
    if wrap == "cte":
        orders = "w AS o"
    elif wrap == "subquery":
        orders = f"(SELECT * FROM {ORDERS}) AS o"
    elif wrap == "cte_twice":
        orders = "w2 AS o"
    ctes = ""
    if wrap == "cte":
        ctes = f"WITH w AS (SELECT * FROM {ORDERS}) "
    elif wrap == "cte_twice":
        ctes = f'WITH w AS (SELECT * FROM {ORDERS}), w2 AS (SELECT id, ts, "Ts" FROM w) '
    tables = f"{orders} JOIN {CUSTOMERS} c ON c.id = o.id" if two_tables else orders
    if place == "where":
        query = f"{ctes}SELECT * FROM {tables} WHERE {comparison}"
    elif place == "and":
        query = f"{ctes}SELECT * FROM {tables} WHERE o.id > 0 AND ({comparison}) AND true"
    elif place == "or":
        query = f"{ctes}SELECT * FROM {tables} WHERE o.id > 0 OR {comparison}"
    elif place == "select":
        query = f"{ctes}SELECT {comparison} AS flag FROM {tables}"
    elif place == "inner_on":
        query = f"{ctes}SELECT * FROM {orders} JOIN {CUSTOMERS} c ON c.id = o.id AND {comparison}"
        two_tables = True
    elif place == "left_on":
        query = f"{ctes}SELECT * FROM {orders} LEFT JOIN {CUSTOMERS} c ON c.id = o.id AND {comparison}"
        two_tables = True
    else:
        query = f"{ctes}SELECT * FROM {tables} WHERE EXISTS (SELECT 1 FROM {CUSTOMERS} x WHERE {comparison})"

    lower = (cursor_left and op in LOWER) or (not cursor_left and op in MIRROR)
    filtering = place in ("where", "and", "inner_on")
    own_table = qualifier == "o" or (qualifier == "" and not two_tables)
    may = (
        lower
        and filtering
        and own_table
        and cursor_shape == "bare"
        and value_shape in ("plain", "interval", "function", "nested")
    )
    return query, may, column if may else None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(comparisons())
def test_inference_never_accepts_an_upper_bound_or_another_tables_cursor(
    case: tuple[str, bool, str | None],
) -> None:
    query, may, cursor = case
    (tree,) = parse_queries([query], CON)
    if tree is None:
        return  # not a query DuckDB parses: tier 4 reports it
    found = analyse(tree, STAGING, {0: ("a", "orders")}).outcome(0)
    if not may:
        assert isinstance(found, Unrecognized), (query, found)
    if isinstance(found, Recognized):
        assert may and cursor is not None and found.cursor.lower() == cursor.lower(), (query, found)


TOKENS = [
    *"(),.<>=!+-*/",
    "'x'",
    "1",
    "a",
    "b",
    "ts",
    "o.ts",
    WM,
    "SELECT",
    "*",
    "FROM",
    "WHERE",
    ORDERS,
    "o",
]
TOKENS += [
    "AND",
    "OR",
    "NOT",
    "JOIN",
    "ON",
    "WITH",
    "AS",
    "UNION",
    "ALL",
    "IN",
    "BETWEEN",
    "CASE",
    "WHEN",
    "END",
]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=30).map(" ".join))
def test_inference_never_crashes_on_any_parsable_text(text: str) -> None:
    for tree in parse_queries([text], CON):
        if tree is not None:
            result = analyse(tree, STAGING, {0: ("a", "orders")})
            found = result.outcome(0)
            if isinstance(found, Recognized):
                assert found.cursor  # recognised only with a named cursor


# -- the literal -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("declared", "committed", "expected"),
    [
        ("int", None, "CAST('-inf' AS DOUBLE)"),
        ("bigint", "42", "CAST('42' AS BIGINT)"),
        ("decimal(18,2)", None, "CAST('-inf' AS DOUBLE)"),
        ("date", None, "CAST('-infinity' AS DATE)"),
        ("timestamp", None, "CAST('-infinity' AS TIMESTAMP)"),
        ("timestamp", "2024-05-01 10:00:00.123456", "CAST('2024-05-01 10:00:00.123456' AS TIMESTAMP)"),
        ("varchar", "x", "NULL"),
        ("timestamp_ns", None, "CAST('-infinity' AS TIMESTAMP_NS)"),
        ("timestamptz", None, "CAST('-infinity' AS TIMESTAMP WITH TIME ZONE)"),
        (
            "timestamptz",
            "2024-05-01 08:00:00+00:00",
            "CAST('2024-05-01 08:00:00+00:00' AS TIMESTAMP WITH TIME ZONE)",
        ),
    ],
)
def test_literal(declared: str, committed: str | None, expected: str) -> None:
    assert watermark_literal(cursor_type(declared), committed) == expected


def test_literal_start_and_unknown_type() -> None:
    assert watermark_literal("DATE", None, "2024-01-01") == "CAST('2024-01-01' AS DATE)"
    assert watermark_literal("BIGINT", None, 7) == "CAST('7' AS BIGINT)"
    assert watermark_literal(None) == "NULL"
    for outside in ("varchar", "double", "smallint", "hugeint", "not a type"):
        assert cursor_type(outside) is None
    assert cursor_type("timestamptz") == "TIMESTAMP WITH TIME ZONE"  # the usual updated_at, compared in UTC


def test_admits_every_row_literal_admits_every_row_and_survives_arithmetic() -> None:
    con = CON
    for duck_type, sample in [
        ("BIGINT", "-9223372036854775808"),
        ("DECIMAL(18,2)", "-1e15"),
        ("INTEGER", "-2147483648"),
    ]:
        literal = watermark_literal(duck_type)
        row = con.execute(f"SELECT CAST({sample} AS {duck_type}) > {literal} - 10").fetchone()
        assert row == (True,)
    for duck_type, sample in [("DATE", "'0001-01-02'"), ("TIMESTAMP", "'0001-01-02 00:00:00'")]:
        literal = watermark_literal(duck_type)
        row = con.execute(f"SELECT CAST({sample} AS {duck_type}) >= {literal} - INTERVAL 1 DAY").fetchone()
        assert row == (True,)


def _project(root: Path, where: str, cursor_decl: str = "timestamp") -> Path:
    return write_project(
        root,
        {
            "project.yml": "name: shop\n",
            "sources/files.yml": f"""
                connector: localfiles
                connection: {{ root: data }}
                datasets:
                  orders:
                    format: csv
                    path: orders.csv
                    columns: {{ id: bigint, ts: {cursor_decl} }}
            """,
            "sinks/lake.yml": "connector: localfiles\nconnection: { root: out }\n"
            "outputs:\n  p: { strategy: append, duplicates: accept }\n",
            "pipelines/p.sql": "INSERT INTO {{ sink('lake', 'p') }}\n"
            f"SELECT * FROM {{{{ source('files', 'orders') }}}} AS o WHERE {where}\n",
        },
    )


def test_compile_renders_the_literal_and_the_spec(tmp_path: Path) -> None:
    project, _ = load_project(_project(tmp_path, "o.ts >= {{ watermark('files', 'orders') }}"), partial=True)
    assert project is not None
    first = compile_project(project)
    assert [d.code for d in first.errors if d.code != "PZ0233"] == []
    assert first.incremental == {
        ("files", "orders"): IncrementalSpec(
            "files", "orders", IncrementalRoute.SQL, "ts", "TIMESTAMP", inclusive=True, declared_by=("p",)
        )
    }
    assert first.dag is not None
    node = first.dag.nodes["p"]
    assert isinstance(node, PipelineNode)
    assert "o.ts >= CAST('-infinity' AS TIMESTAMP)" in node.sql
    later = compile_project(project, watermarks={("files", "orders"): "2024-05-01 10:00:00.5"})
    assert later.dag is not None
    node_later = later.dag.nodes["p"]
    assert isinstance(node_later, PipelineNode)
    assert "o.ts >= CAST('2024-05-01 10:00:00.5' AS TIMESTAMP)" in node_later.sql
    assert node_later.id != node.id  # the SQL that runs changed


@pytest.mark.parametrize("watermarks", [None, {("files", "orders"): "2024-05-01"}])
def test_tier_4_binds_with_the_literal_type(
    tmp_path: Path, watermarks: dict[tuple[str, str], str] | None
) -> None:
    # a date cursor: watermark() + 1 is a DATE plus an INTEGER, fine; the same on a timestamp is a type error
    ok_root = _project(tmp_path / "ok", "o.ts > {{ watermark('files', 'orders') }} + 1", "date")
    project, _ = load_project(ok_root, partial=True)
    assert project is not None
    assert [
        d.code for d in compile_project(project, watermarks=watermarks).errors if d.code != "PZ0233"
    ] == []
    bad_root = _project(tmp_path / "bad", "o.ts > {{ watermark('files', 'orders') }} + 1", "timestamp")
    project, _ = load_project(bad_root, partial=True)
    assert project is not None
    codes = [d.code for d in compile_project(project, watermarks=watermarks).errors if d.code != "PZ0233"]
    assert codes == ["PZ0403"]


def test_a_query_nested_too_deeply_for_the_walk_is_refused_not_accepted() -> None:
    import sys

    depth = 60
    sql = f"SELECT * FROM {ORDERS} WHERE ts > {WM}"
    for _ in range(depth):
        sql = f"SELECT * FROM ({sql}) AS s"
    (tree,) = parse_queries([sql], CON)
    assert tree is not None
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # the walk runs out of stack long before DuckDB's own depth limit
    try:
        result = analyse(tree, STAGING, {0: ("a", "orders")})
    finally:
        sys.setrecursionlimit(limit)
    found = result.outcome(0)
    assert isinstance(found, Unrecognized) and found.cause == Cause.UNTRACEABLE
    assert ("a", "orders") in result.unfiltered


def _bounds_of(tmp_path: Path, wheres: dict[str, str], committed: str | None) -> tuple[list[str], str]:
    """(error codes, the dataset's read bounds) of a project where each pipeline filters orders by `where`."""
    outputs = "".join(f"  {n}: {{ strategy: append, duplicates: accept }}\n" for n in wheres)
    files = {
        "project.yml": "name: shop\n",
        "sources/files.yml": "connector: localfiles\nconnection: { root: data }\ndatasets:\n"
        "  orders: { format: csv, path: orders.csv, columns: { id: bigint, ts: timestamp } }\n",
        "sinks/lake.yml": f"connector: localfiles\nconnection: {{ root: out }}\noutputs:\n{outputs}",
    }
    for name, where in wheres.items():
        files[f"pipelines/{name}.sql"] = (
            f"INSERT INTO {{{{ sink('lake', '{name}') }}}}\n"
            f"SELECT * FROM {{{{ source('files', 'orders') }}}} AS o WHERE {where}\n"
        )
    project, _ = load_project(write_project(tmp_path, files), partial=True)
    assert project is not None
    compiled = compile_project(project, watermarks={("files", "orders"): committed} if committed else None)
    assert compiled.dag is not None
    load = compiled.dag.nodes["src_files__orders"]
    return [d.code for d in compiled.errors], load.work.request.bounds.describe()  # type: ignore[attr-defined]


EVERY_ROW = "every row (ts unbounded)"


@pytest.mark.parametrize(
    ("wheres", "expected", "first"),
    [
        ({"p": f"o.ts > {WM_CALL}"}, "ts > 2024-05-01 10:00:00", EVERY_ROW),
        ({"p": f"o.ts > {WM_CALL} - INTERVAL 1 HOUR"}, "ts > 2024-05-01 09:00:00", EVERY_ROW),
        (  # the SQL route's start: the first read begins there
            {"p": f"o.ts > greatest({WM_CALL} - INTERVAL 2 DAY, TIMESTAMP '2024-04-30')"},
            "ts > 2024-04-30 00:00:00",
            "ts > 2024-04-30 00:00:00",
        ),
        (
            {"p": f"o.ts > {WM_CALL}", "q": f"o.ts >= {WM_CALL} - INTERVAL 1 HOUR"},
            "ts >= 2024-05-01 09:00:00",
            EVERY_ROW,
        ),
        ({"p": f"o.ts >= {WM_CALL}", "q": f"o.ts > {WM_CALL}"}, "ts >= 2024-05-01 10:00:00", EVERY_ROW),
        (
            {"p": f"o.ts > {WM_CALL} AND o.ts > {WM_CALL} - INTERVAL 5 MINUTE"},
            "ts > 2024-05-01 09:55:00",
            EVERY_ROW,
        ),
    ],
)
def test_the_read_is_the_union_of_every_comparisons_evaluated_bound(
    tmp_path: Path, wheres: dict[str, str], expected: str, first: str
) -> None:
    codes, bounds = _bounds_of(tmp_path, wheres, "2024-05-01 10:00:00")
    assert codes == [] and bounds == expected
    codes, bounds = _bounds_of(tmp_path / "first", wheres, None)  # before the first commit
    assert codes == [] and bounds == first
