"""Issue 6, storage safety: what pz leaves behind in the systems it writes to is whole, standalone and
never silently wrong (checkpointed DuckDB sink files, ...)."""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

import duckdb
import pytest

from tests.conftest import fresh_pg_database, pz, write_project

BIG = """
    INSERT INTO {{ sink('wh', 'big') }}
    INSERT INTO {{ sink('wh', 'log') }}
    SELECT range AS id, md5(range::varchar) AS payload FROM range(200000)
"""


@pytest.mark.parametrize("universal", [False, True], ids=["native", "universal"])
def test_duckdb_sink_file_stands_alone_and_stays_bounded(tmp_path: Path, universal: bool) -> None:
    project = write_project(
        tmp_path / "proj",
        {
            "project.yml": f"name: wal\nengine: {{ force_universal: {str(universal).lower()} }}\n",
            "sinks/wh.yml": """
                connector: duckdb
                connection: { path: out/wh.duckdb }
                outputs:
                  big: { table: main.big }
                  log: { table: main.log, strategy: merge, keys: [id] }
            """,
            "pipelines/big.sql": BIG,
        },
    )
    sizes = []
    for attempt in range(6):
        result = pz(project, "run")
        assert result.exit_code == 0, result.output
        file = project / "out" / "wh.duckdb"
        assert not (project / "out" / "wh.duckdb.wal").exists(), f"run {attempt} left a .wal behind"
        sizes.append(file.stat().st_size)
        alone = tmp_path / f"copy{attempt}" / "wh.duckdb"
        alone.parent.mkdir()
        shutil.copyfile(file, alone)  # the file alone, no .wal
        con = duckdb.connect(str(alone), read_only=True)
        try:
            assert con.execute("SELECT count(*) FROM big").fetchone() == (200000,)
            assert con.execute("SELECT count(*) FROM log").fetchone() == (200000,)
        finally:
            con.close()
    # repeated replaces reuse the space the old table freed: the file does not grow run after run
    assert max(sizes) <= 2 * sizes[0], sizes


PG_RANGE_SQL = """
CREATE TABLE far (id int, ts timestamp, tz timestamptz[]);
INSERT INTO far VALUES (1, '2020-01-01', '{2020-01-01}'), (2, '294270-01-01', '{2020-01-01}'),
    (3, '2021-01-01', '{2020-01-01, 294275-06-01}');
CREATE TABLE edge (id int, ts timestamp, tz timestamptz);
INSERT INTO edge VALUES (1, '2020-01-01', '2020-01-01'), (2, 'infinity', '-infinity'),
    (3, '4713-01-01 BC', '4713-01-01 BC'), (4, '294247-01-01', '294247-01-01');
"""


def _pg_range_project(root: Path, database: str, universal: bool, dataset: str) -> Path:
    return write_project(
        root,
        {
            "project.yml": f"name: rng\nengine: {{ force_universal: {str(universal).lower()} }}\n",
            "sources/pg.yml": f"""
                connector: postgres
                connection: {{ host: 127.0.0.1, port: 5432, database: {database}, user: postgres }}
                datasets:
                  far_table: {{ table: public.far }}
                  far_ts_query: {{ query: "SELECT id, ts FROM far" }}
                  far_list_query: {{ query: "SELECT id, tz FROM far" }}
                  edge: {{ table: public.edge }}
            """,
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: wh.duckdb }\n",
            "pipelines/p.sql": f"""
                INSERT INTO {{{{ sink('wh', 'p') }}}}
                SELECT * FROM {{{{ source('pg', '{dataset}') }}}}
            """,
        },
    )


@pytest.mark.parametrize("universal", [False, True], ids=["native", "universal"])
@pytest.mark.parametrize(
    ("dataset", "column"), [("far_table", "ts"), ("far_ts_query", "ts"), ("far_list_query", "tz")]
)
def test_postgres_timestamp_past_staging_range_is_refused(
    tmp_path: Path, universal: bool, dataset: str, column: str
) -> None:
    with fresh_pg_database(PG_RANGE_SQL) as database:
        project = _pg_range_project(tmp_path / "proj", database, universal, dataset)
        result = pz(project, "run")
    assert result.exit_code == 1, result.output
    expected = f"PZ0518: source 'pg' dataset '{dataset}': column {column} holds a timestamp after"
    assert expected in result.output
    assert "query:" in result.output
    assert not (project / "wh.duckdb").exists()  # nothing reached the sink


@pytest.mark.parametrize("universal", [False, True], ids=["native", "universal"])
def test_postgres_timestamps_staging_can_hold_pass_unchanged(tmp_path: Path, universal: bool) -> None:
    with fresh_pg_database(PG_RANGE_SQL) as database:
        project = _pg_range_project(tmp_path / "proj", database, universal, "edge")
        result = pz(project, "run")
    assert result.exit_code == 0, result.output
    con = duckdb.connect(str(project / "wh.duckdb"), read_only=True)
    try:
        rows = con.execute("SELECT id, ts::varchar, tz::varchar FROM p ORDER BY id").fetchall()
        assert con.execute("SELECT max(ts)::varchar, min(tz)::varchar FROM p").fetchone() == (
            "infinity",
            "-infinity",
        )
    finally:
        con.close()
    assert rows[1:] == [
        (2, "infinity", "-infinity"),
        (3, "4713-01-01 (BC) 00:00:00", "4713-01-01 (BC) 00:00:00+00"),
        (4, "294247-01-01 00:00:00", "294247-01-01 00:00:00+00"),
    ]


def _long_names(token: str) -> tuple[str, str]:
    head = f"t{token}_" + "x" * (58 - len(token) - 1)  # 59 characters: both names fit 63 and 64
    return head + "_one", head + "_two"


def _two_long_outputs(root: Path, connection: str, connector: str, one: str, two: str) -> Path:
    return write_project(
        root,
        {
            "project.yml": "name: longnames\n",
            "sinks/wh.yml": f"""
                connector: {connector}
                connection: {connection}
                outputs:
                  one: {{ table: {one} }}
                  two: {{ table: {two} }}
                  one_m: {{ table: {one}m, strategy: merge, keys: [id] }}
                  two_m: {{ table: {two}m, strategy: merge, keys: [id] }}
            """,
            "pipelines/p1.sql": """
                INSERT INTO {{ sink('wh', 'one') }}
                INSERT INTO {{ sink('wh', 'one_m') }}
                SELECT range AS id, 'one' AS v FROM range(1000)
            """,
            "pipelines/p2.sql": """
                INSERT INTO {{ sink('wh', 'two') }}
                INSERT INTO {{ sink('wh', 'two_m') }}
                SELECT range AS id, 'two' AS v FROM range(2000)
            """,
        },
    )


def test_work_tables_of_long_names_never_collide_on_postgres(tmp_path: Path) -> None:
    import psycopg

    with fresh_pg_database() as database:
        one, two = _long_names(secrets.token_hex(3))
        conn = f"{{ host: 127.0.0.1, port: 5432, database: {database}, user: postgres }}"
        # 61 + "m" = 62 characters: PostgreSQL names each table's array type "_<table>", and at 63 it cuts
        # that name, so two tables created at once whose names differ only in their last character race
        # for one type name (a server limit, not a pz work table)
        project = _two_long_outputs(tmp_path / "proj", conn, "postgres", one[:61], two[:61])
        for _ in range(2):
            result = pz(project, "run", "--threads", "4")
            assert result.exit_code == 0, result.output
        with psycopg.connect(host="127.0.0.1", port=5432, user="postgres", dbname=database) as con:
            for name, value, rows in ((one[:61], "one", 1000), (two[:61], "two", 2000)):
                for table in (name, name + "m"):
                    got = con.execute(f'SELECT count(*), min(v), max(v) FROM "{table}"').fetchone()
                    assert got == (rows, value, value), table
            leftover = con.execute(
                "SELECT relname FROM pg_class WHERE relname LIKE '%\\_\\_pz\\_%'"
            ).fetchall()
    assert leftover == []


def test_work_tables_of_long_names_never_collide_on_mariadb(tmp_path: Path) -> None:
    import pymysql

    one, two = _long_names(secrets.token_hex(3))
    conn = "{ host: 127.0.0.1, port: 3306, database: test, user: root }"
    project = _two_long_outputs(tmp_path / "proj", conn, "mysql", one[:63], two[:63])
    con = pymysql.connect(host="127.0.0.1", port=3306, user="root", database="test")
    try:
        for _ in range(2):
            result = pz(project, "run", "--threads", "4")
            assert result.exit_code == 0, result.output
        with con.cursor() as cur:
            for name, value, rows in ((one[:63], "one", 1000), (two[:63], "two", 2000)):
                for table in (name, name + "m"):
                    cur.execute(f"SELECT count(*), min(v), max(v) FROM `{table}`")
                    assert cur.fetchone() == (rows, value, value), table
            cur.execute(f"SHOW TABLES LIKE '{one[:20]}%\\_\\_pz\\_%'")
            assert cur.fetchall() == ()
    finally:
        with con.cursor() as cur:
            for name in (one[:63], two[:63]):
                cur.execute(f"DROP TABLE IF EXISTS `{name}`, `{name}m`")
        con.close()


def test_duckdb_sink_sweeps_work_tables_a_killed_run_left(tmp_path: Path) -> None:
    from pipelinez.connectors.duckdb.names import TableName
    from pipelinez.connectors.duckdb.strategies import work_table

    one, two = _long_names("dd")
    project = _two_long_outputs(tmp_path / "proj", "{ path: wh.duckdb }", "duckdb", one, two)
    stale = work_table(TableName("main", one), "20200101T000000000Z-dead").table
    con = duckdb.connect(str(project / "wh.duckdb"))
    con.execute(f'CREATE TABLE "{stale}" AS SELECT 1 AS x')
    con.close()
    result = pz(project, "run", "--threads", "4")
    assert result.exit_code == 0, result.output
    con = duckdb.connect(str(project / "wh.duckdb"), read_only=True)
    try:
        names = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    finally:
        con.close()
    assert names == {one, two, one + "m", two + "m"}


SHARED = {
    "project.yml": "name: shared\n",
    "sinks/wh.yml": """
        connector: duckdb
        connection: { path: out/wh.duckdb }
        outputs:
          a: { table: Orders }
          other_file: { table: orders }
    """,
    "sinks/wh2.yml": """
        connector: duckdb
        connection: { path: ./out/../out/wh.duckdb }
        outputs:
          b: { table: main.orders }
    """,
    "sinks/wh3.yml": "connector: duckdb\nconnection: { path: out/other.duckdb }\n",
    "sinks/pg1.yml": """
        connector: postgres
        connection: { host: 127.0.0.1, port: 5432, database: test, user: postgres }
        outputs:
          c: { table: orders }
          d: { table: public.Orders }
    """,
    "sinks/pg2.yml": """
        connector: postgres
        connection: { dsn: "postgresql://postgres@127.0.0.1:5432/test" }
        outputs:
          e: { table: public.orders }
          f: { table: other_db_orders }
    """,
    "sinks/my1.yml": """
        connector: mysql
        connection: { host: 127.0.0.1, port: 3306, database: test, user: root }
        outputs:
          g: { table: Orders }
    """,
    "sinks/my2.yml": """
        connector: mysql
        connection: { host: 127.0.0.1, port: 3306, database: other, user: root }
        outputs:
          h: { table: test.orders }
          i: { table: orders }
    """,
    "sinks/lake.yml": """
        connector: localfiles
        connection: { root: out }
        outputs:
          j: { path: lake/a }
          orders: { format: parquet }
    """,
    "sinks/lake2.yml": """
        connector: localfiles
        connection: { root: out/lake }
        outputs:
          k: { path: a/sub }
          m: { path: b }
    """,
    "sinks/lake3.yml": """
        connector: localfiles
        connection: { root: ./out/lake/.. }
        outputs:
          l: { path: orders.parquet/ }
    """,
}


def _writes(*outputs: str) -> dict[str, str]:
    return {
        f"pipelines/w_{sink}_{output}.sql": (
            f"INSERT INTO {{{{ sink('{sink}', '{output}') }}}}\nSELECT 1 AS id\n"
        )
        for sink, output in (o.split(".") for o in outputs)
    }


def test_two_outputs_resolving_to_one_physical_target_are_refused_at_validate(tmp_path: Path) -> None:
    files = _writes(
        "wh.a", "wh2.b", "wh3.orders", "pg1.c", "pg2.e", "pg1.d", "pg2.f",
        "my1.g", "my2.h", "my2.i", "lake.j", "lake2.k", "lake.orders", "lake3.l", "lake2.m",
    )  # fmt: skip
    result = pz(write_project(tmp_path / "proj", {**SHARED, **files}), "validate")
    assert result.exit_code == 2, result.output
    clashes = [line for line in result.lines if "PZ0228" in line]
    expected = [
        ("'wh.a'", "'wh2.b'", "table main.orders in out/wh.duckdb"),
        ("'pg1.c'", "'pg2.e'", "table public.orders in database test on 127.0.0.1:5432"),
        ("'my1.g'", "'my2.h'", "table test.orders on 127.0.0.1:3306"),
        ("'lake.j'", "'lake2.k'", "folder out/lake/a/sub"),
        ("'lake.orders'", "'lake3.l'", "folder out/orders.parquet"),
    ]
    assert len(clashes) == len(expected), result.output
    for first, second, what in expected:
        assert any(first in c and second in c and what in c for c in clashes), (first, result.output)
    # distinct targets pass: another file, case-sensitive postgres names, another database, another folder
    for fine in ("wh3.orders", "pg1.d", "pg2.f", "my2.i", "lake2.m"):
        assert not any(f"'{fine}'" in c for c in clashes), fine


def test_outputs_of_different_connectors_on_one_path_are_refused(tmp_path: Path) -> None:
    """PZ0228 across connectors: a DuckDB sink file inside a localfiles output folder (a replace swaps the
    folder whole, file included), or a folder output at the DuckDB file's own path."""
    files = {
        "project.yml": "name: cross\n",
        "sinks/wh.yml": """
            connector: duckdb
            connection: { path: out/lake/wh.duckdb }
            outputs:
              a: { table: a }
              b: { table: b }
        """,
        "sinks/lake.yml": """
            connector: localfiles
            connection: { root: out }
            outputs:
              whole: { path: lake }
              beside: { path: other }
        """,
        "sinks/same.yml": """
            connector: localfiles
            connection: { root: out/lake }
            outputs:
              clash: { path: wh.duckdb }
        """,
        **_writes("wh.a", "wh.b", "lake.whole", "lake.beside", "same.clash"),
    }
    result = pz(write_project(tmp_path / "proj", files), "validate")
    assert result.exit_code == 2, result.output
    clashes = [line for line in result.lines if "PZ0228" in line]
    assert len(clashes) == 3, result.output  # each output is reported with the first one it clashes with
    for output in ("'wh.a'", "'wh.b'", "'same.clash'"):
        assert any(output in c and "'lake.whole'" in c for c in clashes), result.output
    assert any("folder out/lake and table main.a in out/lake/wh.duckdb" in c for c in clashes), result.output
    assert not any("'lake.beside'" in c for c in clashes)
    del files["pipelines/w_lake_whole.sql"]
    (tmp_path / "proj" / "pipelines" / "w_lake_whole.sql").unlink()
    result = pz(tmp_path / "proj", "validate")
    clashes = [line for line in result.lines if "PZ0228" in line]
    assert len(clashes) == 2 and all("'same.clash'" in c for c in clashes), result.output


HOSTILE = {
    "project.yml": "name: hostile\n",
    "sources/dsrc.yml": """
        connector: duckdb
        connection: { path: in.duckdb }
        datasets:
          t1: { table: "\\"orders" }
    """,
    "sources/psrc.yml": """
        connector: postgres
        connection: { host: 127.0.0.1, database: test, user: postgres }
        datasets:
          t2: { table: "public.or\\"ders" }
    """,
    "sources/msrc.yml": """
        connector: mysql
        connection: { host: 127.0.0.1, database: test, user: root }
        datasets:
          t3: { table: "`orders" }
    """,
    "sinks/dsink.yml": """
        connector: duckdb
        connection: { path: out.duckdb }
        outputs:
          o1: { table: "a\\0b" }
    """,
    "sinks/psink.yml": """
        connector: postgres
        connection: { host: 127.0.0.1, database: test, user: postgres }
        outputs:
          o2: { table: "\\"unterminated" }
          o3: { table: "x23456789012345678901234567890123456789012345678901234567890123456" }
    """,
    "sinks/msink.yml": """
        connector: mysql
        connection: { host: 127.0.0.1, database: test, user: root }
        outputs:
          o4: { table: "test.`orders`x" }
          o5: { table: "a\\0b" }
          o6: { table: "y23456789012345678901234567890123456789012345678901234567890123456" }
    """,
    "sinks/files.yml": """
        connector: localfiles
        connection: { root: out }
        outputs:
          o7: { path: "a\\0b.parquet" }
    """,
    "pipelines/p.sql": """
        INSERT INTO {{ sink('dsink', 'o1') }}
        SELECT * FROM {{ source('dsrc', 't1') }}, {{ source('psrc', 't2') }}, {{ source('msrc', 't3') }}
    """,
}


def test_hostile_table_names_are_refused_at_validate_on_every_connector(tmp_path: Path) -> None:
    result = pz(write_project(tmp_path / "proj", HOSTILE), "validate")
    assert result.exit_code == 2, result.output
    errors = [line for line in result.lines if line.startswith("error: PZ0304")]
    expected = [
        ("sources/dsrc.yml", "t1", "unbalanced double quote"),
        ("sources/psrc.yml", "t2", "a double quote inside a bare name part"),
        ("sources/msrc.yml", "t3", "unterminated ` quote"),
        ("sinks/dsink.yml", "o1", "NUL"),
        ("sinks/psink.yml", "o2", "unbalanced double quote"),
        ("sinks/psink.yml", "o3", "longer than PostgreSQL's 63 bytes"),
        ("sinks/msink.yml", "o4", "after a quoted part"),
        ("sinks/msink.yml", "o5", "NUL"),
        ("sinks/msink.yml", "o6", "longer than MySQL's 64 characters"),
        ("sinks/files.yml", "o7", "NUL"),
    ]
    assert len(errors) == len(expected), result.output
    for file, _name, cause in expected:
        assert any(file in e and cause in e for e in errors), (file, cause, result.output)
    assert "Traceback" not in result.output


@pytest.mark.parametrize("universal", [False, True], ids=["native", "universal"])
@pytest.mark.parametrize(
    ("column", "expr"),
    [
        ("d", "CASE WHEN range = 7 THEN 'nan'::DOUBLE ELSE range END"),
        ("f", "CASE WHEN range = 7 THEN '-inf'::FLOAT ELSE range END"),
        ("l", "[1.5, CASE WHEN range = 7 THEN 'inf'::DOUBLE END]"),
        ("s", "{'x': CASE WHEN range = 7 THEN 'nan'::DOUBLE ELSE 1 END}"),
    ],
    ids=["double", "float", "list", "struct"],
)
def test_json_output_refuses_nan_and_infinity(
    tmp_path: Path, universal: bool, column: str, expr: str
) -> None:
    project = write_project(
        tmp_path / "proj",
        {
            "project.yml": f"name: js\nengine: {{ force_universal: {str(universal).lower()} }}\n",
            "sinks/lake.yml": """
                connector: localfiles
                connection: { root: out }
                outputs:
                  nums: { format: json }
                  keep: { format: json, strategy: append }
            """,
            "pipelines/nums.sql": f"""
                INSERT INTO {{{{ sink('lake', 'nums') }}}}
                INSERT INTO {{{{ sink('lake', 'keep') }}}}
                SELECT range AS id, 'NaN' AS label, {expr} AS {column} FROM range(10)
            """,
        },
    )
    result = pz(project, "run")
    assert result.exit_code == 1, result.output
    for output in ("nums", "keep"):
        assert (
            f"PZ0519: sink 'lake' output '{output}': column {column} holds NaN or Infinity" in result.output
        )
    out = project / "out"
    assert not out.exists() or [p for p in out.rglob("*") if p.is_file()] == []  # no file, no temp left


@pytest.mark.parametrize("universal", [False, True], ids=["native", "universal"])
def test_json_output_of_finite_values_is_valid_json(tmp_path: Path, universal: bool) -> None:
    import json

    project = write_project(
        tmp_path / "proj",
        {
            "project.yml": f"name: js\nengine: {{ force_universal: {str(universal).lower()} }}\n",
            "sinks/lake.yml": "connector: localfiles\nconnection: { root: out }\n"
            "outputs:\n  nums: { format: json }\n",
            "pipelines/nums.sql": """
                INSERT INTO {{ sink('lake', 'nums') }}
                SELECT range AS id, 'NaN' AS label, range / 3 AS d, [range * 0.5] AS l FROM range(5)
            """,
        },
    )
    result = pz(project, "run")
    assert result.exit_code == 0, result.output
    lines = (project / "out" / "nums.json" / "part-00000.json").read_text().splitlines()
    rows = [json.loads(line) for line in lines]  # strict: json.loads refuses bare NaN only via parse_constant
    assert [r["id"] for r in rows] == [0, 1, 2, 3, 4] and rows[0]["label"] == "NaN"
