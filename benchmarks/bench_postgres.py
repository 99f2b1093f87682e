"""PostgreSQL source benchmark: loading a whole N-row table into a DuckDB file, `pz run` (native and universal
tier) against plain DuckDB's postgres_scan, ConnectorX, dlt and Sling. Every tool runs as its own child
process (peak RSS from os.wait4); each tool's run sits between two reference runs (R A R B R C R …) because
machine speed drifts, and its ratio is its time over the mean of the two reference runs around it, median over
rounds.

For pz the time compared is the source-load node's duration_ms (run_results.json); the whole `pz run` wall
time is shown beside it. The reference, ConnectorX and dlt time their load inside the child; Sling is timed
around its CLI. A second table compares the whole processes (wall time over the references' wall time).

    .venv/bin/python benchmarks/bench_postgres.py --rows 10000000 --rounds 3
    .venv/bin/python benchmarks/bench_postgres.py --rows-sweep 1000000,5000000,10000000 --rounds 1

The table pz_bench.orders_<N> is created once in the database and reused; remove it with
`DROP SCHEMA pz_bench CASCADE`.
"""

from __future__ import annotations

import argparse
import glob
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
DATA = HERE / ".data"
SCHEMA = "pz_bench"
NODE = "src_pg__orders"
TOOLS = ("reference", "pz-native", "pz-universal", "connectorx", "dlt", "sling")
LABELS = {
    "reference": "plain duckdb postgres_scan",
    "pz-native": "pz run native (source load)",
    "pz-universal": "pz run universal (source load)",
    "connectorx": "connectorx arrow_stream p=2",
    "dlt": "dlt sql_table pyarrow",
    "sling": "sling run (CLI)",
}


@dataclass
class Conn:
    host: str
    port: int
    user: str
    database: str

    def libpq(self) -> str:
        return f"host={self.host} port={self.port} user={self.user} dbname={self.database}"

    def uri(self, scheme: str = "postgresql") -> str:
        return f"{scheme}://{self.user}@{self.host}:{self.port}/{self.database}"


# -- the table -----------------------------------------------------------------------------------------
def ensure_table(conn: Conn, rows: int) -> str:
    """Create pz_bench.orders_<rows> server-side unless it is there with the right row count."""
    import psycopg

    table = f"orders_{rows}"
    with psycopg.connect(conn.libpq(), autocommit=True) as con:
        found = con.execute("SELECT to_regclass(%s) IS NOT NULL", [f"{SCHEMA}.{table}"]).fetchone()
        if found and found[0]:
            count = con.execute(f"SELECT count(*) FROM {SCHEMA}.{table}").fetchone()
            if count and count[0] == rows:
                return table
        print(f"creating {SCHEMA}.{table} ({rows:,} rows) …", flush=True)
        start = time.perf_counter()
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        con.execute(f"DROP TABLE IF EXISTS {SCHEMA}.{table}")
        con.execute(f"""
            CREATE TABLE {SCHEMA}.{table} (
                id bigint PRIMARY KEY, customer_id bigint, customer text, amount numeric(12,2),
                quantity bigint, status text, placed_at timestamptz, ship_date date, is_paid boolean,
                note text)""")
        con.execute(f"""
            INSERT INTO {SCHEMA}.{table}
            SELECT i, i % 100000, 'customer_' || (i % 100000), ((i * 7919) % 1000000) / 100.0,
                   1 + i % 20,
                   (ARRAY['open', 'shipped', 'returned', 'cancelled'])[1 + i % 4],
                   timestamptz '2024-01-01 00:00+00' + (i % 31536000) * interval '1 second',
                   date '2024-01-01' + (i % 700)::int, i % 3 <> 0,
                   CASE WHEN i % 10 = 0 THEN NULL ELSE 'note ' || md5(i::text) END
            FROM generate_series(1::bigint, {rows}) AS g(i)""")
        # FREEZE sets the hint bits and visibility map now, so no measured scan pays for them
        con.execute(f"VACUUM (FREEZE, ANALYZE) {SCHEMA}.{table}")
        print(f"  created in {time.perf_counter() - start:.0f}s", flush=True)
    return table


# -- children (each tool runs in its own process) ----------------------------------------------------
def extension_path() -> str:
    """The postgres_scanner file shipped by the duckdb-extension-postgres-scanner package (as pz finds it)."""
    import duckdb
    import duckdb_extension_postgres_scanner as package

    folder = os.path.join(os.path.dirname(package.__file__), "extensions")
    wanted = os.path.join(folder, f"v{duckdb.__version__}", "postgres_scanner.duckdb_extension")
    if os.path.isfile(wanted):
        return wanted
    return sorted(glob.glob(os.path.join(folder, "*", "postgres_scanner.duckdb_extension")))[-1]


def child_reference(conn: Conn, table: str, out: Path) -> dict[str, float]:
    import duckdb

    con = duckdb.connect(str(out))
    start = time.perf_counter()
    con.execute(f"LOAD '{extension_path()}'")
    con.execute(f"CREATE TABLE t AS SELECT * FROM postgres_scan('{conn.libpq()}', '{SCHEMA}', '{table}')")
    elapsed = time.perf_counter() - start
    rows = con.execute("SELECT count(*) FROM t").fetchone()
    con.close()
    return {"load_s": elapsed, "rows": rows[0] if rows else 0}


def child_connectorx(conn: Conn, table: str, out: Path) -> dict[str, float]:
    import connectorx as cx
    import duckdb

    con = duckdb.connect(str(out))
    start = time.perf_counter()
    reader = cx.read_sql(
        conn.uri(),
        f"SELECT * FROM {SCHEMA}.{table}",
        return_type="arrow_stream",
        partition_on="id",
        partition_num=2,
    )
    con.register("reader", reader)
    con.execute("CREATE TABLE t AS SELECT * FROM reader")
    elapsed = time.perf_counter() - start
    rows = con.execute("SELECT count(*) FROM t").fetchone()
    con.close()
    return {"load_s": elapsed, "rows": rows[0] if rows else 0}


def child_dlt(conn: Conn, table: str, out: Path) -> dict[str, float]:
    import dlt
    from dlt.sources.sql_database import sql_table

    work = out.with_suffix(".dlt")
    start = time.perf_counter()
    resource = sql_table(
        credentials=conn.uri("postgresql+psycopg2"),
        schema=SCHEMA,
        table=table,
        backend="pyarrow",
        chunk_size=100_000,
    )
    pipeline = dlt.pipeline(
        pipeline_name="pz_bench",
        pipelines_dir=str(work),
        destination=dlt.destinations.duckdb(str(out)),
        dataset_name="bench",
    )
    pipeline.run(resource, write_disposition="replace")
    elapsed = time.perf_counter() - start
    import duckdb

    con = duckdb.connect(str(out), read_only=True)
    rows = con.execute(f"SELECT count(*) FROM bench.{table}").fetchone()
    con.close()
    return {"load_s": elapsed, "rows": rows[0] if rows else 0}


def sling_home() -> Path | None:
    """A private HOME for Sling: its DuckDB target runs the DuckDB CLI from ~/.sling/bin/duckdb/<version>/,
    which would download it and its json/httpfs extensions; the bench extra ships all of them as PyPI
    packages (sling-linux-amd64, duckdb-cli, duckdb-extension-json/-httpfs), laid out here. None: missing."""
    try:
        import duckdb
        import duckdb_cli
        import duckdb_extension_httpfs
        import duckdb_extension_json
        import sling_linux_amd64  # noqa: F401
    except ImportError:
        return None
    version = duckdb.__version__
    home = DATA / "sling_home"
    cli = home / ".sling" / "bin" / "duckdb" / version / "duckdb"
    extensions = home / ".duckdb" / "extensions" / f"v{version}" / "linux_amd64"
    cli.parent.mkdir(parents=True, exist_ok=True)
    extensions.mkdir(parents=True, exist_ok=True)
    shutil.copy2(Path(duckdb_cli.__file__).parent / "duckdb", cli)
    for package, name in ((duckdb_extension_httpfs, "httpfs"), (duckdb_extension_json, "json")):
        shipped = Path(package.__file__).parent / "extensions" / f"v{version}" / f"{name}.duckdb_extension"
        shutil.copy2(shipped, extensions / shipped.name)
    return home


def sling_binary() -> str:
    import sling_linux_amd64

    return str(Path(sling_linux_amd64.__file__).parent / "bin" / "sling-linux-amd64")


def child_sling(conn: Conn, table: str, out: Path) -> dict[str, float]:
    import duckdb

    home = sling_home()
    assert home is not None
    env = {
        **os.environ,
        "HOME": str(home),
        "SLING_HOME_DIR": str(home / ".sling"),
        "PZ_BENCH_PG": f"{conn.uri()}?sslmode=disable",
        "PZ_BENCH_DDB": f"duckdb://{out}?duckdb_version={duckdb.__version__}",
    }
    cmd = [sling_binary(), "run", "--src-conn", "PZ_BENCH_PG", "--src-stream", f"{SCHEMA}.{table}"]
    cmd += ["--tgt-conn", "PZ_BENCH_DDB", "--tgt-object", "main.t", "--mode", "full-refresh"]
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"sling failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    con = duckdb.connect(str(out), read_only=True)
    rows = con.execute("SELECT count(*) FROM t").fetchone()
    con.close()
    return {"load_s": elapsed, "rows": rows[0] if rows else 0}


CHILDREN = {
    "reference": child_reference,
    "connectorx": child_connectorx,
    "dlt": child_dlt,
    "sling": child_sling,
}


# -- pz projects ---------------------------------------------------------------------------------------
def write_project(
    root: Path, conn: Conn, table: str, force_universal: bool, memory_limit: str | None = None
) -> None:
    limit = f", memory_limit: {memory_limit}" if memory_limit else ""
    if root.exists():
        shutil.rmtree(root)
    files = {
        "project.yml": f"""
            name: bench_pg
            retention: {{ keep_last: 1 }}
            engine: {{ force_universal: {str(force_universal).lower()}{limit} }}
        """,
        "sources/pg.yml": f"""
            connector: postgres
            connection: {{ host: {conn.host}, port: {conn.port}, database: {conn.database},
                          user: {conn.user} }}
            datasets:
              orders: {{ table: {SCHEMA}.{table} }}
        """,
        # a dead leaf (warning PZ0223): the run is the source load plus a count over the staged table
        "pipelines/counted.sql": """
            SELECT count(*) AS n FROM {{ source('pg', 'orders') }}
        """,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def pz_result(project: Path) -> dict[str, float]:
    runs = sorted((project / ".pz" / "runs").iterdir())
    results = json.loads((runs[-1] / "run_results.json").read_text())
    node = next(n for n in results["nodes"] if n["name"] == NODE)
    if node["status"] != "success":
        raise SystemExit(f"pz run in {project}: {NODE} is {node['status']}: {node.get('error')}")
    return {"load_s": node["duration_ms"] / 1000, "rows": node["rows"], "tier": node["tier"]}


# -- timing --------------------------------------------------------------------------------------------
@dataclass
class Run:
    load_s: float  # the compared quantity
    wall_s: float  # the whole child process
    rss_mib: int


@dataclass
class Series:
    runs: list[Run] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    wall_ratios: list[float] = field(default_factory=list)  # whole process over the references' whole process


def timed(cmd: list[str], cwd: Path) -> tuple[float, int, str]:
    """(seconds, peak RSS in MiB, stdout) of one child process."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{stdout}\n{stderr[-4000:]}")
    return elapsed, usage.ru_maxrss // 1024, stdout


def run_tool(tool: str, conn: Conn, table: str, rows: int, projects: dict[str, Path]) -> Run:
    if tool.startswith("pz-"):
        project = projects[tool]
        wall, rss, _ = timed([*pz_command(), "-p", str(project), "run"], DATA)
        result = pz_result(project)
        expected_tier = tool.removeprefix("pz-")
        if result["tier"] != expected_tier:
            raise SystemExit(f"{tool}: the source load ran in tier {result['tier']}")
    else:
        out = DATA / f"pg_{tool}.duckdb"
        remove_output(out)
        cmd = [sys.executable, __file__, "--child", tool, "--table", table, "--out", str(out)]
        wall, rss, stdout = timed([*cmd, *conn_args(conn)], DATA)
        result = json.loads(stdout.strip().splitlines()[-1])
        remove_output(out)
    if result["rows"] != rows:
        raise SystemExit(f"{tool} loaded {result['rows']} rows, expected {rows}")
    return Run(float(result["load_s"]), wall, rss)


def remove_output(out: Path) -> None:
    """A child's DuckDB file, its WAL and dlt's working folder."""
    for stale in (out, out.with_suffix(".duckdb.wal"), out.with_suffix(".dlt")):
        if stale.is_dir():
            shutil.rmtree(stale)
        elif stale.exists():
            stale.unlink()


def conn_args(conn: Conn) -> list[str]:
    return ["--host", conn.host, "--port", str(conn.port), "--user", conn.user, "--database", conn.database]


def measure(
    conn: Conn, rows: int, rounds: int, tools: list[str], memory_limit: str | None = None
) -> dict[str, Series]:
    """R T1 R T2 R … Tk R per round; each tool's ratio is over the mean of the two references around it."""
    table = ensure_table(conn, rows)
    projects = {}
    for tool in tools:
        if tool.startswith("pz-"):
            projects[tool] = DATA / f"pg_project_{tool.removeprefix('pz-')}_{rows}"
            write_project(projects[tool], conn, table, tool == "pz-universal", memory_limit)
    series = {tool: Series() for tool in ["reference", *tools]}
    for index in range(rounds):
        ref = run_tool("reference", conn, table, rows, projects)
        series["reference"].runs.append(ref)
        for tool in tools:
            mine = run_tool(tool, conn, table, rows, projects)
            after = run_tool("reference", conn, table, rows, projects)
            series[tool].runs.append(mine)
            series[tool].ratios.append(mine.load_s / ((ref.load_s + after.load_s) / 2))
            series[tool].wall_ratios.append(mine.wall_s / ((ref.wall_s + after.wall_s) / 2))
            series["reference"].runs.append(after)
            ref = after
            print(
                f"  round {index + 1}: {tool:<13} {mine.load_s:7.2f}s (wall {mine.wall_s:6.2f}s) "
                f"ratio {series[tool].ratios[-1]:5.2f}  {mine.rss_mib} MiB",
                flush=True,
            )
    return series


def print_table(rows: int, rounds: int, series: dict[str, Series]) -> None:
    """Two tables: the compared time (pz: its source-load node), then the whole processes."""
    stats = {
        tool: (
            statistics.median(r.load_s for r in data.runs),
            statistics.median(data.ratios) if data.ratios else 1.0,
            statistics.median(r.wall_s for r in data.runs),
            statistics.median(data.wall_ratios) if data.wall_ratios else 1.0,
            max(r.rss_mib for r in data.runs),
        )
        for tool, data in series.items()
    }
    print(f"\n{rows:,} rows PostgreSQL → DuckDB file, {rounds} alternating rounds")
    head = f"{'tool':<31} {'median s':>9} {'ratio':>6} {'rows/s':>11} {'peak RSS MiB':>13} {'wall s':>7}"
    print(f"{head}\n{'-' * len(head)}")
    for tool, (median, ratio, wall, _, rss) in stats.items():
        print(
            f"{LABELS[tool]:<31} {median:>9.2f} {ratio:>6.2f} {rows / median:>11,.0f} {rss:>13} {wall:>7.2f}"
        )
    print(f"\nwhole processes (start-up to exit, what the user waits for), {rounds} alternating rounds")
    head = f"{'tool':<31} {'median wall s':>13} {'ratio':>6} {'rows/s':>11} {'peak RSS MiB':>13}"
    print(f"{head}\n{'-' * len(head)}")
    for tool, (_, _, wall, wall_ratio, rss) in stats.items():
        label = LABELS[tool].split(" (")[0]
        print(f"{label:<31} {wall:>13.2f} {wall_ratio:>6.2f} {rows / wall:>11,.0f} {rss:>13}")


def print_sweep(results: dict[int, dict[str, Series]]) -> None:
    print("\nPeak RSS as rows grow (MiB; seconds and ratio to plain DuckDB in brackets)")
    tools = list(next(iter(results.values())))
    head = f"{'rows':>12} " + " ".join(f"{LABELS[t].split(' (')[0]:>28}" for t in tools)
    print(head)
    print("-" * len(head))
    for rows, series in results.items():
        cells = []
        for tool in tools:
            data = series[tool]
            ratio = statistics.median(data.ratios) if data.ratios else 1.0
            median = statistics.median(r.load_s for r in data.runs)
            cells.append(f"{max(r.rss_mib for r in data.runs):>6} ({median:6.2f}s {ratio:4.2f}x)")
        print(f"{rows:>12,} " + " ".join(f"{c:>28}" for c in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--memory-limit",
        default=None,
        help="engine.memory_limit (default: pz's)",
    )
    parser.add_argument(
        "--rows-sweep",
        help="comma-separated row counts (e.g. 1000000,5000000,10000000): peak RSS of the pz tiers per count",
    )
    parser.add_argument(
        "--tools",
        default=",".join(TOOLS[1:]),
        help=f"comma-separated, from {', '.join(TOOLS[1:])} (the reference always runs)",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5432)
    parser.add_argument("--user", default="postgres")
    parser.add_argument("--database", default="test")
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--table", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    conn = Conn(args.host, args.port, args.user, args.database)
    if args.child:
        print(json.dumps(CHILDREN[args.child](conn, args.table, Path(args.out))))
        return
    DATA.mkdir(parents=True, exist_ok=True)
    tools = [t for t in args.tools.split(",") if t]
    unknown = [t for t in tools if t not in TOOLS[1:]]
    if unknown:
        raise SystemExit(f"unknown tool(s): {', '.join(unknown)}")
    if "dlt" in tools:
        try:
            import dlt  # noqa: F401
        except ImportError:
            print("note: dlt is not installed (pip install -e '.[bench]'); skipping it")
            tools.remove("dlt")
    if "sling" in tools and sling_home() is None:
        print("note: Sling is not installed (pip install -e '.[bench]'); skipping it")
        tools.remove("sling")
    if args.rows_sweep:
        counts = [int(c.replace("_", "")) for c in args.rows_sweep.split(",") if c]
        sweep_tools = [t for t in tools if t.startswith("pz-")] or ["pz-native", "pz-universal"]
        results = {}
        for rows in counts:
            print(f"{rows:,} rows:", flush=True)
            results[rows] = measure(conn, rows, args.rounds, sweep_tools, args.memory_limit)
        print_sweep(results)
        return
    series = measure(conn, args.rows, args.rounds, tools, args.memory_limit)
    print_table(args.rows, args.rounds, series)


if __name__ == "__main__":
    main()
