"""Incremental reads never lose rows:

- a watermark() lookback (`c > {{ watermark() }} - INTERVAL 1 HOUR`, the docs' late-data example) is pushed
  down whole, on every connector and tier, so a row that committed late inside the hour is read; a value side
  pz cannot push down exactly is PZ0224;
- a cursor value pz cannot order (a PostgreSQL 'infinity') fails the load with PZ0529 and is never committed;
  timestamptz cursors are read and compared in UTC, and their watermark is stored with its zone;
- an incremental dataset into a replace output is PZ0231 at validate.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import secrets
from pathlib import Path

import duckdb
import pytest

from tests.conftest import PG_HOST, PG_PORT, PG_USER, fresh_pg_database, pz, write_project
from tests.functional.test_connector_s3 import ENV, PROJECT_YML, put
from tests.functional.test_incremental import (
    CURSORS,
    CursorType,
    MariaDB,
    backend,
    load_result,
    make_project,
    run_ok,
    sink_ids,
    state,
)
from tests.objstores import moto_server

WM = "{{ watermark('src', 'items') }}"


def _lookback_pipeline(where: str) -> dict[str, str]:
    return {
        "pipelines/items.sql": "INSERT INTO {{ sink('wh', 'items') }}\n"
        f"SELECT * FROM {{{{ source('src', 'items') }}}} AS i\nWHERE {where}\n"
    }


KINDS = [
    "pg_native",
    "pg_universal",
    "mariadb",
    "duckdb_native",
    "duckdb_universal",
    "csv_native",
    "csv_universal",
]


@pytest.mark.parametrize("kind", KINDS)
def test_a_lookback_is_pushed_down_whole_and_reads_the_late_row(tmp_path: Path, kind: str) -> None:
    ct = CURSORS["timestamp"]
    with backend(kind, tmp_path) as src:
        src.create(ct, range(1, 4))
        project = make_project(
            tmp_path / "proj",
            src.source_yaml(ct, "{ mode: full }"),
            strategy="merge",
            extra=_lookback_pipeline(f"i.c > {WM} - INTERVAL 1 HOUR"),
        )
        run_ok(project)
        committed = state(project)[("src", "items")]
        assert committed == ct.value(3)
        # a row that committed late, its cursor below the watermark but inside the hour, and a new row
        src.insert(ct, [(40, 2), (4, 4)])
        assert "next read: c > 2024-01-01 09:00:03.000001" in pz(project, "plan").output
        run_ok(project)
        load = load_result(project)
        assert load["watermark"]["low"] == "2024-01-01 09:00:03.000001"
        assert load["watermark"]["trimmed"] == 0  # the source itself applied the lookback
        assert load["rows"] == 5  # the hour's overlap (1, 2, 3), the late row and the new one
        assert sink_ids(project) == [1, 2, 3, 4, 40]
        assert state(project)[("src", "items")] == ct.value(4)  # the watermark itself never goes back


def test_a_lookback_on_an_object_store_is_pushed_down_whole(tmp_path: Path) -> None:
    """s3 (and azureblob, the same native file read) filter their read with the evaluated bound."""
    ct = CURSORS["timestamp"]

    def csv(rows: list[tuple[int, int]]) -> bytes:
        return ("id,c,v\n" + "".join(f"{i},{ct.value(c)},v{i}\n" for i, c in rows)).encode()

    with moto_server() as s3:
        bucket = s3.bucket(f"pz-{secrets.token_hex(4)}")
        put(s3, f"{bucket}/items/a.csv", csv([(1, 1), (2, 2), (3, 3)]))
        source = (
            f'connector: s3\nconnection: {{ bucket: {bucket}, endpoint: "{s3.endpoint}", '
            "access_key_id: \"{{ env('S3_ID') }}\", secret_access_key: \"{{ env('S3_SECRET') }}\" }\n"
            "datasets:\n  items:\n    format: csv\n    path: 'items/*.csv'\n"
            "    columns: { id: int, c: timestamp, v: varchar }\n"
        )
        project = make_project(
            tmp_path / "proj",
            source,
            strategy="merge",
            extra={**_lookback_pipeline(f"i.c > {WM} - INTERVAL 1 HOUR"), "project.yml": PROJECT_YML},
        )
        assert pz(project, "run", env=ENV).exit_code == 0
        put(s3, f"{bucket}/items/b.csv", csv([(40, 2), (4, 4)]))
        assert pz(project, "run", env=ENV).exit_code == 0
        load = load_result(project)
        assert load["watermark"]["low"] == "2024-01-01 09:00:03.000001" and load["watermark"]["trimmed"] == 0
        assert load["rows"] == 5
        assert sink_ids(project) == [1, 2, 3, 4, 40]


def test_a_lookback_into_an_append_output_must_accept_duplicates(tmp_path: Path) -> None:
    project = make_project(
        tmp_path / "proj",
        "connector: duckdb\nconnection: { path: src.duckdb }\ndatasets:\n  items:\n    table: items\n"
        "    columns: { id: int, c: timestamp, v: varchar }\n",
        extra={
            **_lookback_pipeline(f"i.c > {WM} - INTERVAL 1 HOUR"),
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: wh.duckdb }\n"
            "outputs:\n  items: { strategy: append }\n",
        },
    )
    result = pz(project, "validate")
    assert result.exit_code == 2
    assert "error: PZ0214 sinks/wh.yml:4:" in result.output, result.output


@pytest.mark.parametrize(
    ("cursor", "where", "cause"),
    [
        ("timestamp", f"i.c > {WM} - INTERVAL (random() * 2) HOUR", "its value side calls random()"),
        ("timestamp", f"i.c > greatest({WM}, now() - INTERVAL 7 DAY)", "its value side calls now()"),
        (
            "date",
            f"i.c > {WM} - INTERVAL 12 HOUR",
            "its value side is of type TIMESTAMP, which a DATE cursor cannot always hold exactly",
        ),
        (
            '"decimal(12,2)"',
            f"i.c > {WM} * 0.5",
            "its value side is of type DECIMAL(14,3), which a DECIMAL(12,2) cursor cannot always hold",
        ),
    ],
)
def test_a_value_side_pz_cannot_push_down_exactly_is_pz0224(
    tmp_path: Path, cursor: str, where: str, cause: str
) -> None:
    project = make_project(
        tmp_path / "proj",
        "connector: duckdb\nconnection: { path: src.duckdb }\ndatasets:\n  items:\n    table: items\n"
        f"    columns: {{ id: int, c: {cursor}, v: varchar }}\n",
        strategy="merge",
        extra=_lookback_pipeline(where),
    )
    result = pz(project, "validate")
    assert result.exit_code == 2, result.output
    lines = [line for line in result.lines if line.startswith("error: ")]
    assert len(lines) == 1 and lines[0].startswith("error: PZ0224 pipelines/items.sql:3:"), result.output
    assert "cannot push down to the source exactly" in lines[0] and cause in lines[0], lines[0]
    assert "next: write the lower bound as an expression of {{ watermark('src', 'items') }}" in result.output


# -- cursor values pz cannot order; timestamptz ---------------------------------------------------------
def _pg_project(root: Path, db: str, columns: str, sync: str, extra: dict[str, str] | None = None) -> Path:
    source = (
        f"connector: postgres\nconnection: {{ host: {PG_HOST}, port: {PG_PORT}, user: {PG_USER}, "
        f"database: {db} }}\n"
    )
    return make_project(
        root,
        f"{source}datasets:\n  items:\n    table: public.items\n    columns: {columns}\n    sync: {sync}\n",
        strategy="merge",
        extra=extra,
    )


@pytest.mark.parametrize("universal", [False, True], ids=["native", "universal"])
def test_an_infinity_cursor_fails_the_load_and_is_never_committed(tmp_path: Path, universal: bool) -> None:
    setup = (
        "CREATE TABLE items (id int PRIMARY KEY, c timestamp, v text);"
        "INSERT INTO items VALUES (1, '2024-01-01 10:00:00', 'a'), (2, 'infinity', 'forever')"
    )
    with fresh_pg_database(setup) as db:
        project = _pg_project(tmp_path / "proj", db, "{ id: int, c: timestamp, v: varchar }", "")
        yml = project / "sources" / "src.yml"
        sync = "{ mode: incremental, cursor: c }"
        engine = "engine: { force_universal: true }\n" if universal else ""
        yml.write_text(yml.read_text().replace("    sync: \n", f"    sync: {sync}\n") + engine)
        result = pz(project, "run")
        assert result.exit_code == 1, result.output
        line = next(line for line in result.lines if "PZ0529" in line)
        assert "source 'src' dataset 'items'" in line and "'infinity'" in line, line
        assert "column 'c'" in line
        assert state(project) == {}  # nothing committed: the next run still reads every row


# the same instants written with different offsets: 10:00, 10:30, then 10:20 (older) and 10:45 UTC
ZONED_VALUES = {
    1: "2024-01-01 10:00:00+00:00",
    2: "2024-01-01 12:30:00+02:00",
    3: "2024-01-01 12:20:00+02:00",
    4: "2024-01-01 08:45:00-02:00",
}
ZONED = CursorType("timestamptz", "timestamptz", "TIMESTAMP(6)", lambda i: ZONED_VALUES[i])


class _UtcMariaDB(MariaDB):
    """MariaDB TIMESTAMP columns hold instants; literals carry no offset, so rows are written in UTC."""

    def insert(self, ct: CursorType, rows: list[tuple[int, int | None]]) -> None:
        utc = CursorType(ct.name, ct.pg, ct.my, lambda i: _utc_naive(ct.value(i)))
        with self.con.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
        super().insert(utc, rows)


def _utc_naive(text: str) -> str:
    moment = dt.datetime.fromisoformat(text).astimezone(dt.UTC)
    return moment.replace(tzinfo=None).isoformat(sep=" ")


@pytest.mark.parametrize("kind", KINDS)
def test_a_timestamptz_cursor_is_compared_in_utc_and_stored_with_its_zone(tmp_path: Path, kind: str) -> None:
    with backend(kind, tmp_path) as src:
        if isinstance(src, MariaDB):
            src.__class__ = _UtcMariaDB
        src.create(ZONED, range(1, 3))
        project = make_project(
            tmp_path / "proj", src.source_yaml(ZONED, "{ mode: incremental, cursor: c }"), strategy="merge"
        )
        run_ok(project)
        assert state(project)[("src", "items")] == "2024-01-01 10:30:00+00:00"  # in UTC, with its zone
        src.insert(ZONED, [(3, 3), (4, 4)])
        assert "next read: c > 2024-01-01 10:30:00+00:00" in pz(project, "plan").output
        run_ok(project)
        load = load_result(project)
        assert load["rows"] == 1 and load["watermark"]["trimmed"] == 0, load  # 10:20 UTC is older
        assert sink_ids(project) == [1, 2, 4]
        assert state(project)[("src", "items")] == "2024-01-01 10:45:00+00:00"


def test_a_timestamptz_start_and_lag_are_taken_in_utc(tmp_path: Path) -> None:
    with backend("pg_native", tmp_path) as src:
        src.create(ZONED, range(1, 3))
        sync = '{ mode: incremental, cursor: c, start: "2024-01-01 12:15:00+02:00", lag: 30m }'
        project = make_project(tmp_path / "proj", src.source_yaml(ZONED, sync), strategy="merge")
        assert "next read: c > 2024-01-01 10:15:00+00:00" in pz(project, "plan").output
        run_ok(project)
        assert sink_ids(project) == [2]
        assert "next read: c > 2024-01-01 10:00:00+00:00" in pz(project, "plan").output  # 10:30 - 30m


# -- incremental into replace --------------------------------------------------------------------------
INCREMENTAL_SOURCE = (
    "connector: duckdb\nconnection: { path: src.duckdb }\ndatasets:\n  items:\n    table: items\n"
    "    columns: { id: int, c: timestamp, v: varchar }\n"
)


@pytest.mark.parametrize(
    ("route", "sink", "place"),
    [
        ("yaml", "connector: duckdb\nconnection: { path: wh.duckdb }\n", r"pipelines/copy\.sql:1:13"),
        (
            "sql",
            "connector: duckdb\nconnection: { path: wh.duckdb }\noutputs:\n  copy: { strategy: replace }\n",
            r"sinks/wh\.yml:4:\d+",
        ),
    ],
)
def test_an_incremental_dataset_into_a_replace_output_is_pz0231(
    tmp_path: Path, route: str, sink: str, place: str
) -> None:
    sync = "    sync: { mode: incremental, cursor: c }\n" if route == "yaml" else ""
    where = f"WHERE i.c > {WM}" if route == "sql" else ""
    project = write_project(
        tmp_path / "proj",
        {
            "project.yml": "name: inc\n",
            "sources/src.yml": INCREMENTAL_SOURCE + sync,
            "sinks/wh.yml": sink,
            "pipelines/stage.sql": f"SELECT * FROM {{{{ source('src', 'items') }}}} AS i {where}\n",
            "pipelines/copy.sql": "INSERT INTO {{ sink('wh', 'copy') }}\nSELECT * FROM {{ ref('stage') }}\n",
        },
    )
    for command in ("validate", "plan", "run"):
        result = pz(project, command)
        assert result.exit_code == 2, (command, result.output)
        errors = [line for line in result.lines if line.startswith("error: ")]
        assert len(errors) == 1, result.output
        assert re.match(rf"error: PZ0231 {place}: sink 'wh' output 'copy' replaces its target", errors[0]), (
            errors
        )
        assert (
            "incremental source 'src' dataset 'items' (source('src', 'items') -> stage -> copy)" in errors[0]
        )
        assert "the target would hold the last delta alone" in errors[0]
        assert "next: give output 'copy' in sinks/wh.yml strategy: merge with keys:" in result.output
    assert not (project / "wh.duckdb").exists()


def test_a_full_read_into_replace_is_untouched(tmp_path: Path) -> None:
    with contextlib.closing(duckdb.connect(str(tmp_path / "src.duckdb"))) as con:
        con.execute("CREATE TABLE items AS SELECT 1 AS id, TIMESTAMP '2024-01-01' AS c, 'a' AS v")
    project = write_project(
        tmp_path / "proj",
        {
            "project.yml": "name: inc\n",
            "sources/src.yml": INCREMENTAL_SOURCE.replace("src.duckdb", str(tmp_path / "src.duckdb")),
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: wh.duckdb }\n",
            "pipelines/copy.sql": "INSERT INTO {{ sink('wh', 'copy') }}\n"
            "SELECT * FROM {{ source('src', 'items') }}\n",
        },
    )
    run_ok(project)
