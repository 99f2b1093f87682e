"""The narrowing rule, table-driven: which result types fit which existing target columns without loss,
and how PostgreSQL and MySQL column types are normalized for it."""

from __future__ import annotations

import pytest

from pipelinez.connectors.mysql.target_types import normalize as mysql_normalize
from pipelinez.connectors.postgres.target_types import normalize as pg_normalize
from pipelinez.engine.nodes.type_fit import ResultColumn, Target, misfit

FITS = [
    ("INTEGER", "INTEGER"),
    ("SMALLINT", "INTEGER"),
    ("INTEGER", "BIGINT"),
    ("UTINYINT", "SMALLINT"),
    ("USMALLINT", "INTEGER"),
    ("UINTEGER", "BIGINT"),
    ("UINTEGER", "UINTEGER"),
    ("UTINYINT", "UINTEGER"),
    ("SMALLINT", "MEDIUMINT"),
    ("BOOLEAN", "BOOLEAN"),
    ("BOOLEAN", "TINYINT"),
    ("INTEGER", "DECIMAL(10,0)"),
    ("BIGINT", "DECIMAL(19,0)"),
    ("BIGINT", "DECIMAL"),
    ("HUGEINT", "DECIMAL(38,0)"),
    ("UBIGINT", "DECIMAL(20,0)"),
    ("INTEGER", "DOUBLE"),
    ("SMALLINT", "FLOAT"),
    ("DECIMAL(10,2)", "DECIMAL(12,2)"),
    ("DECIMAL(10,2)", "DECIMAL(11,3)"),
    ("DECIMAL(38,2)", "DECIMAL(38,2)"),
    ("DECIMAL(38,10)", "DECIMAL"),
    ("DECIMAL(9,0)", "INTEGER"),
    ("DECIMAL(18,0)", "BIGINT"),
    ("DECIMAL(15,4)", "DOUBLE"),
    ("FLOAT", "DOUBLE"),
    ("DOUBLE", "DOUBLE"),
    ("DOUBLE", "DECIMAL"),
    ("DATE", "DATE"),
    ("DATE", "TIMESTAMP"),
    ("TIMESTAMP", "TIMESTAMP"),
    ("TIMESTAMP_NS", "TIMESTAMP"),
    ("TIMESTAMP_S", "TIMESTAMP(0)"),
    ("TIMESTAMP_MS", "TIMESTAMP(3)"),
    ("TIMESTAMP", "TIMESTAMP(6)"),
    ("TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ"),
    ("TIMESTAMP WITH TIME ZONE", "TIMESTAMP WITH TIME ZONE"),
    ("TIME", "TIME(6)"),
    ("TIME WITH TIME ZONE", "TIMETZ"),
    ("VARCHAR", "VARCHAR"),
    ("BLOB", "BLOB"),
    ("UUID", "UUID"),
    ("INTEGER[]", "INTEGER[]"),
    ("JSON", "jsonb"),
    ("VARCHAR", "INTEGER"),  # cross-family: the target system refuses bad values loudly
    ("INTERVAL", "interval"),
]

NARROWS = [
    ("DECIMAL(10,2)", "INTEGER", "numeric scale"),
    ("DECIMAL(10,2)", "DECIMAL(10,1)", "numeric scale"),
    ("DECIMAL(38,2)", "DECIMAL(12,2)", "numeric precision"),
    ("DECIMAL(10,0)", "INTEGER", "numeric precision"),
    ("DECIMAL(19,0)", "BIGINT", "numeric precision"),
    ("DECIMAL(5,0)", "UINTEGER", "signedness"),
    ("DECIMAL(16,2)", "DOUBLE", "numeric precision"),
    ("DECIMAL(7,2)", "FLOAT", "numeric precision"),
    ("BIGINT", "INTEGER", "integer width"),
    ("HUGEINT", "BIGINT", "integer width"),
    ("INTEGER", "SMALLINT", "integer width"),
    ("INTEGER", "MEDIUMINT", "integer width"),
    ("UINTEGER", "INTEGER", "integer width"),
    ("UBIGINT", "BIGINT", "integer width"),
    ("INTEGER", "UINTEGER", "signedness"),
    ("TINYINT", "UBIGINT", "signedness"),
    ("BIGINT", "DECIMAL(18,0)", "numeric precision"),
    ("INTEGER", "DECIMAL(10,2)", "numeric precision"),
    ("BIGINT", "DOUBLE", "integer width"),
    ("INTEGER", "FLOAT", "integer width"),
    ("DOUBLE", "FLOAT", "float"),
    ("DOUBLE", "BIGINT", "float"),
    ("FLOAT", "DECIMAL(10,2)", "float"),
    ("INTEGER", "BOOLEAN", "boolean"),
    ("BOOLEAN", "DECIMAL(2,2)", "numeric precision"),
    ("TIMESTAMP", "DATE", "timestamp -> date"),
    ("TIMESTAMP WITH TIME ZONE", "DATE", "timestamp -> date"),
    ("TIMESTAMP", "TIME", "timestamp"),
    ("DATE", "TIME", "time of day"),
    ("TIMESTAMP WITH TIME ZONE", "TIMESTAMP", "time zone"),
    ("TIMESTAMP", "TIMESTAMPTZ", "time zone"),
    ("TIME WITH TIME ZONE", "TIME", "time zone"),
    ("TIMESTAMP", "TIMESTAMP(0)", "time precision"),
    ("TIMESTAMP_MS", "TIMESTAMP(2)", "time precision"),
    ("TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ(3)", "time precision"),
    ("TIME", "TIME(0)", "time precision"),
]


@pytest.mark.parametrize(("result", "target"), FITS)
def test_fits(result: str, target: str) -> None:
    assert misfit(ResultColumn("c", result), Target("c", target, target)) is None


@pytest.mark.parametrize(("result", "target", "why"), NARROWS)
def test_narrows(result: str, target: str, why: str) -> None:
    reason = misfit(ResultColumn("c", result), Target("c", target, target))
    assert reason is not None and why in reason


@pytest.mark.parametrize(
    ("chars", "nbytes", "target", "max_bytes", "fits"),
    [
        (20, 20, "VARCHAR(20)", None, True),
        (21, 21, "VARCHAR(20)", None, False),
        (5, 10, "VARCHAR(5)", None, True),  # characters, not bytes, bound a varchar
        (None, None, "VARCHAR(3)", None, True),  # no values: nothing to lose
        (100, 300, "VARCHAR", 255, False),  # MySQL TINYTEXT holds 255 bytes
        (100, 200, "VARCHAR", 255, True),
        (10_000, 10_000, "VARCHAR", None, True),
    ],
)
def test_text_length_is_measured(
    chars: int | None, nbytes: int | None, target: str, max_bytes: int | None, fits: bool
) -> None:
    reason = misfit(ResultColumn("c", "VARCHAR", chars, nbytes), Target("c", target, target, max_bytes))
    assert (reason is None) is fits
    if not fits:
        assert reason is not None and "length" in reason


@pytest.mark.parametrize("result", ["INTEGER", "DECIMAL(10,2)", "TIMESTAMP", "DATE", "UUID", "INTEGER[]"])
def test_values_that_are_not_text_are_measured_as_text(result: str) -> None:
    target = Target("c", "VARCHAR(3)", "varchar(3)")
    reason = misfit(ResultColumn("c", result, 4, 4), target)
    assert reason == "written as text its longest value has 4 characters, the column holds 3 (text length)"
    assert misfit(ResultColumn("c", result, 3, 3), target) is None
    assert misfit(ResultColumn("c", result, 4, 4), Target("c", "VARCHAR", "text")) is None


def test_binary_length_in_bytes() -> None:
    assert misfit(ResultColumn("b", "BLOB", None, 17), Target("b", "BLOB", "varbinary(16)", 16)) is not None
    assert misfit(ResultColumn("b", "BLOB", None, 16), Target("b", "BLOB", "varbinary(16)", 16)) is None


def test_utc_wall_time_column_takes_zoned_timestamps() -> None:
    target = Target("t", "TIMESTAMP(6)", "datetime(6)", utc=True)
    assert misfit(ResultColumn("t", "TIMESTAMP WITH TIME ZONE"), target) is None
    assert misfit(ResultColumn("t", "TIMESTAMP"), target) is None
    assert misfit(ResultColumn("t", "TIMESTAMP"), Target("t", "TIMESTAMP(0)", "datetime", utc=True))


@pytest.mark.parametrize(
    ("pg", "normalized"),
    [
        ("integer", "INTEGER"),
        ("bigint", "BIGINT"),
        ("numeric(12,2)", "DECIMAL(12,2)"),
        ("numeric", "DECIMAL"),
        ("double precision", "DOUBLE"),
        ("real", "FLOAT"),
        ("character varying(20)", "VARCHAR(20)"),
        ("character varying", "VARCHAR"),
        ("character(3)", "VARCHAR(3)"),
        ("text", "VARCHAR"),
        ("timestamp without time zone", "TIMESTAMP"),
        ("timestamp(3) without time zone", "TIMESTAMP(3)"),
        ("timestamp with time zone", "TIMESTAMPTZ"),
        ("timestamp(0) with time zone", "TIMESTAMPTZ(0)"),
        ("time(2) without time zone", "TIME(2)"),
        ("time with time zone", "TIMETZ"),
        ("date", "DATE"),
        ("integer[]", "integer[]"),
        ("uuid", "uuid"),
    ],
)
def test_postgres_types_normalize(pg: str, normalized: str) -> None:
    assert pg_normalize(pg) == normalized


@pytest.mark.parametrize(
    ("mysql", "normalized", "max_bytes", "utc"),
    [
        ("int(11)", "INTEGER", None, False),
        ("int(10) unsigned", "UINTEGER", None, False),
        ("tinyint(1)", "TINYINT", None, False),
        ("mediumint(8) unsigned", "UMEDIUMINT", None, False),
        ("bigint(20) unsigned", "UBIGINT", None, False),
        ("decimal(10,2)", "DECIMAL(10,2)", None, False),
        ("double", "DOUBLE", None, False),
        ("float", "FLOAT", None, False),
        ("varchar(20)", "VARCHAR(20)", None, False),
        ("char(2)", "VARCHAR(2)", None, False),
        ("tinytext", "VARCHAR", 255, False),
        ("text", "VARCHAR", 65_535, False),
        ("longtext", "VARCHAR", None, False),
        ("varbinary(16)", "BLOB", 16, False),
        ("longblob", "BLOB", None, False),
        ("date", "DATE", None, False),
        ("datetime", "TIMESTAMP(0)", None, True),
        ("datetime(6)", "TIMESTAMP(6)", None, True),
        ("timestamp(3)", "TIMESTAMP(3)", None, True),
        ("time(6)", "TIME(6)", None, False),
        ("enum('a','b')", "enum('a','b')", None, False),
    ],
)
def test_mysql_types_normalize(mysql: str, normalized: str, max_bytes: int | None, utc: bool) -> None:
    col = mysql_normalize(mysql)
    assert (col.type, col.max_bytes, col.utc) == (normalized, max_bytes, utc)


def test_every_type_a_sink_creates_accepts_its_own_result_type() -> None:
    """Merging twice must never be refused: a table pz created from result type R takes R again."""
    pg_created = {  # DuckDB result type -> the PostgreSQL sink's column type for it (types.py)
        "HUGEINT": "numeric(38,0)",
        "UBIGINT": "numeric(20,0)",
        "UINTEGER": "bigint",
        "DECIMAL(38,2)": "numeric(38,2)",
        "TIMESTAMP_NS": "timestamp without time zone",
        "TIMESTAMP WITH TIME ZONE": "timestamp with time zone",
        "TIME": "time without time zone",
    }
    for result, pg in pg_created.items():
        assert misfit(ResultColumn("c", result), Target("c", pg_normalize(pg), pg)) is None, result
    mysql_created = {  # the MySQL sink's column type for each (types.mysql_column_type)
        "BOOLEAN": "tinyint(1)",
        "UINTEGER": "int(10) unsigned",
        "HUGEINT": "decimal(38,0)",
        "TIMESTAMP WITH TIME ZONE": "datetime(6)",
        "TIMESTAMP": "datetime(6)",
        "TIME": "time(6)",
        "VARCHAR": "longtext",
    }
    for result, mysql in mysql_created.items():
        col = mysql_normalize(mysql)
        assert (
            misfit(ResultColumn("c", result, 3, 3), Target("c", col.type, mysql, col.max_bytes, col.utc))
            is None
        )


def test_mysql_decimal_without_scale_has_scale_zero() -> None:
    assert mysql_normalize("decimal(10)").type == "DECIMAL(10,0)"
    assert mysql_normalize("decimal").type == "DECIMAL(10,0)"


@pytest.mark.parametrize(
    ("collation", "folds"),
    [
        ("utf8mb4_general_ci", ("case", "accents", "trailing_spaces")),
        ("utf8mb4_unicode_520_nopad_ci", ("case", "accents")),
        ("utf8mb4_0900_ai_ci", ("case", "accents")),
        ("utf8mb4_0900_as_ci", ("case",)),
        ("utf8mb4_0900_as_cs", ()),
        ("utf8mb4_bin", ("trailing_spaces",)),
        ("utf8mb4_nopad_bin", ()),
        ("latin1_swedish_ci", ("case", "accents", "trailing_spaces")),
        (None, ()),
        ("binary", ()),
    ],
)
def test_mysql_collations_say_what_they_ignore(collation: str | None, folds: tuple[str, ...]) -> None:
    from pipelinez.connectors.mysql.target_types import collation_folds

    assert collation_folds(collation) == folds


def test_postgres_and_duckdb_comparisons_say_what_they_ignore() -> None:
    from pipelinez.connectors.duckdb.strategies import collation_folds, collations
    from pipelinez.connectors.postgres.target_types import folds

    assert folds("citext", True, "") == ("case",)
    assert folds("varchar", False, "und-u-ks-level2") == ("case",)
    assert folds("text", False, "und-u-ks-level1") == ("case", "accents")
    assert folds("bpchar", True, "C") == ("trailing_spaces",)
    assert folds("text", True, "en_US.utf8") == ()
    found = collations(
        'CREATE TABLE t(k VARCHAR COLLATE nocase, "a ""b" VARCHAR COLLATE nocase.noaccent, v VARCHAR);'
    )
    assert found == {"k": "nocase", 'a "b': "nocase.noaccent"}
    assert collation_folds(found['a "b']) == ("case", "accents") and collation_folds("") == ()
