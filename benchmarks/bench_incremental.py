"""Incremental-read benchmark: a PostgreSQL table of N rows gains 1% new rows before each round; each round
runs pz's incremental load (YAML `sync:` on an indexed timestamp cursor), pz's full load of the same table,
and, when a Python with dlt is given, dlt's `sql_table` with `dlt.sources.incremental` on the same cursor.
Every tool runs as its own child process (peak RSS from os.wait4); the order of the tools alternates between
rounds (paired runs). The sink is a DuckDB file for every tool (append for the incremental ones).

Rows read at the source are PostgreSQL's own counters (pg_stat_user_tables: rows returned by sequential scans
plus rows fetched through indexes) taken before and after each child: pushdown must make the incremental run
proportional to the delta, not the table. Each tool's first run (the initial full load) is reported apart.

    .venv/bin/python benchmarks/bench_incremental.py --rows 10000000 --rounds 3 \
        --dlt-python /work/wt/dlt-venv/bin/python

Both pz trees are byte-compiled first, as an installed pz is (see `byte_compile`), and each pz child runs the
command line the `pz` console script runs (`pz_command`).

`--before-rev REV` (or `--before DIR`, a folder holding an older pipelinez/) adds a fourth tool,
pz-before: the same incremental project run by that tree, alternating with the others, to compare the delta
run before and after a change (issue 22).

dlt is never a dependency of pz: give the interpreter of a separate venv (`python -m venv dlt-venv &&
dlt-venv/bin/pip install "dlt[duckdb,sql-database]" psycopg2-binary pyarrow`). The table lives in database
pz_bench_incr (created once, trimmed back to N rows at the start of every benchmark); drop it with
`DROP DATABASE pz_bench_incr`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

from pz_command import pz_command

HERE = Path(__file__).resolve().parent
DATA = HERE / ".data" / "incremental"
DATABASE = "pz_bench_incr"
NODE = "src_pg__events"


@dataclass(frozen=True)
class Conn:
    host: str = "127.0.0.1"
    port: int = 5432
    user: str = "postgres"
    database: str = DATABASE

    def libpq(self, database: str | None = None) -> str:
        return f"host={self.host} port={self.port} user={self.user} dbname={database or self.database}"

    def uri(self, scheme: str = "postgresql") -> str:
        return f"{scheme}://{self.user}@{self.host}:{self.port}/{self.database}"


# -- the table -----------------------------------------------------------------------------------------
def ensure_table(conn: Conn, rows: int) -> str:
    """events_<rows> with exactly `rows` rows (later rounds' inserts are removed), cursor indexed."""
    import psycopg

    with psycopg.connect(conn.libpq("postgres"), autocommit=True) as admin:
        if not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE]).fetchone():
            admin.execute(f"CREATE DATABASE {DATABASE}")
    table = f"events_{rows}"
    with psycopg.connect(conn.libpq(), autocommit=True) as con:
        found = con.execute("SELECT to_regclass(%s) IS NOT NULL", [table]).fetchone()
        if found and found[0]:
            con.execute(f"DELETE FROM {table} WHERE id > {rows}")
            count = con.execute(f"SELECT count(*) FROM {table}").fetchone()
            if count and count[0] == rows:
                con.execute(f"VACUUM ANALYZE {table}")
                return table
        print(f"creating {table} ({rows:,} rows) …", flush=True)
        start = time.perf_counter()
        con.execute(f"DROP TABLE IF EXISTS {table}")
        con.execute(
            f"CREATE TABLE {table} (id bigint PRIMARY KEY, updated_at timestamp(6) NOT NULL, "
            "customer_id bigint, amount numeric(12,2), status text, note text)"
        )
        con.execute(f"INSERT INTO {table} {_rows_sql(1, rows)}")
        con.execute(f"CREATE INDEX ON {table} (updated_at)")
        con.execute(f"VACUUM (FREEZE, ANALYZE) {table}")
        print(f"  created in {time.perf_counter() - start:.0f}s", flush=True)
    return table


def _rows_sql(first: int, last: int) -> str:
    return (
        "SELECT i, timestamp '2024-01-01' + i * interval '1 second' + (i % 1000) * interval '1 microsecond', "
        "i % 100000, ((i * 7919) % 1000000) / 100.0, (ARRAY['open', 'shipped', 'returned'])[1 + i % 3], "
        f"'note ' || md5(i::text) FROM generate_series({first}::bigint, {last}) AS g(i)"
    )


def add_delta(conn: Conn, table: str, first: int, count: int) -> None:
    import psycopg

    with psycopg.connect(conn.libpq(), autocommit=True) as con:
        con.execute(f"INSERT INTO {table} {_rows_sql(first, first + count - 1)}")
        con.execute(f"ANALYZE {table}")


def rows_read(conn: Conn, table: str) -> tuple[int, int]:
    """(rows returned by sequential scans, rows fetched by index scans) of the table so far."""
    import psycopg

    time.sleep(1.2)  # backends flush their statistics at most once a second (and when they exit)
    with psycopg.connect(conn.libpq(), autocommit=True) as con:
        con.execute("SELECT pg_stat_clear_snapshot()")
        row = con.execute(
            "SELECT coalesce(seq_tup_read, 0), coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables "
            "WHERE relid = to_regclass(%s)",
            [table],
        ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


# -- the tools ---------------------------------------------------------------------------------------------
def write_pz_project(root: Path, conn: Conn, table: str, incremental: bool) -> None:
    if root.exists():
        shutil.rmtree(root)
    sync = "\n    sync: { mode: incremental, cursor: updated_at }" if incremental else ""
    output = "{ strategy: append, duplicates: accept }" if incremental else "{ strategy: replace }"
    files = {
        "project.yml": "name: bench_incr\nretention: { keep_last: 1 }\n",
        "sources/pg.yml": f"""
            connector: postgres
            connection: {{ host: {conn.host}, port: {conn.port}, database: {conn.database},
                          user: {conn.user} }}
            datasets:
              events:
                table: public.{table}
                columns: {{ id: bigint, updated_at: timestamp, customer_id: bigint, amount: "decimal(12,2)",
                           status: varchar, note: varchar }}""",
        "sinks/wh.yml": f"""
            connector: duckdb
            connection: {{ path: wh.duckdb }}
            outputs:
              events: {output}
        """,
        "pipelines/events.sql": """
            INSERT INTO {{ sink('wh', 'events') }}
            SELECT * FROM {{ source('pg', 'events') }}
        """,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        body = textwrap.dedent(text).lstrip()
        if rel == "sources/pg.yml":
            body = body.rstrip() + sync + "\n"
        path.write_text(body, encoding="utf-8")


DLT_CHILD = """
import json, sys, time
import dlt
from dlt.sources.sql_database import sql_table

uri, table, work, out = sys.argv[1:5]
start = time.perf_counter()
resource = sql_table(credentials=uri, table=table, backend="pyarrow", chunk_size=100_000,
                     incremental=dlt.sources.incremental("updated_at"))
pipeline = dlt.pipeline(pipeline_name="pz_bench_incr", pipelines_dir=work,
                        destination=dlt.destinations.duckdb(out), dataset_name="bench")
info = pipeline.run(resource, write_disposition="append")
elapsed = time.perf_counter() - start
rows = pipeline.last_trace.last_normalize_info.row_counts.get(table, 0)
print(json.dumps({"load_s": elapsed, "rows": rows}))
"""


@dataclass
class Run:
    wall_s: float
    load_s: float  # pz: the source-load node's duration; dlt: its own run() time
    rss_mib: int
    rows: int  # rows the tool staged / loaded
    seq_read: int  # rows returned by sequential scans on the server during the run
    idx_fetch: int  # rows fetched through indexes on the server during the run
    cpu_s: float = 0.0  # the child's user + system CPU seconds (steadier than wall under load)


@dataclass
class Series:
    initial: Run | None = None
    runs: list[Run] = field(default_factory=list)


def timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, int, str, float]:
    """(seconds, peak RSS in MiB, stdout, user + system CPU seconds) of one child process."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if code != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({code}):\n{stdout[-4000:]}\n{stderr[-4000:]}")
    return elapsed, usage.ru_maxrss // 1024, stdout, usage.ru_utime + usage.ru_stime


def byte_compile(package: Path) -> None:
    """Byte-compile a pipelinez tree as `pip install` does: with PYTHONDONTWRITEBYTECODE set (or a read-only
    tree) every pz process would otherwise compile ~300 modules from source, 1.6 s on a quiet machine, a
    cost no installed pz pays (dlt's venv is byte-compiled by pip)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)


def measured_tree() -> Path:
    """The pipelinez package the pz children import (this interpreter, this PYTHONPATH)."""
    found = subprocess.run(
        [sys.executable, "-c", "import pipelinez, os; print(os.path.dirname(pipelinez.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(found.stdout.strip())


def tree_at(rev: str, into: Path) -> Path:
    """The pipelinez package of git revision `rev`, extracted into `into` and byte-compiled."""
    archive = subprocess.run(
        ["git", "-C", str(HERE.parent), "archive", rev, "pipelinez"], capture_output=True, check=True
    ).stdout
    into.mkdir(parents=True)
    subprocess.run(["tar", "x"], input=archive, cwd=into, check=True)
    byte_compile(into / "pipelinez")
    return into


def run_tool(
    tool: str, conn: Conn, table: str, dlt_python: str | None, before_tree: Path | None = None
) -> Run:
    before = rows_read(conn, table)
    if tool.startswith("pz-"):
        project = DATA / tool
        env = {**os.environ, "PYTHONPATH": str(before_tree)} if tool == "pz-before" and before_tree else None
        command = [*pz_command(before_tree if tool == "pz-before" else None), "-p", str(project), "run"]
        wall, rss, _, cpu = timed(command, DATA, env)
        runs = sorted((project / ".pz" / "runs").iterdir())
        node = next(
            n for n in json.loads((runs[-1] / "run_results.json").read_text())["nodes"] if n["name"] == NODE
        )
        if node["status"] != "success":
            raise SystemExit(f"{tool}: {node}")
        load_s, rows = node["duration_ms"] / 1000, int(node["rows"])
    else:
        assert dlt_python is not None
        script = DATA / "dlt_child.py"
        script.write_text(DLT_CHILD, encoding="utf-8")
        args = [conn.uri("postgresql+psycopg2"), table, str(DATA / "dlt-work"), str(DATA / "dlt.duckdb")]
        wall, rss, stdout, cpu = timed([dlt_python, str(script), *args], DATA)
        result = json.loads(stdout.strip().splitlines()[-1])
        load_s, rows = float(result["load_s"]), int(result["rows"])
    after = rows_read(conn, table)
    return Run(wall, load_s, rss, rows, after[0] - before[0], after[1] - before[1], cpu)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--delta", type=float, default=0.01, help="new rows per round, as a share of --rows")
    parser.add_argument("--dlt-python", help="a Python with dlt installed (a separate venv)")
    parser.add_argument("--no-full", action="store_true", help="skip pz's full-load runs")
    parser.add_argument("--before-rev", help="also run the incremental project with this git revision's pz")
    parser.add_argument(
        "--before", type=Path, help="also run it with the pz of this folder (holds pipelinez/)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pz-incr-before-") as tmp:
        before_tree = tree_at(args.before_rev, Path(tmp) / "tree") if args.before_rev else args.before
        bench(args, before_tree.resolve() if before_tree else None)


def bench(args: argparse.Namespace, before_tree: Path | None) -> None:
    """The table, the projects, each tool's initial load, then the rounds; the table at the end."""
    conn = Conn()
    byte_compile(measured_tree())
    table = ensure_table(conn, args.rows)
    if DATA.exists():
        shutil.rmtree(DATA)
    DATA.mkdir(parents=True)
    write_pz_project(DATA / "pz-incremental", conn, table, incremental=True)
    write_pz_project(DATA / "pz-full", conn, table, incremental=False)
    tools = ["pz-incremental", *(["dlt"] if args.dlt_python else []), *([] if args.no_full else ["pz-full"])]
    if before_tree is not None:
        write_pz_project(DATA / "pz-before", conn, table, incremental=True)
        tools.insert(1, "pz-before")
    series = {tool: Series() for tool in tools}

    for tool in tools:  # the initial full load of each tool (the incremental ones start from nothing)
        print(f"initial load: {tool} …", flush=True)
        series[tool].initial = run_tool(tool, conn, table, args.dlt_python, before_tree)

    delta = max(1, int(args.rows * args.delta))
    next_id = args.rows + 1
    for r in range(args.rounds):
        add_delta(conn, table, next_id, delta)
        next_id += delta
        order = tools if r % 2 == 0 else list(reversed(tools))
        for tool in order:
            run = run_tool(tool, conn, table, args.dlt_python, before_tree)
            series[tool].runs.append(run)
            print(
                f"round {r + 1} {tool}: {run.rows:,} rows, wall {run.wall_s:.2f}s, cpu {run.cpu_s:.2f}s, "
                f"load {run.load_s:.2f}s, "
                f"source read {run.seq_read + run.idx_fetch:,} rows, peak RSS {run.rss_mib} MiB",
                flush=True,
            )
    print_table(args.rows, delta, args.rounds, series)


def m(values: list[float]) -> float:
    return float(statistics.median(values))


def print_table(rows: int, delta: int, rounds: int, series: dict[str, Series]) -> None:
    print()
    print(f"table {rows:,} rows; +{delta:,} rows before each of {rounds} round(s); medians over rounds")
    header = (
        f"{'tool':<16} {'run':<8} {'rows loaded':>12} {'source rows read':>17} {'wall s':>8} {'cpu s':>7} "
        f"{'load s':>8} {'peak RSS MiB':>13}"
    )
    print(header)
    print("-" * len(header))
    for tool, s in series.items():
        if s.initial is not None:
            i = s.initial
            print(
                f"{tool:<16} {'initial':<8} {i.rows:>12,} {i.seq_read + i.idx_fetch:>17,} {i.wall_s:>8.2f} "
                f"{i.cpu_s:>7.2f} {i.load_s:>8.2f} {i.rss_mib:>13}"
            )
        if s.runs:
            print(
                f"{tool:<16} {'delta':<8} {int(m([r.rows for r in s.runs])):>12,} "
                f"{int(m([r.seq_read + r.idx_fetch for r in s.runs])):>17,} "
                f"{m([r.wall_s for r in s.runs]):>8.2f} {m([r.cpu_s for r in s.runs]):>7.2f} "
                f"{m([r.load_s for r in s.runs]):>8.2f} "
                f"{int(m([r.rss_mib for r in s.runs])):>13}"
            )


if __name__ == "__main__":
    main()
