"""Peak RSS of writing an Arrow stream into a DuckDB file, the way pz's universal tier does (the reason for
`pipelinez/connectors/sdk_feed.py`). Each case runs in its own child process (peak RSS from os.wait4):

- `python-loop`: the staged table's stream read by a Python loop (what the stream itself costs);
- `one-statement`: the stream registered in a second DuckDB instance and written with one
  `CREATE TABLE … AS SELECT * FROM <stream>` into a file (how pz wrote it before);
- `feed`: the same write through `ArrowFeed`, one INSERT per 8 batches inside one transaction (pz now).

    .venv/bin/python benchmarks/arrow_stream_memory.py --rows 10000000
    .venv/bin/python benchmarks/arrow_stream_memory.py --rows 10000000 --columns status,sku,note

The staged table (ten columns shaped like bench_postgres.py's orders) is generated once under
benchmarks/.data/. The staging side runs with pz's default `memory_limit` (384MB), the sink with the 256MB pz
gives a DuckDB file opened in its own instance.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pipelinez.connectors.sdk_feed import BATCHES_PER_STATEMENT, ArrowFeed

HERE = Path(__file__).resolve().parent
DATA = HERE / ".data"
CASES = ("python-loop", "one-statement", "feed")


def staged(rows: int) -> Path:
    import duckdb

    path = DATA / f"arrow_stream_{rows}.duckdb"
    if path.exists():
        return path
    DATA.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(path)) as con:
        con.execute(
            f"""CREATE TABLE orders AS SELECT i AS id, i % 100000 AS customer_id, i % 977 AS product_id,
            (i % 100000)::DECIMAL(12,2) / 7 AS amount, 'status-' || (i % 7) AS status, md5(i::varchar) AS sku,
            CASE WHEN i % 10 = 0 THEN NULL ELSE 'note number ' || i END AS note,
            TIMESTAMPTZ '2020-01-01' + to_seconds(i) AS created_at,
            DATE '2020-01-01' + (i % 3000)::int AS day, i % 2 = 0 AS flag FROM range({rows}) t(i)"""
        )
    return path


def child(case: str, source: Path, columns: str, out: Path, batches: int) -> None:
    import duckdb
    import pyarrow as pa

    src = duckdb.connect(str(source), read_only=True)
    src.execute("SET memory_limit = '384MB'")
    reader = src.execute(f"SELECT {columns} FROM orders").to_arrow_reader(122_880)
    if case == "python-loop":
        sum(batch.num_rows for batch in reader)
        return
    for stale in (out, Path(f"{out}.wal")):
        stale.unlink(missing_ok=True)
    sink = duckdb.connect(str(out))
    sink.execute("SET memory_limit = '256MB'")
    if case == "one-statement":
        sink.register("stream", reader)
        sink.execute("CREATE TABLE t AS SELECT * FROM stream")
    else:
        sink.register("shape", pa.Table.from_batches([], schema=reader.schema))
        sink.execute("BEGIN TRANSACTION")
        sink.execute("CREATE TABLE t AS SELECT * FROM shape WITH NO DATA")
        ArrowFeed(reader, "stream", batches).insert_into(sink, "t")
        sink.execute("COMMIT")
    sink.close()


def measure(case: str, source: Path, columns: str, batches: int) -> tuple[float, int]:
    out = DATA / "arrow_stream_sink.duckdb"
    cmd = [sys.executable, __file__, "--child", case, "--source", str(source), "--columns", columns]
    cmd += ["--batches", str(batches)]
    start = time.perf_counter()
    proc = subprocess.Popen([*cmd, "--out", str(out)])
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{case} failed")
    for stale in (out, Path(f"{out}.wal")):
        stale.unlink(missing_ok=True)
    return time.perf_counter() - start, usage.ru_maxrss // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--columns", default="*", help="the staged table's columns to stream (default: all)")
    parser.add_argument(
        "--batches", default=str(BATCHES_PER_STATEMENT), help="feed: comma-separated batches per statement"
    )
    parser.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--source", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, Path(args.source), args.columns, Path(args.out), int(args.batches))
        return
    source = staged(args.rows)
    print(f"{args.rows:,} staged rows, columns: {args.columns}")
    print(f"{'case':<20} {'wall s':>8} {'peak RSS MiB':>13}")
    runs = [(case, BATCHES_PER_STATEMENT) for case in CASES[:2]]
    runs += [("feed", int(b)) for b in args.batches.split(",") if b]
    for case, batches in runs:
        seconds, rss = measure(case, source, args.columns, batches)
        label = f"feed ({batches} batches)" if case == "feed" else case
        print(f"{label:<20} {seconds:>8.2f} {rss:>13}", flush=True)


if __name__ == "__main__":
    main()
