"""`pz retry` end to end, through the real CLI: the retry article's scenario on PostgreSQL, every fallback of
staging reuse, every refusal, edited nodes, carry-forward's two conditions, --full-refresh, --dry-run,
retention and `pz clean`, partition resume, provenance in run_results.json, events and `pz runs`."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest

from pipelinez.api import Project, RetryRefused
from tests.conftest import PG_HOST, PG_PORT, PG_USER, fresh_pg_database, pz, pz_subprocess, write_project

FAIL_WH = {"PZ_FAILPOINTS": "sink.write@wh.enriched"}

LOCAL = {
    "project.yml": """
        name: shop
        engine: { threads: 1 }
    """,
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          orders: { format: csv, path: orders.csv }
          customers: { format: csv, path: customers.csv }
          events: { format: csv, path: events.csv }
    """,
    "sinks/wh.yml": """
        connector: duckdb
        connection: { path: out/wh.duckdb }
    """,
    "sinks/lake.yml": """
        connector: localfiles
        connection: { root: out/lake }
    """,
    "data/orders.csv": """
        id,customer,amount
        1,ada,10.5
        2,grace,20
        3,ada,5.25
    """,
    "data/customers.csv": """
        name,country
        ada,GB
        grace,US
    """,
    "data/events.csv": """
        id,kind
        1,click
        2,view
    """,
    "pipelines/enriched.sql": """
        INSERT INTO {{ sink('lake', 'enriched') }}
        INSERT INTO {{ sink('wh', 'enriched') }}
        SELECT o.id, o.amount, c.country
        FROM {{ source('files', 'orders') }} AS o
        JOIN {{ source('files', 'customers') }} AS c ON c.name = o.customer
    """,
    "pipelines/event_copy.sql": """
        INSERT INTO {{ sink('lake', 'events') }}
        SELECT * FROM {{ source('files', 'events') }}
    """,
}


def _runs(project: Path) -> list[Path]:
    folder = project / ".pz" / "runs"
    return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def _results(run: Path) -> dict[str, Any]:
    return dict(json.loads((run / "run_results.json").read_text()))


def _nodes(run: Path) -> dict[str, dict[str, Any]]:
    return {n["name"]: n for n in _results(run)["nodes"]}


def _wh(project: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(project / "out" / "wh.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


def _files(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file()
    }


def _node_lines(output: str) -> list[str]:
    return [re.sub(r" \d+ms$", "", line) for line in output.splitlines() if not line.startswith("note:")]


def _failed_run(project: Path, files: dict[str, str] | None = None) -> str:
    write_project(project, files or LOCAL)
    result = pz(project, "run", env=FAIL_WH)
    assert result.exit_code == 1, result.output
    assert "FAIL wh.enriched" in result.output
    return _runs(project)[-1].name


# -- the article's scenario, on PostgreSQL -------------------------------------------------------------------

SOURCE_SQL = """
    CREATE TABLE public.customers (id bigint PRIMARY KEY, name text);
    CREATE TABLE public.orders (
        id bigint PRIMARY KEY, customer_id bigint, amount numeric(10,2), updated_at timestamp
    );
    INSERT INTO public.customers SELECT i, 'customer ' || i FROM generate_series(1, 300) AS i;
    INSERT INTO public.orders
    SELECT i, 1 + i % 300, (i % 97) + 0.5, timestamp '2026-10-01 00:00:00' + i * interval '1 second'
    FROM generate_series(1, 5000) AS i;
"""


def _pg(database: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=database, autocommit=True) as con:
        cur = con.execute(sql)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


def _article_project(project: Path, source_db: str, warehouse_db: str) -> None:
    conn = f"{{ host: {PG_HOST}, port: {PG_PORT}, user: {PG_USER}, database: "
    write_project(
        project,
        {
            "project.yml": "name: shop\nengine: { threads: 2 }\n",
            "sources/pg_prod.yml": f"""
                connector: postgres
                connection: {conn}{source_db} }}
                datasets:
                  customers:
                    table: public.customers
                    columns: {{ id: bigint, name: varchar }}
                  orders:
                    table: public.orders
                    columns:
                      {{ id: bigint, customer_id: bigint, amount: "decimal(10,2)", updated_at: timestamp }}
            """,
            # orders is read incrementally: its outputs merge or append (a replace would hold one delta)
            "sinks/lake.yml": "connector: localfiles\nconnection: { root: lake }\n"
            "outputs:\n  orders_enriched: { strategy: append, duplicates: accept }\n",
            "sinks/warehouse.yml": f"""
                connector: postgres
                connection: {conn}{warehouse_db} }}
                outputs:
                  orders_enriched: {{ table: public.orders_enriched, strategy: merge, keys: [order_id] }}
            """,
            "pipelines/orders_enriched.sql": """
                INSERT INTO {{ sink('lake', 'orders_enriched') }}
                INSERT INTO {{ sink('warehouse', 'orders_enriched') }}
                SELECT o.id AS order_id, o.amount, c.name AS customer
                FROM {{ source('pg_prod', 'orders') }} AS o
                JOIN {{ source('pg_prod', 'customers') }} AS c ON c.id = o.customer_id
                WHERE o.updated_at > {{ watermark('pg_prod', 'orders') }}
            """,
        },
    )


def _watermark(project: Path) -> str | None:
    from pipelinez.core.run_state import RunState

    mark = RunState(project / ".pz").watermark("pg_prod", "orders")
    return None if mark is None else mark.value


LAST_UPDATE = "2026-10-01 01:23:20"  # order 5000's updated_at


@pytest.mark.postgres
def test_the_articles_retry(project_dir: Path) -> None:
    with fresh_pg_database(SOURCE_SQL) as source_db, fresh_pg_database() as warehouse_db:
        _article_project(project_dir, source_db, warehouse_db)
        failed = pz(project_dir, "run", env={"PZ_FAILPOINTS": "sink.write@warehouse.orders_enriched"})
        assert failed.exit_code == 1
        assert "FAIL warehouse.orders_enriched 0 rows" in failed.output
        assert re.search(r"^ok lake\.orders_enriched 5000 rows \d+ms$", failed.output, re.M)
        first = _runs(project_dir)[-1].name
        assert _watermark(project_dir) is None  # not every sink downstream of orders committed
        lake = _files(project_dir / "lake")
        # The replica is not contacted again: the source tables are gone, and the retry still finishes.
        _pg(source_db, "ALTER TABLE public.orders RENAME TO orders_gone; DROP TABLE public.customers")

        retry = pz(project_dir, "retry")

        assert retry.exit_code == 0, retry.output
        lines = retry.output.splitlines()
        assert lines[:2] == [
            f"note: reusing staged data for 2 source load(s) from run {first}",
            f"note: carrying forward 1 committed sink write(s) from run {first}",
        ]
        assert sorted(_node_lines(retry.output)) == [
            "ok orders_enriched 5000 rows",
            "ok src_pg_prod__customers 300 rows",
            "ok src_pg_prod__orders 5000 rows",
            "ok warehouse.orders_enriched 5000 rows",
        ]
        assert _node_lines(retry.output)[-1] == "ok warehouse.orders_enriched 5000 rows"
        assert _files(project_dir / "lake") == lake  # the lake write was not run again
        assert _pg(warehouse_db, "SELECT count(*), count(DISTINCT order_id) FROM public.orders_enriched") == [
            (5000, 5000)
        ]
        run = _runs(project_dir)[-1]
        results = _results(run)
        assert results["command"] == "retry" and results["retry_of"] == first
        assert results["status"] == "success"
        nodes = _nodes(run)
        for load in ("src_pg_prod__customers", "src_pg_prod__orders"):
            assert nodes[load]["provenance"] == "reused" and nodes[load]["reused_from"] == first
        lake_node = nodes["lake.orders_enriched"]
        assert lake_node["status"] == "carried_forward" and lake_node["provenance"] == "carried_forward"
        assert lake_node["rows"] == 5000 and lake_node["reused_from"] == first
        assert "provenance" not in nodes["orders_enriched"]
        assert "provenance" not in nodes["warehouse.orders_enriched"]
        # the lake write carried forward and the warehouse write finish the run's job: the watermark advances
        assert _watermark(project_dir) == LAST_UPDATE
        assert nodes["src_pg_prod__orders"]["watermark"]["committed"] is True
        history = pz(project_dir, "runs").lines
        assert re.search(r"success .* 2 +1$", history[1]), history
        assert re.search(r"failed .* 0 +0$", history[2]), history


@pytest.mark.postgres
def test_a_rotated_password_or_user_changes_no_id_and_the_retry_finishes_the_run(project_dir: Path) -> None:
    """Credentials are not part of a node's identity: the warehouse write failed, the password (and the role
    pz signs in with) were rotated, and `pz retry` still finishes the run: it reuses both loads and carries
    the lake write forward. (The local server trusts every password.)"""
    with fresh_pg_database(SOURCE_SQL) as source_db, fresh_pg_database() as warehouse_db:
        _article_project(project_dir, source_db, warehouse_db)
        (project_dir / "project.yml").write_text(
            "name: shop\nengine: { threads: 2 }\nenv:\n  PG_PASSWORD: { required: true, secret: true }\n"
            "  PG_USER: { default: postgres }\n"
        )
        for yml in ("sources/pg_prod.yml", "sinks/warehouse.yml"):
            path = project_dir / yml
            path.write_text(
                path.read_text().replace(
                    f"user: {PG_USER},",
                    "user: \"{{ env('PG_USER') }}\", password: \"{{ env('PG_PASSWORD') }}\",",
                )
            )
        _pg(warehouse_db, "CREATE ROLE pz_rotated_l6 LOGIN SUPERUSER")
        try:
            failed = pz(
                project_dir,
                "run",
                env={"PG_PASSWORD": "old-secret", "PZ_FAILPOINTS": "sink.write@warehouse.orders_enriched"},
            )
            assert failed.exit_code == 1, failed.output
            first = _runs(project_dir)[-1].name
            retry = pz(project_dir, "retry", env={"PG_PASSWORD": "new-secret", "PG_USER": "pz_rotated_l6"})
            assert retry.exit_code == 0, retry.output
            assert f"note: reusing staged data for 2 source load(s) from run {first}" in retry.lines
            assert f"note: carrying forward 1 committed sink write(s) from run {first}" in retry.lines
            assert "ok warehouse.orders_enriched 5000 rows" in _node_lines(retry.output)
        finally:
            _pg(warehouse_db, "DROP OWNED BY pz_rotated_l6; DROP ROLE pz_rotated_l6")


@pytest.mark.parametrize("volatile", ["random()", "now()", "uuid()", "current_timestamp"])
def test_a_write_whose_pipeline_is_not_deterministic_is_run_again_not_carried(
    project_dir: Path, volatile: str
) -> None:
    """The retry re-runs the pipeline, which computes other values: the committed lake write runs again too,
    so the lake and the warehouse hold the same rows."""
    files = dict(LOCAL)
    files["pipelines/enriched.sql"] = files["pipelines/enriched.sql"].replace(
        "c.country\n", f"c.country, CAST({volatile} AS VARCHAR) AS v\n"
    )
    first = _failed_run(project_dir, files)
    dry = pz(project_dir, "retry", "--dry-run")
    assert any(
        ln.split()[:2] == ["run", "lake.enriched"] and "not carried forward: pipeline enriched calls" in ln
        for ln in dry.lines
    ), dry.output
    retry = pz(project_dir, "retry")
    assert retry.exit_code == 0, retry.output
    assert (
        "note: lake.enriched runs again rather than being carried forward: pipeline enriched calls "
        f"{volatile}, so it computes other rows on every run and the earlier commit would not match what "
        "the other sinks get now"
    ) in retry.lines, retry.output
    assert not any("carrying forward" in ln for ln in retry.lines), retry.output
    nodes = _nodes(_runs(project_dir)[-1])
    assert nodes["lake.enriched"]["status"] == "success" and "provenance" not in nodes["lake.enriched"]
    assert nodes["src_files__orders"]["provenance"] == "reused"  # the loads are still reused
    lake = duckdb.sql(f"SELECT id, v FROM '{project_dir / 'out' / 'lake' / 'enriched.parquet'}' ORDER BY id")
    assert lake.fetchall() == _wh(project_dir, "SELECT id, v FROM enriched ORDER BY id")
    assert first != _runs(project_dir)[-1].name


def test_a_reuse_that_fails_at_run_time_falls_back_and_keeps_the_carry_decision(project_dir: Path) -> None:
    first = _failed_run(project_dir)
    # the staged table checks out while the retry is planned, so the lake write is carried forward; then its
    # copy fails at run time and the load is extracted again (its watermark then cannot advance: see the
    # incremental tests)
    retry = pz(project_dir, "retry", env={"PZ_FAILPOINTS": "reuse.copy@src_files__orders"})
    assert retry.exit_code == 0, retry.output
    assert f"note: carrying forward 1 committed sink write(s) from run {first}" in retry.lines
    why = "the copy failed (RuntimeError: failpoint reuse.copy@src_files__orders); extracting it again"
    assert f"note: cannot reuse staged data for src_files__orders from run {first}: {why}" in retry.lines
    nodes = _nodes(_runs(project_dir)[-1])
    assert nodes["lake.enriched"]["status"] == "carried_forward"
    assert "provenance" not in nodes["src_files__orders"]
    assert nodes["src_files__customers"]["provenance"] == "reused"


def test_a_staged_table_that_does_not_check_out_is_known_before_the_retry_runs(project_dir: Path) -> None:
    first = _failed_run(project_dir)
    _old_staging(project_dir, first, "DELETE FROM src_files__orders WHERE id = 3")
    dry = pz(project_dir, "retry", "--dry-run")
    steps = [line.split()[:2] for line in dry.lines if line.startswith("  ")]
    assert ["extract", "src_files__orders"] in steps and ["reuse", "src_files__customers"] in steps
    assert ["run", "lake.enriched"] in steps  # not carried: its source is not reused, so it runs again
    retry = pz(project_dir, "retry")
    assert "ok lake.enriched 3 rows" in _node_lines(retry.output)
    assert _nodes(_runs(project_dir)[-1])["lake.enriched"]["status"] == "success"


@pytest.mark.postgres
def test_a_carried_forward_sink_cannot_advance_the_watermark_of_a_source_that_was_extracted_again(
    project_dir: Path,
) -> None:
    with fresh_pg_database(SOURCE_SQL) as source_db, fresh_pg_database() as warehouse_db:
        _article_project(project_dir, source_db, warehouse_db)
        failed = pz(project_dir, "run", env={"PZ_FAILPOINTS": "sink.write@warehouse.orders_enriched"})
        assert failed.exit_code == 1
        first = _runs(project_dir)[-1].name
        # the staged table checks out while the retry is planned, so the lake write is carried forward; then
        # its copy fails at run time and the load is extracted again
        retry = pz(project_dir, "retry", env={"PZ_FAILPOINTS": "reuse.copy@src_pg_prod__orders"})
        assert retry.exit_code == 0, retry.output
        assert f"note: carrying forward 1 committed sink write(s) from run {first}" in retry.lines
        nodes = _nodes(_runs(project_dir)[-1])
        assert nodes["lake.orders_enriched"]["status"] == "carried_forward"
        assert "provenance" not in nodes["src_pg_prod__orders"]
        assert nodes["src_pg_prod__orders"]["watermark"]["committed"] is False
        assert _watermark(project_dir) is None  # the lake holds what the failed run read, not this read


@pytest.mark.postgres
def test_full_refresh_retry_ignores_the_watermarks(project_dir: Path) -> None:
    with fresh_pg_database(SOURCE_SQL) as source_db, fresh_pg_database() as warehouse_db:
        _article_project(project_dir, source_db, warehouse_db)
        assert pz(project_dir, "run").exit_code == 0
        assert _watermark(project_dir) == LAST_UPDATE
        _pg(source_db, "INSERT INTO public.orders VALUES (5001, 1, 1.5, timestamp '2026-10-02 00:00:00')")
        failed = pz(project_dir, "run", env={"PZ_FAILPOINTS": "sink.write@warehouse.orders_enriched"})
        assert failed.exit_code == 1
        assert "ok src_pg_prod__orders 1 rows" in " ".join(_node_lines(failed.output))
        retry = pz(project_dir, "retry", "--full-refresh")
        assert retry.exit_code == 0, retry.output
        assert (
            "note: --full-refresh: committed watermarks are ignored for this run; incremental dataset(s) "
            "pg_prod.orders are read from their start"
        ) in retry.lines
        assert "ok src_pg_prod__orders 5001 rows" in _node_lines(retry.output)
        assert "ok warehouse.orders_enriched 5001 rows" in _node_lines(retry.output)
        assert "ok lake.orders_enriched 5001 rows" in _node_lines(retry.output)  # run again, not carried
        assert _watermark(project_dir) == "2026-10-02 00:00:00"


# -- selection -----------------------------------------------------------------------------------------------


def test_independent_branches_are_never_reselected(project_dir: Path) -> None:
    _failed_run(project_dir)
    retry = pz(project_dir, "retry")
    assert retry.exit_code == 0, retry.output
    nodes = _nodes(_runs(project_dir)[-1])
    assert set(nodes) == {
        "src_files__orders",
        "src_files__customers",
        "enriched",
        "lake.enriched",
        "wh.enriched",
    }
    assert "events" not in retry.output
    assert _wh(project_dir, "SELECT count(*) FROM enriched") == [(3,)]


def test_a_successful_last_run_leaves_nothing_to_retry(project_dir: Path) -> None:
    write_project(project_dir, LOCAL)
    assert pz(project_dir, "run").exit_code == 0
    before = _runs(project_dir)
    retry = pz(project_dir, "retry")
    assert (retry.exit_code, retry.lines) == (0, ["nothing to retry"])
    assert _runs(project_dir) == before


def test_a_retry_that_succeeded_leaves_nothing_to_retry(project_dir: Path) -> None:
    _failed_run(project_dir)
    assert pz(project_dir, "retry").exit_code == 0
    again = pz(project_dir, "retry")
    assert (again.exit_code, again.lines) == (0, ["nothing to retry"])


def test_an_edited_node_is_not_the_node_that_failed(project_dir: Path) -> None:
    _failed_run(project_dir)
    sql = project_dir / "pipelines" / "enriched.sql"
    sql.write_text(sql.read_text().replace("o.amount,", "o.amount AS amount_gbp,"))
    before = sorted((project_dir / ".pz" / "runs").iterdir())
    retry = pz(project_dir, "retry")
    assert retry.exit_code == 2  # nothing of that run can be finished: not a success
    assert retry.lines == [
        "note: enriched changed since the failed run; run 'pz run' for a full pass if needed",
        "nothing to retry (project changed)",
        f"error: PZ0534 .pz/runs/{before[-1].name}/run_results.json: nothing of run {before[-1].name} can be "
        "finished: what it left unfinished changed since (enriched changed)",
        "  next: run `pz run` (or `pz run --select` the changed nodes) for a full pass with the edited "
        "project",
        "1 error",
    ]
    assert sorted((project_dir / ".pz" / "runs").iterdir()) == before  # the staging copy begun is gone
    outcome = Project(project_dir).retry()  # the API says so too: exit_code 2 and the refusal
    assert outcome.exit_code == 2 and outcome.refusal is not None and outcome.refusal.code == "PZ0534"


def test_a_sinks_keys_are_part_of_its_identity_but_retry_settings_are_not(project_dir: Path) -> None:
    _failed_run(project_dir)
    (project_dir / "sinks" / "wh.yml").write_text(
        "connector: duckdb\nconnection: { path: out/wh.duckdb }\nretry: { max_attempts: 7 }\n"
        "outputs:\n  enriched: { retry: { base_delay: 2s } }\n"
    )
    assert pz(project_dir, "retry", "--dry-run").exit_code == 0  # retry: is not identity
    (project_dir / "sinks" / "wh.yml").write_text(
        "connector: duckdb\nconnection: { path: out/wh.duckdb }\n"
        "outputs:\n  enriched: { strategy: merge, keys: [id] }\n"
    )
    retry = pz(project_dir, "retry")
    assert retry.exit_code == 2
    assert retry.lines[:3] == [
        "note: wh.enriched changed since the failed run; run 'pz run' for a full pass if needed",
        "nothing to retry (project changed)",
        f"error: PZ0534 .pz/runs/{_runs(project_dir)[-1].name}/run_results.json: nothing of run "
        f"{_runs(project_dir)[-1].name} can be finished: what it left unfinished changed since (wh.enriched "
        "changed)",
    ]


def test_only_the_unchanged_failures_are_retried(project_dir: Path) -> None:
    files = {
        **LOCAL,
        "pipelines/event_copy.sql": """
            INSERT INTO {{ sink('wh', 'events') }}
            SELECT * FROM {{ source('files', 'events') }}
        """,
    }
    write_project(project_dir, files)
    failed = pz(project_dir, "run", env={"PZ_FAILPOINTS": "sink.write@wh.enriched,sink.write@wh.events"})
    assert failed.exit_code == 1
    sql = project_dir / "pipelines" / "event_copy.sql"
    sql.write_text(sql.read_text().replace("SELECT *", "SELECT id"))
    retry = pz(project_dir, "retry")
    assert retry.exit_code == 0, retry.output
    changed = "note: event_copy changed since the failed run; run 'pz run' for a full pass if needed"
    assert changed in retry.lines
    assert "ok wh.enriched 3 rows" in _node_lines(retry.output)
    assert "wh.events" not in _nodes(_runs(project_dir)[-1])


def test_skipped_and_failed_nodes_are_retried_with_their_ancestors(project_dir: Path) -> None:
    files = {
        **LOCAL,
        "pipelines/enriched.yml": "checks:\n  - row_count: { max: 2 }\n",
    }
    write_project(project_dir, files)
    failed = pz(project_dir, "run")
    assert failed.exit_code == 1
    assert "SKIP wh.enriched (upstream chk_enriched__row_count failed)" in failed.output
    (project_dir / "pipelines" / "enriched.yml").write_text("checks:\n  - row_count: { max: 2 }\n")
    retry = pz(project_dir, "retry")
    assert retry.exit_code == 1  # the data did not change: the check fails again, the sinks are skipped again
    nodes = _nodes(_runs(project_dir)[-1])
    assert nodes["chk_enriched__row_count"]["status"] == "failed"
    assert nodes["src_files__orders"]["provenance"] == "reused"
    assert {n for n, r in nodes.items() if r["status"] == "skipped"} == {"lake.enriched", "wh.enriched"}


# -- staging reuse and its fallbacks -------------------------------------------------------------------------


def test_reuse_does_not_read_the_source_again(project_dir: Path) -> None:
    first = _failed_run(project_dir)
    (project_dir / "data" / "orders.csv").write_text("id,customer,amount\n9,zed,1\n")
    old = project_dir / ".pz" / "runs" / first
    before = _files(old)
    assert pz(project_dir, "retry").exit_code == 0
    assert _wh(project_dir, "SELECT list_sort(list(id)) FROM enriched") == [([1, 2, 3],)]
    after = _files(old)  # the failed run's staging is read, never written
    assert {k: v for k, v in after.items() if k.startswith("staging")} == {
        k: v for k, v in before.items() if k.startswith("staging")
    }
    runs = project_dir / ".pz" / "runs"
    assert sorted(p.name for p in runs.iterdir() if not p.is_dir()) == []  # the staging copy was moved in
    new = _runs(project_dir)[-1] / "staging.duckdb"
    with duckdb.connect(str(new), read_only=True) as con:  # only what the retry staged or reused is in it
        tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert tables == {"src_files__orders", "src_files__customers", "enriched"}


def test_a_deleted_staging_falls_back_to_extraction_with_a_note(project_dir: Path) -> None:
    first = _failed_run(project_dir)
    assert pz(project_dir, "clean").exit_code == 0
    lake = _files(project_dir / "out" / "lake" / "enriched.parquet")
    retry = pz(project_dir, "retry")
    assert retry.exit_code == 0, retry.output
    why = "its staging database staging.duckdb is gone (deleted by pz clean or the retention sweep)"
    for load in ("src_files__customers", "src_files__orders"):
        assert f"note: cannot reuse staged data for {load} from run {first}: {why}; extracting it again" in (
            retry.lines
        )
    assert "reusing staged data" not in retry.output
    assert "carrying forward" not in retry.output  # its sources are not reused: the lake write runs again
    assert "ok lake.enriched 3 rows" in _node_lines(retry.output)
    assert _files(project_dir / "out" / "lake" / "enriched.parquet") != lake
    nodes = _nodes(_runs(project_dir)[-1])
    assert all("provenance" not in n for n in nodes.values())


def _old_staging(project: Path, run_id: str, sql: str) -> None:
    with duckdb.connect(str(project / ".pz" / "runs" / run_id / "staging.duckdb")) as con:
        con.execute(sql)


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (
            "DELETE FROM src_files__orders WHERE id = 3",
            "its staged table has 2 rows, the run recorded 3",
        ),
        ("DROP TABLE src_files__orders", "its staged table src_files__orders cannot be read"),
    ],
)
def test_a_copy_that_does_not_check_out_falls_back_to_extraction(
    project_dir: Path, damage: str, why: str
) -> None:
    first = _failed_run(project_dir)
    _old_staging(project_dir, first, damage)
    retry = pz(project_dir, "retry")
    assert retry.exit_code == 0, retry.output
    note = next(line for line in retry.lines if "cannot reuse" in line)
    assert note.startswith(f"note: cannot reuse staged data for src_files__orders from run {first}: {why}")
    assert note.endswith("; extracting it again")
    nodes = _nodes(_runs(project_dir)[-1])
    assert "provenance" not in nodes["src_files__orders"]
    assert nodes["src_files__customers"]["provenance"] == "reused"
    assert _wh(project_dir, "SELECT list_sort(list(id)) FROM enriched") == [([1, 2, 3],)]


def test_an_unreadable_staging_file_falls_back_to_extraction(project_dir: Path) -> None:
    first = _failed_run(project_dir)
    run = project_dir / ".pz" / "runs" / first
    (run / "staging.duckdb").write_bytes(b"this is not a database" * 100)
    (run / "staging.duckdb.wal").unlink(missing_ok=True)
    retry = pz(project_dir, "retry")
    assert retry.exit_code == 0, retry.output
    notes = [line for line in retry.lines if "cannot reuse" in line]
    assert len(notes) == 2 and all("its staging database cannot be opened" in n for n in notes)
    assert _wh(project_dir, "SELECT count(*) FROM enriched") == [(3,)]


# -- carry-forward's conditions ------------------------------------------------------------------------------

SPLIT = {
    **LOCAL,
    "pipelines/enriched.sql": """
        INSERT INTO {{ sink('wh', 'enriched') }}
        SELECT o.id, o.amount FROM {{ source('files', 'orders') }} AS o
    """,
    "pipelines/by_customer.sql": """
        INSERT INTO {{ sink('lake', 'by_customer') }}
        SELECT o.customer, sum(o.amount) AS total
        FROM {{ source('files', 'orders') }} AS o
        JOIN {{ source('files', 'customers') }} AS c ON c.name = o.customer
        GROUP BY 1
    """,
}


def test_a_sibling_sink_is_carried_forward_without_running_its_pipeline(project_dir: Path) -> None:
    first = _failed_run(project_dir, SPLIT)
    retry = pz(project_dir, "retry")
    assert retry.exit_code == 0, retry.output
    # lake.by_customer reads orders (which the failed flow reads) and customers: the customers load is taken
    # along for reuse so that the lake write can be carried forward; its pipeline does not run
    assert retry.lines[:2] == [
        f"note: reusing staged data for 2 source load(s) from run {first}",
        f"note: carrying forward 1 committed sink write(s) from run {first}",
    ]
    nodes = _nodes(_runs(project_dir)[-1])
    assert nodes["lake.by_customer"]["status"] == "carried_forward"
    assert "by_customer" not in nodes
    assert sorted(_node_lines(retry.output)) == [
        "ok enriched streamed into wh.enriched",  # its one reader is a replace: not stored in staging
        "ok src_files__customers 2 rows",
        "ok src_files__orders 3 rows",
        "ok wh.enriched 3 rows",
    ]


def test_a_sink_whose_source_is_not_reused_runs_again(project_dir: Path) -> None:
    first = _failed_run(project_dir)
    (project_dir / ".pz" / "runs" / first / "staging.duckdb").unlink()
    (project_dir / ".pz" / "runs" / first / "staging.duckdb.wal").unlink(missing_ok=True)
    dry = pz(project_dir, "retry", "--dry-run")
    steps = [line.split() for line in dry.lines if line.startswith("  ")]
    assert ["run", "lake.enriched"] in steps
    assert [s[:2] for s in steps if s[0] == "extract"] == [
        ["extract", "src_files__customers"],
        ["extract", "src_files__orders"],
    ]
    assert not [s for s in steps if s[0] == "carry"]


def test_a_retry_of_a_retry_carries_the_original_commit(project_dir: Path) -> None:
    first = _failed_run(project_dir)
    assert pz(project_dir, "retry", env=FAIL_WH).exit_code == 1
    second = _runs(project_dir)[-1].name
    retry = pz(project_dir, "retry")
    assert retry.exit_code == 0, retry.output
    assert f"note: reusing staged data for 2 source load(s) from run {second}" in retry.lines
    assert f"note: carrying forward 1 committed sink write(s) from run {first}" in retry.lines  # who wrote it
    lake = _nodes(_runs(project_dir)[-1])["lake.enriched"]
    assert (lake["provenance"], lake["reused_from"], lake["rows"]) == ("carried_forward", first, 3)


# -- --full-refresh and --dry-run ----------------------------------------------------------------------------


def test_full_refresh_reuses_nothing_and_carries_nothing(project_dir: Path) -> None:
    _failed_run(project_dir)
    (project_dir / "data" / "orders.csv").write_text("id,customer,amount\n1,ada,10.5\n9,grace,1\n")
    lake = _files(project_dir / "out" / "lake" / "enriched.parquet")
    retry = pz(project_dir, "retry", "--full-refresh")
    assert retry.exit_code == 0, retry.output
    assert not [line for line in retry.lines if line.startswith("note:")]
    assert sorted(_node_lines(retry.output)) == [
        "ok enriched 2 rows",
        "ok lake.enriched 2 rows",
        "ok src_files__customers 2 rows",
        "ok src_files__orders 2 rows",
        "ok wh.enriched 2 rows",
    ]
    assert _files(project_dir / "out" / "lake" / "enriched.parquet") != lake
    results = _results(_runs(project_dir)[-1])
    assert results["args"]["full_refresh"] is True
    assert all("provenance" not in n for n in results["nodes"])


def test_dry_run_prints_the_plan_and_changes_nothing(project_dir: Path) -> None:
    first = _failed_run(project_dir)
    before = _runs(project_dir)
    lake_before = _files(project_dir / "out")
    dry = pz(project_dir, "retry", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert dry.lines == [
        f"note: reusing staged data for 2 source load(s) from run {first}",
        f"note: carrying forward 1 committed sink write(s) from run {first}",
        f"dry run: retry of run {first} (5 nodes; nothing runs)",
        f"  reuse          src_files__customers  (2 rows staged by run {first})",
        f"  reuse          src_files__orders  (3 rows staged by run {first})",
        "  run            enriched",
        f"  carry forward  lake.enriched  (3 rows committed by run {first})",
        "  run            wh.enriched",
    ]
    assert _runs(project_dir) == before
    assert _files(project_dir / "out") == lake_before
    as_json = pz(project_dir, "--log-format", "json", "retry", "--dry-run")
    last = json.loads(as_json.lines[-1])
    assert last["event"] == "retry_dry_run" and last["retry_of"] == first
    assert {s["action"] for s in last["steps"]} == {"reuse", "run", "carry forward"}


# -- refusals ------------------------------------------------------------------------------------------------


def test_no_earlier_run_is_pz0502(project_dir: Path) -> None:
    write_project(project_dir, LOCAL)
    retry = pz(project_dir, "retry")
    assert retry.exit_code == 2
    assert retry.lines[:2] == [
        "error: PZ0502 .pz/runs: there is no earlier run to retry",
        "  next: run `pz run`",
    ]
    with pytest.raises(RetryRefused) as refused:
        Project(project_dir).retry()
    assert refused.value.diagnostics[0].code == "PZ0502"


def test_a_killed_run_is_pz0503(project_dir: Path) -> None:
    write_project(project_dir, LOCAL)
    killed = pz_subprocess(project_dir, "run", env={"PZ_FAILPOINTS": "sink.write@wh.enriched:kill"})
    assert killed.exit_code == 137
    run_id = _runs(project_dir)[-1].name
    assert _results(_runs(project_dir)[-1])["status"] == "running"
    retry = pz_subprocess(project_dir, "retry")
    assert retry.exit_code == 2
    assert retry.lines == [
        f"error: PZ0503 .pz/runs/{run_id}/run_results.json: the last run {run_id} was interrupted mid-flight "
        "(a crash or a kill): its recorded statuses can't be trusted",
        "  next: run `pz run` again",
        "1 error",
    ]
    assert "interrupted" in pz(project_dir, "runs").lines[1]


def test_a_run_killed_before_it_recorded_anything_is_pz0503(project_dir: Path) -> None:
    write_project(project_dir, LOCAL)
    killed = pz_subprocess(project_dir, "run", env={"PZ_FAILPOINTS": "results.before_rename@1:kill"})
    assert killed.exit_code == 137
    retry = pz(project_dir, "retry")
    assert retry.exit_code == 2
    assert "PZ0503" in retry.lines[0] and "before it recorded any result" in retry.lines[0]


def test_an_orchestrator_level_failure_is_pz0504(project_dir: Path) -> None:
    write_project(project_dir, LOCAL)
    crashed = pz(project_dir, "run", env={"PZ_FAILPOINTS": "run.after_nodes"})
    assert crashed.exit_code == 1
    run = _runs(project_dir)[-1]
    assert _results(run)["status"] == "error"
    retry = pz(project_dir, "retry")
    assert retry.exit_code == 2
    assert retry.lines[:2] == [
        f"error: PZ0504 .pz/runs/{run.name}/run_results.json: the last run {run.name} failed at the "
        "orchestrator level, not at a node (PZ0512: RuntimeError: failpoint run.after_nodes)",
        "  next: run `pz run` again",
    ]


def test_an_unreadable_last_record_is_pz0526(project_dir: Path) -> None:
    write_project(project_dir, LOCAL)
    pz(project_dir, "run", env=FAIL_WH)
    run = _runs(project_dir)[-1]
    (run / "run_results.json").write_text('{"run_id": ')
    retry = pz(project_dir, "retry")
    assert retry.exit_code == 2
    assert retry.lines[0].startswith(f"error: PZ0526 .pz/runs/{run.name}/run_results.json: the record of")


def test_refusals_in_json(project_dir: Path) -> None:
    write_project(project_dir, LOCAL)
    retry = pz(project_dir, "--log-format", "json", "retry")
    assert retry.exit_code == 2
    assert json.loads(retry.lines[0])["code"] == "PZ0502"


# -- retention, clean, history, events -----------------------------------------------------------------------


def test_keep_last_one_keeps_the_staging_a_retry_needs(project_dir: Path) -> None:
    files = {**LOCAL, "project.yml": "name: shop\nengine: { threads: 1 }\nretention: { keep_last: 1 }\n"}
    write_project(project_dir, files)
    assert pz(project_dir, "run").exit_code == 0
    first = _failed_run(project_dir, files)
    staged = [r.name for r in _runs(project_dir) if (r / "staging.duckdb").exists()]
    assert staged == [first]
    retry = pz(project_dir, "retry")
    assert f"note: reusing staged data for 2 source load(s) from run {first}" in retry.lines
    staged = [r.name for r in _runs(project_dir) if (r / "staging.duckdb").exists()]
    assert staged == [_runs(project_dir)[-1].name]


def test_events_carry_provenance(project_dir: Path) -> None:
    _failed_run(project_dir)
    retry = pz(project_dir, "--log-format", "json", "retry")
    events = [json.loads(line) for line in retry.lines]
    done = {e["name"]: e for e in events if e["event"] == "node_completed"}
    assert done["src_files__orders"]["provenance"] == "reused"
    assert done["lake.enriched"]["provenance"] == "carried_forward"
    assert done["lake.enriched"]["status"] == "carried_forward"
    assert "provenance" not in done["wh.enriched"]
    notes = [e["message"] for e in events if e["event"] == "note"]
    assert len(notes) == 2
    started = next(e for e in events if e["event"] == "run_started")
    assert started["command"] == "retry" and started["retry_of"]
    on_disk = (_runs(project_dir)[-1] / "events.jsonl").read_text().splitlines()
    assert [json.loads(line)["event"] for line in on_disk] == [e["event"] for e in events]


def test_the_api_retries(project_dir: Path) -> None:
    first = _failed_run(project_dir)
    seen: list[dict[str, Any]] = []
    dry = Project(project_dir).retry(dry_run=True)
    assert dry.run is None and dry.selection is not None
    assert [a for a, _, _ in dry.selection.steps()] == ["reuse", "reuse", "run", "carry forward", "run"]
    outcome = Project(project_dir).retry(on_event=seen.append)
    assert outcome.retry_of == first and outcome.run is not None
    assert outcome.run.status == "success" and outcome.exit_code == 0
    assert outcome.run.results.node("lake.enriched").status == "carried_forward"
    assert any(e["event"] == "note" for e in seen)
    nothing = Project(project_dir).retry()
    assert nothing.run is None and nothing.message == "nothing to retry"


# -- partitioned reads resume past landed partitions ---------------------------------------------------------

PARTS = {
    "project.yml": "name: shop\nengine: { threads: 1 }\n",
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        max_concurrency: 1
        datasets:
          parts:
            { format: csv, path: "parts/*.csv", files_per_partition: 1, columns: { id: bigint, v: varchar } }
    """,
    "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
    "pipelines/all_parts.sql": """
        INSERT INTO {{ sink('wh', 'all_parts') }}
        SELECT * FROM {{ source('files', 'parts') }}
    """,
    **{f"data/parts/p{i}.csv": f"id,v\n{i},first\n{i + 10},first\n" for i in range(4)},
}


def test_a_partitioned_read_resumes_past_the_partitions_that_landed(project_dir: Path) -> None:
    write_project(project_dir, PARTS)
    failed = pz(project_dir, "run", env={"PZ_FAILPOINTS": "source.landed@src_files__parts#2"})
    assert failed.exit_code == 1, failed.output
    first = _runs(project_dir)[-1].name
    parts = _nodes(_runs(project_dir)[-1])["src_files__parts"]["partitions"]
    assert [(p["index"], p["status"]) for p in parts] == [
        (0, "success"),
        (1, "success"),
        (2, "failed"),
        (3, "success"),
    ]
    for i in range(4):  # landed partitions are copied, not read again: their new content stays unread
        (project_dir / "data" / "parts" / f"p{i}.csv").write_text(f"id,v\n{i},second\n{i + 10},second\n")
    retry = pz(project_dir, "retry")
    assert retry.exit_code == 0, retry.output
    assert retry.lines[0] == f"note: resuming src_files__parts past 3 partition(s) that landed in run {first}"
    assert _wh(project_dir, "SELECT id % 10, v FROM all_parts GROUP BY ALL ORDER BY 1") == [
        (0, "first"),
        (1, "first"),
        (2, "second"),
        (3, "first"),
    ]
    node = _nodes(_runs(project_dir)[-1])["src_files__parts"]
    assert node["rows"] == 8 and node["status"] == "success"
    assert "provenance" not in node  # extracted in part: not a reused load
    assert [p.get("provenance") for p in node["partitions"]] == ["reused", "reused", None, "reused"]


def test_a_changed_partition_layout_is_read_again(project_dir: Path) -> None:
    write_project(project_dir, PARTS)
    assert pz(project_dir, "run", env={"PZ_FAILPOINTS": "source.landed@src_files__parts#2"}).exit_code == 1
    (project_dir / "data" / "parts" / "p0.csv").unlink()  # partition 0 is now p1.csv: another slice
    retry = pz(project_dir, "retry")
    assert retry.exit_code == 0, retry.output
    node = _nodes(_runs(project_dir)[-1])["src_files__parts"]
    assert [p.get("provenance") for p in node["partitions"]] == [None, None, None]
    assert "3 partition(s) of src_files__parts that landed in run" in retry.output
    assert node["rows"] == 6


# -- checkpointed delivery: the failed run's acknowledged batches reach the retried sink write ---------------


def test_a_retried_http_sink_resumes_past_the_batches_the_api_acknowledged(project_dir: Path) -> None:
    from tests.http_server import Fault, running

    with contextlib.contextmanager(running)() as api:
        api.state.faults[("POST", "/sink/events")] = Fault(status=503, times=1, after=2, retry_after="0")
        write_project(
            project_dir,
            {
                "project.yml": "name: push\n",
                "sinks/api.yml": f"""
                    connector: http
                    connection: {{ base_url: {api.url} }}
                    retry: {{ max_attempts: 1 }}
                    outputs:
                      events: {{ path: /sink/events, strategy: append, batch_size: 4 }}
                """,
                "pipelines/push.sql": """
                    INSERT INTO {{ sink('api', 'events') }}
                    SELECT i AS id, 'e' || i AS name FROM range(10) t(i) ORDER BY i
                """,
            },
        )
        failed = pz(project_dir, "run")
        assert failed.exit_code == 1
        assert [r["id"] for r in api.state.received["events"]] == list(range(8))
        retry = pz(project_dir, "retry")
        assert retry.exit_code == 0, retry.output
        assert "resuming past 2 acknowledged batch(es) (8 rows)" in retry.output
        assert [r["id"] for r in api.state.received["events"]] == list(range(10))  # each row exactly once
        node = _nodes(_runs(project_dir)[-1])["api.events"]
        assert node["rows"] == 10 and node["batches_committed"] == 3


@pytest.mark.postgres
def test_a_partitioned_database_read_resumes_past_the_splits_that_landed(project_dir: Path) -> None:
    setup = """
        CREATE TABLE public.orders (id bigint PRIMARY KEY, amount int);
        INSERT INTO public.orders SELECT i, 1 FROM generate_series(1, 4000) AS i;
    """
    with fresh_pg_database(setup) as db:
        write_project(
            project_dir,
            {
                "project.yml": "name: shop\nengine: { threads: 1 }\n",
                "sources/pg.yml": f"""
                    connector: postgres
                    connection: {{ host: {PG_HOST}, port: {PG_PORT}, user: {PG_USER}, database: {db} }}
                    datasets:
                      orders:
                        table: public.orders
                        columns: {{ id: bigint, amount: integer }}
                        partitions: {{ column: id, count: 4 }}
                """,
                "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
                "pipelines/totals.sql": """
                    INSERT INTO {{ sink('wh', 'totals') }}
                    SELECT amount, count(*) AS n FROM {{ source('pg', 'orders') }} GROUP BY 1
                """,
            },
        )
        failed = pz(project_dir, "run", env={"PZ_FAILPOINTS": "source.landed@src_pg__orders#2"})
        assert failed.exit_code == 1, failed.output
        first = _runs(project_dir)[-1].name
        _pg(db, "UPDATE public.orders SET amount = 2")  # only the split read again sees it
        retry = pz(project_dir, "retry")
        assert retry.exit_code == 0, retry.output
        resumed = f"note: resuming src_pg__orders past 3 partition(s) that landed in run {first}"
        assert retry.lines[0] == resumed
        node = _nodes(_runs(project_dir)[-1])["src_pg__orders"]
        assert [p.get("provenance") for p in node["partitions"]] == ["reused", "reused", None, "reused"]
        reread = node["partitions"][2]["rows"]
        totals = _wh(project_dir, "SELECT amount, n FROM totals ORDER BY 1")
        assert totals == [(1, 4000 - reread), (2, reread)]


def test_nodes_cancelled_by_fail_fast_are_retried(project_dir: Path) -> None:
    write_project(project_dir, LOCAL)
    failed = pz(project_dir, "run", "--fail-fast", env={"PZ_FAILPOINTS": "sink.write@lake.enriched"})
    assert failed.exit_code == 1
    before = _nodes(_runs(project_dir)[-1])
    cancelled = {n for n, r in before.items() if r["status"] == "cancelled"}
    assert cancelled, failed.output
    retry = pz(project_dir, "retry")
    assert retry.exit_code == 0, retry.output
    after = _nodes(_runs(project_dir)[-1])
    assert cancelled <= set(after)
    assert all(after[n]["status"] in ("success", "carried_forward") for n in after)
    assert _results(_runs(project_dir)[-1])["args"]["fail_fast"] is True  # the run it finishes, as it was run


def test_an_edited_committed_sibling_is_named_not_silently_skipped(project_dir: Path) -> None:
    _failed_run(project_dir)
    (project_dir / "sinks" / "lake.yml").write_text(
        "connector: localfiles\nconnection: { root: out/lake }\noutputs:\n  enriched: { format: csv }\n"
    )
    retry = pz(project_dir, "retry")
    assert retry.exit_code == 0, retry.output
    assert (
        "note: lake.enriched changed since the failed run: its earlier commit is not carried forward and the "
        "retry does not run it; run 'pz run' for a full pass if needed"
    ) in retry.lines
    assert "lake.enriched" not in _nodes(_runs(project_dir)[-1])


def test_a_connection_pointed_elsewhere_is_named_as_the_only_change(project_dir: Path) -> None:
    files = {
        **LOCAL,
        "project.yml": "name: shop\nengine: { threads: 1 }\n"
        "env:\n  DATA_TOKEN: { required: true, secret: true }\n",
        "sources/files.yml": LOCAL["sources/files.yml"].replace(
            "connection: { root: data }", "connection: { root: \"data{{ env('DATA_TOKEN') }}\" }"
        ),
    }
    write_project(project_dir, files)
    for token in ("-tok-a", "-tok-b"):  # a secret of fewer than 3 characters is refused (PZ0122)
        folder = project_dir / f"data{token}"
        folder.mkdir()
        for name in ("orders.csv", "customers.csv", "events.csv"):
            (folder / name).write_text((project_dir / "data" / name).read_text())
    failed = pz(project_dir, "run", env={**FAIL_WH, "DATA_TOKEN": "-tok-a"})
    assert failed.exit_code == 1, failed.output
    retry = pz(project_dir, "retry", env={"DATA_TOKEN": "-tok-b"})  # a secret in the root: another folder
    assert retry.exit_code == 2
    assert "nothing to retry (project changed)" in retry.lines
    assert (
        "note: src_files__customers changed since the failed run (only its connection changed: where it "
        "points (host, port, database, path, bucket), not how pz signs in); run 'pz run' for a full pass if "
        "needed"
    ) in retry.lines
    assert "-tok-a" not in retry.output and "-tok-b" not in retry.output


def test_a_failed_run_leaves_its_staging_checkpointed_a_successful_one_not(project_dir: Path) -> None:
    """`pz retry` opens the failed staging twice; a failed run folds its WAL into the file before it closes
    so neither open replays it. A successful run closes without the checkpoint (nothing reopens it soon)."""
    failed = project_dir / ".pz" / "runs" / _failed_run(project_dir)
    wal = failed / "staging.duckdb.wal"
    assert not wal.exists() or wal.stat().st_size == 0
    with duckdb.connect(str(failed / "staging.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM src_files__orders").fetchone() == (3,)
    assert pz(project_dir, "retry").exit_code == 0
    done = _runs(project_dir)[-1]
    assert (done / "staging.duckdb.wal").stat().st_size > 0
