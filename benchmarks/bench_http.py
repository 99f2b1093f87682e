"""http connector benchmark against the loopback JSON API of the test suite (tests/http_server.py).

Read: `pz run` reading N records through cursor pagination (P records a page) into a DuckDB file, against a
plain-Python client doing the same (urllib + json.loads per page, rows collected as dicts, one
pa.Table.from_pylist, written to DuckDB): the usual hand-written extractor.
Write: `pz run` POSTing the same N rows in batches of B (JSON arrays, checkpointed), against a plain-Python
loop (fetch B rows as tuples, json.dumps a list of dicts, POST).

Runs alternate (A B A B …); each figure is the median, with each child's peak RSS. The server runs on a thread
of this process and serializes each page once, so both clients pay the same for it.

    .venv/bin/python benchmarks/bench_http.py --rows 1000000 --page 10000 --pairs 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from pz_command import pz_command

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from tests.http_server import ApiServer  # noqa: E402

WORK = HERE / ".data" / "http"

NAIVE_READ = """
import json, sys, urllib.request
import duckdb, pyarrow as pa
base, out = sys.argv[1], sys.argv[2]
rows, cursor = [], "0"
while cursor is not None:
    with urllib.request.urlopen(f"{base}/cursor/items?cursor={cursor}") as r:
        page = json.loads(r.read())
    rows.extend(page["data"]["items"])
    cursor = page["meta"]["next_cursor"]
tbl = pa.Table.from_pylist(rows)
con = duckdb.connect(out)
con.execute("CREATE OR REPLACE TABLE items AS SELECT * FROM tbl")
"""

NAIVE_WRITE = """
import json, sys, urllib.request
import duckdb
base, src, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
con = duckdb.connect(src, read_only=True)
cur = con.execute("SELECT * FROM items ORDER BY id")
names = [d[0] for d in cur.description]
while chunk := cur.fetchmany(batch):
    body = json.dumps([dict(zip(names, row)) for row in chunk], default=str).encode()
    req = urllib.request.Request(f"{base}/sink/events", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req).read()
"""


def timed(cmd: list[str], cwd: Path) -> tuple[float, int]:
    """(seconds, peak RSS in MiB) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd} failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    return elapsed, usage.ru_maxrss // 1024


def write(root: Path, files: dict[str, str]) -> None:
    if root.exists():
        shutil.rmtree(root)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def records(n: int) -> list[dict[str, object]]:
    return [
        {"id": i, "name": f"customer_{i % 100000}", "amount": (i % 1000) / 10, "ts": "2024-01-01T10:00:00"}
        for i in range(n)
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--page", type=int, default=10_000)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    server = ApiServer().start()
    server.state.datasets["items"] = records(args.rows)
    server.state.page_size = args.page
    server.state.cache_pages = True
    server.state.parse_posts = False
    try:
        read_root, write_root = WORK / "read", WORK / "write"
        write(
            read_root,
            {
                "project.yml": "name: bench\nretention: { keep_last: 1 }\n",
                "sources/api.yml": f"""
                    connector: http
                    connection: {{ base_url: "{server.url}" }}
                    datasets:
                      items:
                        path: /cursor/items
                        records: data.items
                        pagination: {{ style: cursor, cursor_path: meta.next_cursor }}
                """,
                "sinks/wh.yml": "connector: duckdb\nconnection: { path: wh.duckdb }\n",
                "pipelines/items.sql": "INSERT INTO {{ sink('wh', 'items') }}\n"
                "SELECT * FROM {{ source('api', 'items') }}\n",
            },
        )
        pz = [*pz_command(), "-p"]
        naive_out = WORK / "naive.duckdb"
        read_times: dict[str, list[tuple[float, int]]] = {"pz": [], "plain Python": []}
        for _ in range(args.pairs):
            read_times["pz"].append(timed([*pz, str(read_root), "run"], ROOT))
            naive_out.unlink(missing_ok=True)
            read_times["plain Python"].append(
                timed([sys.executable, "-c", NAIVE_READ, server.url, str(naive_out)], ROOT)
            )
        write(
            write_root,
            {
                "project.yml": "name: bench\nretention: { keep_last: 1 }\n",
                "sources/wh.yml": f'connector: duckdb\nconnection: {{ path: "{naive_out}" }}\n'
                "datasets:\n  items: { table: items }\n",
                "sinks/api.yml": f"""
                    connector: http
                    connection: {{ base_url: "{server.url}" }}
                    outputs:
                      events: {{ path: /sink/events, strategy: append, batch_size: {args.page} }}
                """,
                "pipelines/push.sql": "INSERT INTO {{ sink('api', 'events') }}\n"
                "SELECT * FROM {{ source('wh', 'items') }} ORDER BY id\n",
            },
        )
        write_times: dict[str, list[tuple[float, int]]] = {"pz": [], "plain Python": []}
        for _ in range(args.pairs):
            write_times["pz"].append(timed([*pz, str(write_root), "run"], ROOT))
            write_times["plain Python"].append(
                timed([sys.executable, "-c", NAIVE_WRITE, server.url, str(naive_out), str(args.page)], ROOT)
            )
    finally:
        server.stop()
    print(f"http: {args.rows} rows, {args.page} per page/batch, {args.pairs} pairs (median)")
    print(f"{'direction':<10} {'tool':<14} {'median s':>9} {'rows/s':>10} {'peak RSS MiB':>13}")
    for direction, table in (("read", read_times), ("write", write_times)):
        for tool, runs in table.items():
            secs = statistics.median(t for t, _ in runs)
            rss = max(m for _, m in runs)
            print(f"{direction:<10} {tool:<14} {secs:>9.2f} {args.rows / secs:>10.0f} {rss:>13}")


if __name__ == "__main__":
    main()
