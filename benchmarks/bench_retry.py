"""`pz retry` benchmark: the retry article's scenario on an N-row PostgreSQL table (default 10M rows). Two
source datasets (orders, N rows; customers, 100k rows) feed one pipeline (orders per customer) written to a
parquet "lake" and a PostgreSQL "warehouse". Each round, paired on the same machine state:

1. `pz run` that succeeds: the full run (whole-process wall time);
2. `pz run` whose warehouse write fails (failpoint `sink.write@warehouse.by_customer`);
3. `pz retry`: copies both loads from the failed run's staging, carries the lake write forward, re-runs the
   pipeline and writes the warehouse once (whole-process wall time).

The figure is retry / full run, per round, median over rounds (goal: at most 5%). The source-load node times
(extraction in the full run, local copy in the retry) are shown beside it, and each process's peak RSS.

Two source shapes. Loopback: PostgreSQL on this machine, the best case for the full run (it extracts about
500k rows/s), so the retry's fixed seconds weigh most. `--link-mbit N` adds a modelled remote link: the same
project once more with PostgreSQL behind a loopback TCP proxy paced to N Mbit/s each way
(tests/faults/tcp_proxy.py, one link shared by all of a run's connections), for the source and, through a
second proxy of the same rate, the warehouse. Each round then runs both shapes, the order alternating, and
both figures are printed: the modelled one never alone. The failing run that sets up each retry is not timed
and goes through the proxy unpaced (same host and port, so the same node ids; the staging is the same).

    .venv/bin/python benchmarks/bench_retry.py --rows 10000000 --rounds 3
    .venv/bin/python benchmarks/bench_retry.py --rows 10000000 --rounds 3 --link-mbit 150

The package's bytecode is compiled first, as `pip install` does (this machine sets PYTHONDONTWRITEBYTECODE,
which would otherwise compile every module in every process).

The table pz_bench.orders_<N> is shared with bench_postgres.py (created once, reused; drop it with
`DROP SCHEMA pz_bench CASCADE`); the warehouse writes to schema pz_bench_retry, dropped at the end.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

sys.path.insert(0, str(HERE.parent))

from bench_postgres import SCHEMA, Conn, ensure_table  # noqa: E402
from pz_command import pz_command  # noqa: E402

from tests.faults.tcp_proxy import FaultProxy  # noqa: E402

WAREHOUSE = "pz_bench_retry"
LOADS = ("src_pg__orders", "src_pg__customers")


def write_project(
    root: Path, conn: Conn, table: str, memory_limit: str, warehouse: Conn | None = None
) -> None:
    def connection(c: Conn) -> str:
        return f"{{ host: {c.host}, port: {c.port}, database: {c.database}, user: {c.user} }}"

    files = {
        "project.yml": f"""
            name: bench_retry
            retention: {{ keep_last: 2 }}
            engine: {{ memory_limit: {memory_limit} }}
        """,
        "sources/pg.yml": f"""
            connector: postgres
            connection: {connection(conn)}
            datasets:
              orders:
                table: {SCHEMA}.{table}
                columns: {{ id: bigint, customer_id: bigint, customer: varchar, amount: "decimal(12,2)",
                           quantity: bigint, status: varchar, placed_at: timestamptz, ship_date: date,
                           is_paid: boolean, note: varchar }}
              customers:
                query: SELECT DISTINCT customer_id AS id, customer AS name FROM {SCHEMA}.{table}
                       WHERE id <= 100000
                columns: {{ id: bigint, name: varchar }}
        """,
        "sinks/lake.yml": "connector: localfiles\nconnection: { root: lake }\n",
        "sinks/warehouse.yml": f"""
            connector: postgres
            connection: {connection(warehouse or conn)}
            outputs:
              by_customer: {{ table: {WAREHOUSE}.by_customer }}
        """,
        "pipelines/by_customer.sql": """
            INSERT INTO {{ sink('lake', 'by_customer') }}
            INSERT INTO {{ sink('warehouse', 'by_customer') }}
            SELECT c.id AS customer_id, c.name, count(*) AS orders, sum(o.amount) AS amount,
                   max(o.placed_at) AS last_order
            FROM {{ source('pg', 'orders') }} AS o JOIN {{ source('pg', 'customers') }} AS c
              ON c.id = o.customer_id
            GROUP BY ALL
        """,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


@dataclass
class Round:
    full_s: float
    retry_s: float
    full_rss: int
    retry_rss: int
    full_loads: float
    retry_loads: float
    pipeline: float
    write: float
    load_avg: float
    link_mb: float = 0.0  # MB the full run moved through the link (modelled shape only)

    @property
    def ratio(self) -> float:
        return self.retry_s / self.full_s

    @property
    def rest(self) -> float:
        return self.retry_s - self.retry_loads - self.pipeline - self.write


def pz(project: Path, *args: str, env: dict[str, str] | None = None) -> tuple[float, int, int, str]:
    """(wall seconds, peak RSS MiB, exit code, output) of one `pz` process."""
    cmd = [*pz_command(), "-p", str(project), *args]
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        out.seek(0)
        text = out.read().decode(errors="replace")
    return elapsed, usage.ru_maxrss // 1024, os.waitstatus_to_exitcode(status), text


def last_nodes(project: Path) -> dict[str, dict[str, object]]:
    run = sorted((project / ".pz" / "runs").iterdir())[-1]
    return {n["name"]: n for n in json.loads((run / "run_results.json").read_text())["nodes"]}


def load_seconds(nodes: dict[str, dict[str, object]]) -> float:
    return sum(int(nodes[n]["duration_ms"]) for n in LOADS) / 1000  # type: ignore[call-overload]


def seconds(nodes: dict[str, dict[str, object]], name: str) -> float:
    return int(nodes[name]["duration_ms"]) / 1000  # type: ignore[call-overload]


def one_round(project: Path, proxies: list[FaultProxy], rate: float | None) -> Round:
    """Full run (timed), failing run (set-up, unpaced), retry (timed); `proxies` paced at `rate` for the
    timed ones."""
    load_avg = os.getloadavg()[0]
    for proxy in proxies:
        proxy.rate = rate
    sent = sum(p.sent["down"] + p.sent["up"] for p in proxies)
    full_s, full_rss, code, out = pz(project, "run")
    if code != 0:
        raise SystemExit(f"the full run failed:\n{out}")
    link_mb = (sum(p.sent["down"] + p.sent["up"] for p in proxies) - sent) / 1e6
    full_loads = load_seconds(last_nodes(project))
    for proxy in proxies:
        proxy.rate = None
    _, _, code, out = pz(project, "run", env={"PZ_FAILPOINTS": "sink.write@warehouse.by_customer"})
    if code != 1:
        raise SystemExit(f"the failing run did not fail as planned:\n{out}")
    for proxy in proxies:
        proxy.rate = rate
    retry_s, retry_rss, code, out = pz(project, "retry")
    nodes = last_nodes(project)
    if code != 0 or "carrying forward 1 committed sink write(s)" not in out:
        raise SystemExit(f"the retry did not reuse and carry forward:\n{out}")
    assert all(nodes[n].get("provenance") == "reused" for n in LOADS), out
    return Round(
        full_s,
        retry_s,
        full_rss,
        retry_rss,
        full_loads,
        load_seconds(nodes),
        seconds(nodes, "by_customer"),
        seconds(nodes, "warehouse.by_customer"),
        load_avg,
        link_mb,
    )


def print_table(title: str, rows: list[Round]) -> None:
    print(title)
    head = (
        "round",
        "load",
        "full run",
        "retry",
        "retry/full",
        "extract",
        "reuse",
        "pipeline",
        "write",
        "rest",
    )
    head += ("RSS full/retry",)
    widths = (5, 5, 9, 7, 10, 8, 6, 8, 6, 6, 14)
    print("  ".join(f"{h:>{w}}" for h, w in zip(head, widths, strict=True)))
    for i, r in enumerate(rows, 1):
        cells = (
            f"{i}",
            f"{r.load_avg:.1f}",
            f"{r.full_s:.2f}s",
            f"{r.retry_s:.2f}s",
            f"{r.ratio:.1%}",
            *(f"{x:.2f}s" for x in (r.full_loads, r.retry_loads, r.pipeline, r.write, r.rest)),
            f"{r.full_rss}/{r.retry_rss} MiB",
        )
        print("  ".join(f"{c:>{w}}" for c, w in zip(cells, widths, strict=True)))
    full, retry = statistics.median(r.full_s for r in rows), statistics.median(r.retry_s for r in rows)
    ratio = statistics.median(r.ratio for r in rows)
    print(f"median: full {full:.2f}s, retry {retry:.2f}s, retry/full {ratio:.1%} (goal: at most 5%)")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--memory-limit", default="2GB")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5432)
    parser.add_argument("--user", default="postgres")
    parser.add_argument("--database", default="test")
    parser.add_argument(
        "--link-mbit",
        type=float,
        default=None,
        help="also measure with PostgreSQL behind a link paced to this many Mbit/s each way",
    )
    args = parser.parse_args()
    compileall.compile_dir(HERE.parent / "pipelinez", quiet=1)
    conn = Conn(args.host, args.port, args.user, args.database)
    table = ensure_table(conn, args.rows)
    import psycopg

    with psycopg.connect(conn.libpq(), autocommit=True) as con:
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {WAREHOUSE}")
    root = Path(tempfile.mkdtemp(prefix="pz_bench_retry_"))
    rate = args.link_mbit * 1e6 / 8 if args.link_mbit else None
    shapes = ["loopback", *(["link"] if rate else [])]
    results: dict[str, list[Round]] = {shape: [] for shape in shapes}
    with contextlib.ExitStack() as stack:
        proxies: list[FaultProxy] = []
        if rate:
            source = stack.enter_context(FaultProxy(args.port, target_host=args.host))
            warehouse = stack.enter_context(FaultProxy(args.port, target_host=args.host))
            proxies = [source, warehouse]
        try:
            write_project(root / "loopback", conn, table, args.memory_limit)
            if rate:
                via = Conn("127.0.0.1", source.port, args.user, args.database)
                to = Conn("127.0.0.1", warehouse.port, args.user, args.database)
                write_project(root / "link", via, table, args.memory_limit, to)
            for i in range(args.rounds):
                order = shapes if i % 2 == 0 else shapes[::-1]
                for shape in order:
                    r = one_round(root / shape, proxies if shape == "link" else [], rate)
                    results[shape].append(r)
                    print(
                        f"round {i + 1} {shape}: full {r.full_s:.2f}s, retry {r.retry_s:.2f}s "
                        f"({r.ratio:.1%}), load average {r.load_avg:.1f}",
                        flush=True,
                    )
        finally:
            shutil.rmtree(root, ignore_errors=True)
            with psycopg.connect(conn.libpq(), autocommit=True) as con:
                con.execute(f"DROP SCHEMA IF EXISTS {WAREHOUSE} CASCADE")
    print()
    what = f"{args.rows:,} + 100,000 source rows, {args.rounds} paired round(s)"
    print_table(f"loopback PostgreSQL (this machine's best case), {what}", results["loopback"])
    if rate:
        mb = statistics.median(r.link_mb for r in results["link"])
        print_table(
            f"modelled remote link: source and warehouse behind {args.link_mbit:g} Mbit/s each way "
            f"(the full run moved {mb:,.0f} MB through it), {what}",
            results["link"],
        )
    print(
        "load: 1-minute load average at the round's start (2 cores); extract: the full run's two source\n"
        "loads; reuse: the same loads in the retry (row-count checks of the seeded tables); pipeline and\n"
        "write: the retry's by_customer and warehouse.by_customer nodes; rest: process start, validation,\n"
        "the reuse checks while planning, seeding the staging from the failed run's file, bookkeeping."
    )


if __name__ == "__main__":
    main()
