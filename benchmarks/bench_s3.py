"""S3 benchmark: Parquet read and write throughput of pz's `s3` connector against plain DuckDB (httpfs) doing
the same against the same moto S3 server on 127.0.0.1. Runs alternate (A B A B …) because machine speed
drifts; the figure reported is the median of per-pair ratios, with each tool's peak RSS (the moto server's
memory is not counted for either).

- read: pz `run` staging an N-row Parquet object (`s3` source → a one-row count into a DuckDB file) vs
  DuckDB `CREATE TABLE … AS SELECT * FROM read_parquet('s3://…')` into a database file, then the same count;
- write: pz `run` writing the N rows to an `s3` replace output (temp prefix, then promote) vs DuckDB
  `COPY … TO 's3://…' (FORMAT parquet)`; both read the rows from the same local Parquet file.

    .venv/bin/python benchmarks/bench_s3.py --rows 5000000 --pairs 3
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

from pz_command import pz_command

HERE = Path(__file__).resolve().parent
DATA = HERE / ".data" / "s3"
KEY_ID, SECRET = "benchkey", "benchsecret"


@contextlib.contextmanager
def moto() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(300):
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait()


def generate(path: Path, rows: int) -> None:
    import duckdb

    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    duckdb.sql(f"""
        COPY (SELECT i AS id, 'customer_' || (i % 100000) AS customer, (i % 1000) / 10.0 AS amount,
                     DATE '2024-01-01' + CAST(i % 700 AS INTEGER) AS ordered_at,
                     CASE i % 3 WHEN 0 THEN 'open' WHEN 1 THEN 'shipped' ELSE 'returned' END AS status
              FROM range({rows}) t(i)) TO '{path}' (FORMAT parquet)
    """)


def upload(endpoint: str, local: Path, key: str) -> None:
    import pyarrow.fs as pafs

    fs = pafs.S3FileSystem(
        access_key=KEY_ID,
        secret_key=SECRET,
        endpoint_override=endpoint,
        scheme="http",
        region="us-east-1",
        allow_bucket_creation=True,
    )
    fs.create_dir("bench")
    with local.open("rb") as src, fs.open_output_stream(f"bench/{key}") as dst:
        shutil.copyfileobj(src, dst, 8 << 20)


def write_project(root: Path, endpoint: str, local: Path) -> None:
    if root.exists():
        shutil.rmtree(root)
    connection = (
        f'{{ bucket: bench, endpoint: "http://{endpoint}", access_key_id: "{{{{ env(\'B_ID\') }}}}", '
        f"secret_access_key: \"{{{{ env('B_SECRET') }}}}\" }}"
    )
    files = {
        "project.yml": "name: bench\nretention: { keep_last: 1 }\n"
        "env:\n  B_ID: {}\n  B_SECRET: { secret: true }\n",
        "sources/lake.yml": f"""
            connector: s3
            connection: {connection}
            datasets:
              orders:
                path: in/orders.parquet
                columns: {{ id: bigint, customer: varchar, amount: "decimal(10,1)", ordered_at: date,
                            status: varchar }}
        """,
        "sources/files.yml": f"""
            connector: localfiles
            connection: {{ root: "{local.parent}" }}
            datasets:
              orders:
                path: {local.name}
                columns: {{ id: bigint, customer: varchar, amount: "decimal(10,1)", ordered_at: date,
                            status: varchar }}
        """,
        "sinks/lake.yml": f"connector: s3\nconnection: {connection}\n"
        "outputs:\n  orders: { path: pz/orders }\n",
        "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
        "pipelines/read_count.sql": """
            INSERT INTO {{ sink('wh', 'read_count') }}
            SELECT count(*) AS n FROM {{ source('lake', 'orders') }}
        """,
        "pipelines/written.sql": """
            INSERT INTO {{ sink('lake', 'orders') }}
            SELECT * FROM {{ source('files', 'orders') }}
        """,
    }
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def duckdb_script(endpoint: str, body: str) -> list[str]:
    from pipelinez.connectors.files.objects import extension_path

    setup = (
        f"LOAD '{extension_path('duckdb_extension_httpfs', 'httpfs')}'; SET http_retries = 0; "
        f"CREATE SECRET (TYPE s3, KEY_ID '{KEY_ID}', SECRET '{SECRET}', REGION 'us-east-1', "
        f"ENDPOINT '{endpoint}', URL_STYLE 'path', USE_SSL false);"
    )
    return [
        sys.executable,
        "-c",
        "import duckdb, sys; con = duckdb.connect(sys.argv[1]); "
        f"con.execute({setup!r}); con.execute({body!r})",
    ]


def timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, int]:
    """(seconds, peak RSS in MiB) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, **(env or {})}
    )
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd} failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    return elapsed, usage.ru_maxrss // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    local = DATA / f"orders_{args.rows}.parquet"
    generate(local, args.rows)
    size_mib = local.stat().st_size / (1 << 20)
    project = DATA / "bench_project"
    with moto() as endpoint:
        upload(endpoint, local, "in/orders.parquet")
        write_project(project, endpoint, local)
        env = {"B_ID": KEY_ID, "B_SECRET": SECRET}
        pz = [*pz_command(), "-p", str(project), "run", "--select"]
        ref_db = DATA / "ref.duckdb"
        cases = {
            "read": (
                [*pz, "wh.read_count"],
                duckdb_script(
                    endpoint,
                    "CREATE OR REPLACE TABLE t AS SELECT * FROM read_parquet('s3://bench/in/orders.parquet');"
                    "CREATE OR REPLACE TABLE c AS SELECT count(*) AS n FROM t",
                ),
            ),
            "write": (
                [*pz, "lake.orders"],
                duckdb_script(
                    endpoint,
                    f"COPY (SELECT * FROM read_parquet('{local}')) "
                    "TO 's3://bench/ref/orders/part-00000.parquet' "
                    "(FORMAT parquet)",
                ),
            ),
        }
        print(
            f"{args.rows:,} rows, Parquet {size_mib:.0f} MiB, moto S3 on loopback, "
            f"{args.pairs} alternating pairs"
        )
        print(f"{'case':<6} {'tool':<16} {'median s':>9} {'MiB/s':>7} {'ratio':>7} {'peak RSS MiB':>13}")
        for case, (mine_cmd, ref_cmd) in cases.items():
            ref_runs, my_runs, ratios = [], [], []
            for _ in range(args.pairs):
                ref_db.unlink(missing_ok=True)
                ref = timed([*ref_cmd, str(ref_db)], DATA)
                mine = timed(mine_cmd, DATA, env)
                ref_runs.append(ref)
                my_runs.append(mine)
                ratios.append(mine[0] / ref[0])
            for tool, runs, ratio in (
                ("plain duckdb", ref_runs, 1.0),
                ("pz run", my_runs, statistics.median(ratios)),
            ):
                median = statistics.median(t for t, _ in runs)
                peak = max(r for _, r in runs)
                print(
                    f"{case:<6} {tool:<16} {median:>9.2f} {size_mib / median:>7.1f} {ratio:>7.2f} {peak:>13}"
                )


if __name__ == "__main__":
    main()
