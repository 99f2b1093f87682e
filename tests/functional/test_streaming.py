"""A pipeline whose only reader is one replace into an atomically replacing sink, or one append into a sink
that appends in one transaction (the DuckDB file), is streamed into it: not stored in staging, computed once
while written. Everything else is stored, and `pz plan` says why. Results are the same either way, on both
tiers; a query failing half way fails the write with nothing written."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from tests.conftest import pz, write_project

BASE = {
    "project.yml": "name: streams\n",
    "sources/f.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          t: { format: csv, path: t.csv, columns: { id: bigint, v: varchar } }
    """,
    "sinks/wh.yml": """
        connector: duckdb
        connection: { path: out/wh.duckdb }
        outputs:
          merged: { strategy: merge, keys: [id] }
          appended: { strategy: append }
    """,
    "sinks/lake.yml": """
        connector: localfiles
        connection: { root: out/lake }
        outputs:
          p: { format: parquet }
          a: { format: parquet, strategy: append }
    """,
    "data/t.csv": "id,v\n1,a\n2,b\n3,c\n",
    **{
        f"pipelines/{name}.sql": f"INSERT INTO {{{{ sink('wh', '{name}') }}}}\n"
        "SELECT * FROM {{ source('f', 't') }}\n"
        for name in ("plain", "merged", "appended", "checked")
    },
    "pipelines/checked.yml": "checks:\n  - not_null: { columns: [id] }\n",
    "pipelines/shared.sql": "SELECT id, upper(v) AS v FROM {{ source('f', 't') }}\n",
    "pipelines/p.sql": "INSERT INTO {{ sink('lake', 'p') }}\nSELECT * FROM {{ ref('shared') }}\n",
    "pipelines/q.sql": "INSERT INTO {{ sink('wh', 'q') }}\nSELECT * FROM {{ ref('shared') }}\n",
    "pipelines/a.sql": "INSERT INTO {{ sink('lake', 'a') }}\nSELECT * FROM {{ source('f', 't') }}\n",
}

NOTES = {
    "plain": "streamed into wh.plain: its only reader, so not stored in staging",
    "p": "streamed into lake.p: its only reader, so not stored in staging",
    "q": "streamed into wh.q: its only reader, so not stored in staging",
    "merged": "stored in staging: merge checks its keys on the stored result first",
    "appended": "streamed into wh.appended: its only reader, so not stored in staging",
    "a": "stored in staging: append may commit part of a result that fails half way",
    "checked": "stored in staging: 1 check(s) read it before its sink writes do",
    "shared": "stored in staging: 2 nodes read it, so it is computed once",
}


def _plan_notes(output: str) -> dict[str, str]:
    notes, name = {}, ""
    for line in output.splitlines():
        if line[:3].strip().isdigit() and ". " in line:
            name = line.split(". ", 1)[1].split()[0]
        elif line.strip().startswith("note: "):
            notes[name] = line.strip().removeprefix("note: ")
    return notes


def test_the_plan_says_which_pipelines_are_streamed_and_why_the_others_are_stored(project_dir: Path) -> None:
    write_project(project_dir, BASE)
    result = pz(project_dir, "plan")
    assert result.exit_code == 0, result.output
    assert {k: v for k, v in _plan_notes(result.output).items() if k in NOTES} == NOTES
    only_pipeline = pz(project_dir, "plan", "--exclude", "wh.plain")
    assert (
        _plan_notes(only_pipeline.output)["plain"]
        == "stored in staging: its sink write wh.plain is not selected"
    )


@pytest.mark.parametrize("universal", [False, True], ids=["native", "universal"])
def test_streamed_and_stored_pipelines_write_the_same_rows(project_dir: Path, universal: bool) -> None:
    engine = "engine: { force_universal: true }\n" if universal else ""
    write_project(project_dir, {**BASE, "project.yml": f"name: streams\n{engine}"})
    result = pz(project_dir, "run")
    assert result.exit_code == 0, result.output
    assert any(line.startswith("ok plain streamed into wh.plain ") for line in result.lines), result.output
    assert result.node("plain")["rows"] == 3 and result.node("wh.plain")["rows"] == 3
    assert result.node("plain")["message"] == "streamed into wh.plain, not stored in staging"
    with duckdb.connect(str(project_dir / "out" / "wh.duckdb"), read_only=True) as con:
        for table in ("plain", "merged", "appended", "checked"):
            assert con.execute(f"SELECT * FROM {table} ORDER BY id").fetchall() == [
                (1, "a"),
                (2, "b"),
                (3, "c"),
            ]
        assert con.execute("SELECT * FROM q ORDER BY id").fetchall() == [(1, "A"), (2, "B"), (3, "C")]
    lake = duckdb.sql(f"SELECT * FROM '{project_dir}/out/lake/p.parquet/*.parquet' ORDER BY id").fetchall()
    assert lake == [(1, "A"), (2, "B"), (3, "C")]
    staging = sorted((project_dir / ".pz" / "runs").iterdir())[-1] / "staging.duckdb"
    with duckdb.connect(str(staging), read_only=True) as con:
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        views = {
            r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
        }
    assert tables == {"src_f__t", "merged", "checked", "shared", "a"}
    assert views == {"plain", "p", "q", "appended"}


def test_a_streamed_query_that_fails_half_way_fails_its_write_and_leaves_the_target(
    project_dir: Path,
) -> None:
    write_project(project_dir, BASE)
    assert pz(project_dir, "run", "-s", "wh.plain").exit_code == 0
    write_project(
        project_dir,
        {
            "data/t.csv": "id,v\n1,a\n2,b\n3,c\n4,x\n",
            "pipelines/plain.sql": "INSERT INTO {{ sink('wh', 'plain') }}\n"
            "SELECT id, CASE WHEN id < 4 THEN v ELSE CAST(v AS INT)::VARCHAR END AS v\n"
            "FROM {{ source('f', 't') }}\n",
        },
    )
    result = pz(project_dir, "run", "-s", "wh.plain")
    assert result.exit_code == 1, result.output
    error = result.node("wh.plain")["error"]
    assert error["code"] == "PZ0507", error
    assert error["message"] == (
        "pipeline 'plain' (pipelines/plain.sql): Could not convert string 'x' to INT32 when casting from "
        "source column v (streamed into sink 'wh' output 'plain'; nothing was written)"
    ), error["message"]
    with duckdb.connect(str(project_dir / "out" / "wh.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM plain").fetchone() == (3,)  # the old table, untouched
    # the pipeline's status follows its query, not the view it made (it said `ok`, and `success`, before)
    pipeline = result.node("plain")
    assert pipeline["status"] == "failed" and pipeline["error"] == error, pipeline
    assert not any(line.startswith("ok plain") for line in result.lines), result.output
    assert result.lines.index(next(ln for ln in result.lines if ln.startswith("FAIL plain "))) < (
        result.lines.index(next(ln for ln in result.lines if ln.startswith("FAIL wh.plain ")))
    ), result.output


@pytest.mark.parametrize("universal", [False, True], ids=["native", "universal"])
def test_a_streamed_append_failing_half_way_appends_nothing(project_dir: Path, universal: bool) -> None:
    """The DuckDB file appends in one transaction (`atomic_append`): a query failing on its last row rolls
    the whole append back, as the stored pipeline failing before the write left the target before. The
    result is 300,000 rows, so the universal tier's feed writes it in several statements (122,880-row
    batches) before the failing row comes: without the transaction, the first ones would stay."""
    engine = "engine: { force_universal: true }\n" if universal else ""
    write_project(project_dir, {**BASE, "project.yml": "name: streams\n" + engine})
    assert pz(project_dir, "run", "-s", "wh.appended").exit_code == 0
    rows = 300_000
    write_project(
        project_dir,
        {
            "pipelines/appended.sql": "INSERT INTO {{ sink('wh', 'appended') }}\n"
            "SELECT i AS id, CASE WHEN i < "
            + str(rows + 2)
            + " THEN 'v' || i ELSE CAST('x' || i AS INT)::VARCHAR END AS v\n"
            "FROM {{ source('f', 't') }} AS s, range(4, "
            + str(rows + 3)
            + ") AS r(i) WHERE s.id = 1\n",
        },
    )
    result = pz(project_dir, "run", "-s", "wh.appended")
    assert result.exit_code == 1, result.output
    error = result.node("wh.appended")["error"]
    assert error["code"] == "PZ0507" and "nothing was written" in error["message"], error
    assert result.node("appended")["status"] == "failed"
    with duckdb.connect(str(project_dir / "out" / "wh.duckdb"), read_only=True) as con:
        assert con.execute("SELECT id FROM appended ORDER BY id").fetchall() == [(1,), (2,), (3,)]


def test_a_streamed_append_whose_write_failed_is_finished_by_retry_once(project_dir: Path) -> None:
    write_project(project_dir, BASE)
    failed = pz(project_dir, "run", "-s", "wh.appended", env={"PZ_FAILPOINTS": "sink.write@wh.appended"})
    assert failed.exit_code == 1, failed.output
    assert failed.node("wh.appended")["error"]["code"] == "PZ0501"
    assert not (project_dir / "out" / "wh.duckdb").exists() or _appended(project_dir) == []
    retried = pz(project_dir, "retry")
    assert retried.exit_code == 0, retried.output
    assert _appended(project_dir) == [(1, "a"), (2, "b"), (3, "c")]
    assert pz(project_dir, "retry").exit_code == 0  # nothing left to retry: appended once, not twice
    assert _appended(project_dir) == [(1, "a"), (2, "b"), (3, "c")]


def _appended(project_dir: Path) -> list[tuple[object, ...]]:
    with duckdb.connect(str(project_dir / "out" / "wh.duckdb"), read_only=True) as con:
        found = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'appended'").fetchone()
        if not found or not found[0]:
            return []
        return con.execute("SELECT * FROM appended ORDER BY id").fetchall()


def test_an_empty_streamed_result_is_still_refused_by_replace(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/plain.sql": "INSERT INTO {{ sink('wh', 'plain') }}\n"
            "SELECT * FROM {{ source('f', 't') }} WHERE false\n",
        },
    )
    result = pz(project_dir, "run", "-s", "wh.plain")
    assert result.exit_code == 1
    assert result.node("wh.plain")["error"]["code"] == "PZ0509"
    assert result.node("plain")["status"] == "success" and result.node("plain")["rows"] == 0


def test_a_write_failing_for_its_own_reason_leaves_a_sound_query_ok(project_dir: Path) -> None:
    """The write failed, not the query: the pipeline computed its rows, and says so."""
    write_project(project_dir, BASE)
    result = pz(project_dir, "run", "-s", "wh.plain", env={"PZ_FAILPOINTS": "sink.write@wh.plain"})
    assert result.exit_code == 1, result.output
    error = result.node("wh.plain")["error"]
    assert error["code"] == "PZ0501" and "failpoint sink.write" in error["message"], error
    pipeline = result.node("plain")
    assert (pipeline["status"], pipeline["rows"], pipeline["error"]) == ("success", 3, None), pipeline
