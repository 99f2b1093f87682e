"""Connection resets: how long one `pz run` takes when 0%, 10%, 20% and 30% of connections to PostgreSQL and
MariaDB are reset (at accept, mid-handshake or mid-result) by the loopback fault proxy of the test suite, and
proof that every run lands exactly the same data.

The project reads a PostgreSQL table and a MariaDB table of N rows each, in 4 partitions, aggregates each,
and writes both results back to their server and full copies to a DuckDB file. `--tier universal` (default)
forces the universal tier; `--tier native` lets the postgres source and sink run on DuckDB's postgres
extension (ATTACHed to the run's shared staging instance, beside the MariaDB load: the case where one node's
lost connection used to fail another node). Each share runs `--seeds` times with different (reproducible)
fault schedules, the shares interleaved (paired: seed s of every share back to back); pz runs as its own
process (wall time and peak RSS from os.wait4). After each run the written tables are fingerprinted (row
count and an order-independent hash of every row) and compared with the first 0% run.

    .venv/bin/python benchmarks/bench_faults.py --rows 200000 --seeds 3 --shares 0,0.1,0.2,0.3
    .venv/bin/python benchmarks/bench_faults.py --rows 200000 --seeds 5 --tier native

The schema pz_bench_faults (PostgreSQL) and database pz_bench_faults (MariaDB) are dropped at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pz_command import pz_command  # noqa: E402

from tests.faults.tcp_proxy import Fault, FaultProxy, fraction  # noqa: E402

NAME = "pz_bench_faults"
PG_PORT, MY_PORT = "{{ env('PG_PORT') }}", "{{ env('MY_PORT') }}"
RESETS = [Fault.reset(0), Fault.reset(300), Fault.reset(3_000), Fault.reset(200_000)]
SHARES = (0.0, 0.1, 0.2, 0.3)
HEADER = (
    "| resets | run | exit | wall s | peak RSS MiB | connections reset | retries | same data as 0% | load |"
)
COPY = "INSERT INTO {{{{ sink('local', '{out}') }}}} SELECT * FROM {{{{ source({src}) }}}}"


def setup(rows: int) -> None:
    import psycopg
    import pymysql

    with psycopg.connect("host=127.0.0.1 user=postgres dbname=test", autocommit=True) as con:
        con.execute(f"DROP SCHEMA IF EXISTS {NAME} CASCADE")
        con.execute(f"CREATE SCHEMA {NAME}")
        con.execute(
            f"CREATE TABLE {NAME}.orders AS SELECT g AS id, (g % 97)::numeric(12,2) AS amount, "  # type: ignore[arg-type]
            f"md5(g::text) AS note, timestamp '2026-01-01' + g * interval '1 minute' AS placed_at "
            f"FROM generate_series(1, {rows}) g"
        )
    con2 = pymysql.connect(host="127.0.0.1", user="root", password="", autocommit=True)
    with con2.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {NAME}")
        cur.execute(f"CREATE DATABASE {NAME}")
        cur.execute(
            f"CREATE TABLE {NAME}.items (id INT PRIMARY KEY, amount DECIMAL(12,2), note VARCHAR(64), "
            "placed_at DATETIME)"
        )
        cur.execute(
            f"INSERT INTO {NAME}.items SELECT seq, seq % 97, md5(seq), "
            f"TIMESTAMP'2026-01-01 00:00:00' + INTERVAL seq MINUTE FROM {NAME}.seq_1_to_{rows}"
        )
    con2.close()


def teardown() -> None:
    import psycopg
    import pymysql

    with psycopg.connect("host=127.0.0.1 user=postgres dbname=test", autocommit=True) as con:
        con.execute(f"DROP SCHEMA IF EXISTS {NAME} CASCADE")
    con2 = pymysql.connect(host="127.0.0.1", user="root", password="", autocommit=True)
    with con2.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {NAME}")
    con2.close()


def write_project(root: Path, tier: str) -> None:
    cols = '{ id: int, amount: "decimal(12,2)", note: varchar, placed_at: timestamp }'
    totals = (
        "SELECT amount, count(*) AS n, count(DISTINCT note) AS d, sum(id) AS s FROM {src} GROUP BY amount"
    )
    files = {
        "project.yml": f"""
            name: faults
            env:
              PG_PORT: {{ required: true }}
              MY_PORT: {{ required: true }}
            engine:
              threads: 2
              force_universal: {"true" if tier == "universal" else "false"}
              retry: {{ max_attempts: 15, base_delay: 50ms, max_delay: 500ms }}
        """,
        "sources/pg.yml": f"""
            connector: postgres
            connection: {{ host: 127.0.0.1, port: "{PG_PORT}", database: test, user: postgres }}
            datasets:
              orders: {{ table: {NAME}.orders, columns: {cols}, partitions: {{ column: id, count: 4 }} }}
        """,
        "sources/my.yml": f"""
            connector: mysql
            connection: {{ host: 127.0.0.1, port: "{MY_PORT}", database: {NAME}, user: root }}
            datasets:
              items: {{ table: items, columns: {cols}, partitions: {{ column: id, count: 4 }} }}
        """,
        "sinks/pgw.yml": f"""
            connector: postgres
            connection: {{ host: 127.0.0.1, port: "{PG_PORT}", database: test, user: postgres }}
            outputs:
              totals: {{ table: {NAME}.totals }}
        """,
        "sinks/myw.yml": f"""
            connector: mysql
            connection: {{ host: 127.0.0.1, port: "{MY_PORT}", database: {NAME}, user: root }}
            outputs:
              totals: {{ table: totals }}
        """,
        "sinks/local.yml": "connector: duckdb\nconnection: { path: out.duckdb }\n",
        "pipelines/pg_totals.sql": "INSERT INTO {{ sink('pgw', 'totals') }}\n"
        + totals.format(src="{{ source('pg', 'orders') }}"),
        "pipelines/my_totals.sql": "INSERT INTO {{ sink('myw', 'totals') }}\n"
        + totals.format(src="{{ source('my', 'items') }}"),
        "pipelines/pg_copy.sql": COPY.format(out="pg_copy", src="'pg', 'orders'"),
        "pipelines/my_copy.sql": COPY.format(out="my_copy", src="'my', 'items'"),
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))


def _digest(rows: list[tuple[object, ...]]) -> str:
    """Row count and an order-independent hash of the rows (values normalized to text)."""
    acc = 0
    for row in rows:
        text = "|".join(
            "" if v is None else (f"{float(v):.4f}" if isinstance(v, float) else str(v)) for v in row
        )
        acc ^= int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    return f"{len(rows)}:{acc:016x}"


def fingerprint(project: Path) -> dict[str, str]:
    import duckdb
    import psycopg
    import pymysql

    out: dict[str, str] = {}
    with psycopg.connect("host=127.0.0.1 user=postgres dbname=test") as con:
        out["pg totals"] = _digest(con.execute(f"SELECT amount::text, n, d, s FROM {NAME}.totals").fetchall())  # type: ignore[arg-type]
    con2 = pymysql.connect(host="127.0.0.1", user="root", password="", database=NAME)
    with con2.cursor() as cur:
        cur.execute("SELECT CAST(amount AS CHAR), n, d, s FROM totals")
        out["mariadb totals"] = _digest([tuple(r) for r in cur.fetchall()])
    con2.close()
    local = duckdb.connect(str(project / "out.duckdb"), read_only=True)
    for table in ("pg_copy", "my_copy"):
        out[table] = _digest(
            local.execute(f"SELECT id, amount::VARCHAR, note, placed_at::VARCHAR FROM {table}").fetchall()
        )
    local.close()
    return out


def run_once(project: Path, share: float, seed: int) -> tuple[float, int, int, int, int, dict[str, str]]:
    """(seconds, peak RSS MiB, exit code, retries, connections reset, fingerprint)."""
    for run in (project / ".pz" / "runs").glob("*"):
        if run.is_dir():
            for f in run.iterdir():
                f.unlink()
            run.rmdir()
    with (
        FaultProxy(5432, fraction(share, RESETS, seed=seed)) as pg,
        FaultProxy(3306, fraction(share, RESETS, seed=seed + 1000)) as my,
    ):
        env = {**os.environ, "PG_PORT": str(pg.port), "MY_PORT": str(my.port)}
        started = time.monotonic()
        with tempfile.TemporaryFile() as out:
            proc = subprocess.Popen(
                [*pz_command(), "-p", str(project), "run"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
            _, status, usage = os.wait4(proc.pid, 0)
            took = time.monotonic() - started
            code = os.waitstatus_to_exitcode(status)
            out.seek(0)
            output = out.read().decode("utf-8", "replace")
        resets = len(pg.fired) + len(my.fired)
    rss = usage.ru_maxrss // 1024
    run_dir = sorted((project / ".pz" / "runs").iterdir())[-1]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    retries = sum(1 for e in events if e["event"] == "node_retry")
    if code != 0:
        print(output[-3000:], file=sys.stderr)
        return took, rss, code, retries, resets, {}
    return took, rss, code, retries, resets, fingerprint(project)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tier", choices=("universal", "native"), default="universal")
    parser.add_argument("--shares", default=",".join(str(s) for s in SHARES), help="e.g. 0,0.1,0.2,0.3")
    args = parser.parse_args()
    shares = [float(s) for s in args.shares.split(",")]
    setup(args.rows)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            project = Path(tmp) / "faults"
            write_project(project, args.tier)
            baseline: dict[str, str] | None = None
            print(f"{args.rows} rows per source; {args.tier} tier; {args.seeds} fault schedules per share\n")
            print(HEADER)
            print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
            times: dict[float, list[float]] = {share: [] for share in shares}
            rsss: dict[float, list[int]] = {share: [] for share in shares}
            failed: dict[float, int] = {share: 0 for share in shares}
            for seed in range(1, args.seeds + 1):  # interleaved: machine speed drifts
                for share in shares:
                    load = os.getloadavg()[0]
                    took, rss, code, retries, resets, fp = run_once(project, share, seed)
                    if baseline is None and share == 0 and code == 0:
                        baseline = fp
                    same = "yes" if fp and fp == baseline else "NO"
                    times[share].append(took)
                    rsss[share].append(rss)
                    failed[share] += code != 0
                    print(
                        f"| {share:.0%} | {seed} | {code} | {took:.1f} | {rss} | {resets} | {retries} "
                        f"| {same} | {load:.1f} |",
                        flush=True,
                    )
            base = statistics.median(times[shares[0]])
            print(
                f"\n| resets | median s | vs {shares[0]:.0%} | min s | max s | peak RSS MiB (max) "
                "| failed runs |"
            )
            print("| --- | --- | --- | --- | --- | --- | --- |")
            for share, t in times.items():
                med = statistics.median(t)
                print(
                    f"| {share:.0%} | {med:.1f} | {med / base:.2f}x | {min(t):.1f} | {max(t):.1f} "
                    f"| {max(rsss[share])} | {failed[share]} of {len(t)} |"
                )
            if baseline:
                print("\nfingerprints (rows:hash):", json.dumps(baseline))
    finally:
        teardown()


if __name__ == "__main__":
    main()
