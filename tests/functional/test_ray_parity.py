"""`pz run --executor ray` gives what the local executor gives: the same node statuses, row counts,
partitions, staged rows (with their types) and sink contents, on several projects (local files to DuckDB and
Parquet sinks, a PostgreSQL source read in partitions into a PostgreSQL sink, partitioned files, a failing
node with skipped descendants, checks that warn and that gate). Each project runs twice, in two copies of its
folder: once per executor. Ray starts once for the session (`ray_instance`, 2 CPUs)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest

from tests.conftest import PG_HOST, PG_PORT, PG_USER, fresh_pg_database, pz, write_project

FILES = {
    "project.yml": "name: shop\nengine: { threads: 2 }\n",
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          orders:
            format: csv
            path: orders.csv
            columns: { id: bigint, customer: varchar, amount: "decimal(10,2)", code: varchar }
          customers: { format: csv, path: customers.csv }
    """,
    "sinks/wh.yml": """
        connector: duckdb
        connection: { path: out/wh.duckdb }
        outputs:
          totals: { table: main.totals }
          big: { table: main.big }
    """,
    "sinks/lake.yml": """
        connector: localfiles
        connection: { root: out/lake }
        outputs:
          orders_copy: { format: parquet }
    """,
    "data/orders.csv": (
        "id,customer,amount,code\n1,ada,10.50,1\n2,grace,20.00,2\n3,ada,5.25,x\n4,linus,7.00,4\n"
    ),
    "data/customers.csv": "name,country\nada,GB\ngrace,US\nlinus,FI\n",
    # sum(bigint) is a HUGEINT, which Parquet does not hold exactly: staged as text, read back as HUGEINT
    "pipelines/totals.sql": """
        INSERT INTO {{ sink('wh', 'totals') }}
        SELECT o.customer, c.country, sum(o.amount) AS total, sum(o.id) AS ids, count(*) AS n
        FROM {{ source('files', 'orders') }} AS o
        JOIN {{ source('files', 'customers') }} AS c ON c.name = o.customer
        GROUP BY ALL ORDER BY 1
    """,
    "pipelines/totals.yml": """
        checks:
          - not_null: { columns: [customer] }
          - row_count: { max: 2 }
            severity: warn
    """,
    "pipelines/big.sql": """
        INSERT INTO {{ sink('wh', 'big') }}
        SELECT customer, total FROM {{ ref('totals') }} WHERE total > 10
    """,
    "pipelines/orders_copy.sql": """
        INSERT INTO {{ sink('lake', 'orders_copy') }}
        SELECT * FROM {{ source('files', 'orders') }}
    """,
}

FAILING = {
    **{k: v for k, v in FILES.items() if not k.startswith("pipelines/")},
    "project.yml": "name: shop\nengine: { threads: 2, retry: { max_attempts: 1 } }\n",
    # 'x' is no integer: the pipeline fails, its checks and its write are skipped; the other branch goes on
    "pipelines/codes.sql": """
        INSERT INTO {{ sink('wh', 'totals') }}
        SELECT id, CAST(code AS INTEGER) AS code FROM {{ source('files', 'orders') }}
    """,
    "pipelines/codes.yml": "checks:\n  - unique: { columns: [id] }\n",
    "pipelines/big.sql": """
        INSERT INTO {{ sink('wh', 'big') }}
        SELECT customer, amount FROM {{ source('files', 'orders') }} WHERE amount > 6
    """,
    "pipelines/orders_copy.sql": FILES["pipelines/orders_copy.sql"],
}

PARTS = {
    "project.yml": "name: parts\n",
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          events:
            format: csv
            path: "events/*.csv"
            files_per_partition: 1
            columns: { day: date, kind: varchar, n: integer }
    """,
    "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
    **{
        f"data/events/{d}.csv": "day,kind,n\n"
        + "".join(f"2026-01-{d:02d},{k},{d * 10 + i}\n" for i, k in enumerate("abc"))
        for d in range(1, 6)
    },
    "pipelines/per_kind.sql": """
        INSERT INTO {{ sink('wh', 'per_kind') }}
        SELECT kind, count(*) AS days, sum(n) AS total FROM {{ source('files', 'events') }}
        GROUP BY kind ORDER BY kind
    """,
    "pipelines/per_kind.yml": "checks:\n  - accepted_values: { column: kind, values: [a, b, c] }\n",
}


def _postgres(db: str) -> dict[str, str]:
    return {
        "project.yml": "name: pg\nenv:\n  PG_PASSWORD: { required: true, secret: true }\n",
        "sources/pg.yml": f"""
            connector: postgres
            connection:
              host: {PG_HOST}
              port: {PG_PORT}
              database: {db}
              user: {PG_USER}
              password: "{{{{ env('PG_PASSWORD') }}}}"
            datasets:
              orders:
                table: public.orders
                partitions: {{ column: id, count: 3 }}
                columns: {{ id: bigint, customer: varchar, amount: "decimal(12,2)", at: timestamptz }}
              customers: {{ table: public.customers }}
        """,
        "sinks/pgout.yml": f"""
            connector: postgres
            connection:
              host: {PG_HOST}
              port: {PG_PORT}
              database: {db}
              user: {PG_USER}
              password: "{{{{ env('PG_PASSWORD') }}}}"
            outputs:
              totals: {{ table: public.totals_RUN, strategy: merge, keys: [customer] }}
        """,
        "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
        "pipelines/totals.sql": """
            INSERT INTO {{ sink('pgout', 'totals') }}
            SELECT o.customer, c.country, sum(o.amount) AS total, max(o.at) AS last_at
            FROM {{ source('pg', 'orders') }} AS o JOIN {{ source('pg', 'customers') }} AS c USING (customer)
            GROUP BY ALL
        """,
        "pipelines/orders_kept.sql": """
            INSERT INTO {{ sink('wh', 'orders') }}
            SELECT * FROM {{ source('pg', 'orders') }}
        """,
    }


PG_SETUP = """
    CREATE TABLE customers (customer text PRIMARY KEY, country text);
    INSERT INTO customers SELECT 'c' || i, CASE WHEN i % 2 = 0 THEN 'GB' ELSE 'US' END
      FROM generate_series(1, 7) i;
    CREATE TABLE orders (id bigint PRIMARY KEY, customer text, amount numeric(12,2), at timestamptz);
    INSERT INTO orders SELECT i, 'c' || (i % 7 + 1), (i % 100) + 0.25,
      timestamptz '2026-01-01 00:00:00+00' + i * interval '1 minute' FROM generate_series(1, 3000) i;
"""

SECRET = "rAy-s3cret-VALUE-42"


def _last_run(project: Path) -> Path:
    return sorted((project / ".pz" / "runs").iterdir())[-1]


def _outcome(project: Path, attach: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """What must be the same on both executors: per node (status, rows, error code, partitions), every
    staged table's column types and rows, and each sink's contents. `attach` makes the staging database's
    connection able to read its views' Parquet (an s3:// staging)."""
    run = _last_run(project)
    results = json.loads((run / "run_results.json").read_text())
    nodes = {
        n["name"]: (
            n["status"],
            n["rows"],
            (n.get("error") or {}).get("code"),
            [(p["index"], p["rows"], p["status"]) for p in n.get("partitions") or []],
        )
        for n in results["nodes"]
    }
    staged: dict[str, Any] = {}
    con = duckdb.connect(str(run / "staging.duckdb"), read_only=True)
    try:
        if attach is not None:
            attach(con)
        names = [
            r[0]
            for r in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
                "UNION SELECT view_name FROM duckdb_views() WHERE database_name = current_database() "
                "AND NOT internal"
            ).fetchall()
        ]
        for name in names:
            types = [(r[0], r[1]) for r in con.execute(f'DESCRIBE "{name}"').fetchall()]
            rows = con.execute(f'SELECT COLUMNS(*)::VARCHAR FROM "{name}"').fetchall()
            staged[name] = (types, sorted(rows, key=repr))
    finally:
        con.close()
    sinks: dict[str, Any] = {}
    wh = project / "out" / "wh.duckdb"
    if wh.exists():
        con = duckdb.connect(str(wh), read_only=True)
        try:
            for (table,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall():
                types = [(r[0], r[1]) for r in con.execute(f'DESCRIBE "{table}"').fetchall()]
                rows = con.execute(f'SELECT COLUMNS(*)::VARCHAR FROM "{table}"').fetchall()
                sinks[f"wh.{table}"] = (types, sorted(rows, key=repr))
        finally:
            con.close()
    for parquet in sorted((project / "out").glob("lake/**/*.parquet")):
        rel = parquet.relative_to(project / "out").as_posix()
        sinks[rel] = sorted(duckdb.sql(f"SELECT * FROM read_parquet('{parquet}')").fetchall())
    return {"status": results["status"], "nodes": nodes, "staged": staged, "sinks": sinks}


@pytest.fixture
def pg_db() -> Iterator[str]:
    with fresh_pg_database(PG_SETUP) as name:
        yield name


def _pg_rows(db: str, table: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=db) as con:
        rows = con.execute(f"SELECT * FROM public.{table}").fetchall()  # type: ignore[arg-type]
        return sorted(rows, key=repr)


@pytest.mark.parametrize(
    ("files", "exit_code"),
    [(FILES, 0), (FAILING, 1), (PARTS, 0)],
    ids=["files-to-duckdb-and-parquet", "failing-node-skips-descendants", "partitioned-files"],
)
def test_the_ray_executor_gives_what_the_local_executor_gives(
    tmp_path: Path, ray_instance: Any, files: dict[str, str], exit_code: int
) -> None:
    local = write_project(tmp_path / "local", files)
    remote = write_project(tmp_path / "ray", files)
    by_local = pz(local, "run")
    by_ray = pz(remote, "run", "--executor", "ray")
    assert by_local.exit_code == exit_code, by_local.output
    assert by_ray.exit_code == exit_code, by_ray.output
    expected = _outcome(local)
    assert expected["nodes"] and expected["staged"]
    assert _outcome(remote) == expected
    assert _node_lines(by_ray.lines) == _node_lines(by_local.lines)


def _node_lines(lines: list[str]) -> list[tuple[str, str]]:
    """(status word, node) of each node line: the order nodes finish in and their timings may differ."""
    return sorted(
        (line.split()[0], line.split()[1])
        for line in lines
        if line.startswith(("ok ", "FAIL ", "SKIP ", "WARN "))
    )


def test_postgres_partitions_to_postgres_and_duckdb_on_both_executors(
    tmp_path: Path, ray_instance: Any, pg_db: str
) -> None:
    outcomes = []
    for executor in ("local", "ray"):
        files = _postgres(pg_db)
        files["sinks/pgout.yml"] = files["sinks/pgout.yml"].replace("totals_RUN", f"totals_{executor}")
        project = write_project(tmp_path / executor, files)
        result = pz(project, "run", "--executor", executor, env={"PG_PASSWORD": SECRET})
        assert result.exit_code == 0, result.output
        assert SECRET not in result.output
        outcomes.append(_outcome(project))
    assert outcomes[0] == outcomes[1]
    orders = outcomes[1]["nodes"]["src_pg__orders"]
    assert orders[1] == 3000 and len(orders[3]) == 3 and sum(p[1] for p in orders[3]) == 3000
    assert _pg_rows(pg_db, "totals_local") == _pg_rows(pg_db, "totals_ray")
    assert len(_pg_rows(pg_db, "totals_ray")) == 7
    # the secret travelled to the workers inside the pickled task only: no artifact, staged file or Ray log
    # of this session holds it (Ray's own logs name tasks `pz:<node>#<attempt>`, never their arguments)
    logs = Path(ray_instance._private.worker._global_node.get_session_dir_path())
    for folder in (tmp_path / "ray", logs):
        for path in folder.rglob("*"):
            if path.is_file() and not path.is_symlink():
                assert SECRET.encode() not in path.read_bytes(), path


def test_a_ray_run_stages_parquet_with_manifests_and_the_driver_keeps_views(
    tmp_path: Path, ray_instance: Any
) -> None:
    project = write_project(tmp_path / "p", FILES)
    staging = tmp_path / "shared"
    result = pz(project, "run", env={"PZ_EXECUTOR": "ray", "PZ_STAGING_URL": staging.as_uri()})
    assert result.exit_code == 0, result.output
    run = _last_run(project)
    results = json.loads((run / "run_results.json").read_text())
    assert results["args"]["executor"] == "ray" and results["args"]["staging"] == str(staging)
    folder = staging / run.name
    # every stored table has a manifest written last and listing its files
    # (big and orders_copy are streamed into their sink writes: computed while written, never staged)
    assert sorted(p.name for p in folder.iterdir()) == ["src_files__customers", "src_files__orders", "totals"]
    for table in folder.iterdir():
        manifest = json.loads((table / "_manifest.json").read_text())
        assert manifest["table"] == table.name and manifest["run_id"] == run.name
        assert sorted(p.name for p in table.iterdir()) == sorted(["_manifest.json", *manifest["files"]])
        node = next(n for n in results["nodes"] if n["name"] == table.name)
        assert manifest["rows"] == node["rows"] and manifest["node_id"] == node["id"]
    totals = json.loads((folder / "totals" / "_manifest.json").read_text())
    ids = next(c for c in totals["columns"] if c["name"] == "ids")
    assert ids == {"name": "ids", "type": "HUGEINT", "stored": "VARCHAR"}
    con = duckdb.connect(str(run / "staging.duckdb"), read_only=True)
    try:
        views = {
            r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
        }
        assert {"src_files__orders", "totals", "big", "orders_copy"} <= views  # streamed ones too
        assert con.execute("SELECT sum(ids)::BIGINT FROM totals").fetchone() == (10,)
    finally:
        con.close()


def test_executor_settings_that_cannot_be_honoured_are_refused_before_anything_runs(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p", FILES)
    cases = [
        (
            ("run", "--executor", "ray", "--staging", "s3://Bad_Bucket/pz"),
            {},
            "'Bad_Bucket' is not an S3 bucket name",
        ),
        (("run", "--staging", "gs://b/x"), {}, "gs:// staging is not available"),  # the local executor's
        (("run",), {"PZ_EXECUTOR": "spark"}, "unknown executor 'spark'"),
        (
            ("run",),
            {"PZ_EXECUTOR": "ray", "PZ_STAGING_URL": "gs://b/x"},
            "gs:// staging is not available",
        ),
    ]
    for args, env, message in cases:
        result = pz(project, *args, env=env)
        assert result.exit_code == 2, result.output
        assert "error: PZ0711" in result.output and message in result.output, result.output
    assert not (project / ".pz" / "runs").exists()  # refused before any run started
    bad = pz(project, "run", "--executor", "dask")
    assert bad.exit_code == 2 and "PZ0513" in bad.output


def test_without_ray_installed_the_ray_executor_is_pz0707_with_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    project = write_project(tmp_path / "p", FILES)
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    result = pz(project, "run", "--executor", "ray")
    assert result.exit_code == 2, result.output
    assert "error: PZ0707" in result.output and "pip install 'pipelinez[ray]'" in result.output
    assert not (project / ".pz" / "runs").exists()


def test_a_cluster_running_another_pipelinez_is_refused_by_the_version_probe(
    tmp_path: Path, ray_instance: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipelinez.engine.distributed import ray_cluster

    project = write_project(tmp_path / "p", FILES)
    real = ray_cluster.versions()
    monkeypatch.setattr(ray_cluster, "versions", lambda: {**real, "pipelinez": "0.0.1"})  # the driver's view
    result = pz(project, "run", "--executor", "ray")
    assert result.exit_code == 2, result.output
    assert "error: PZ0709" in result.output
    assert f"pipelinez {real['pipelinez']} (driver: 0.0.1)" in result.output
    assert not (project / ".pz" / "runs").exists()
