"""What the http source's resume spool costs: `pz run` reading N records (cursor pagination, P per page) from
the test suite's loopback JSON API into a DuckDB file, by this checkout against a baseline checkout (one
without the spool), alternating runs (A B A B …), whole process, with each child's peak RSS.

    nice -n 10 .venv/bin/python benchmarks/bench_http_spool.py --baseline /path/to/other/checkout \\
        --rows 1000000 --page 10000 --pairs 3

Both run with this interpreter; the baseline's code is put first on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from pz_command import pz_command  # noqa: E402

from tests.http_server import ApiServer  # noqa: E402

WORK = HERE / ".data" / "http_spool"


def timed(project: Path, code: Path) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": str(code)}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [*pz_command(), "-p", str(project), "run"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"pz run with {code} failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    return elapsed, usage.ru_maxrss // 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", type=Path, required=True, help="a checkout without the spool")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--page", type=int, default=10_000)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    server = ApiServer().start()
    server.state.datasets["items"] = [
        {"id": i, "name": f"customer_{i % 100000}", "amount": (i % 1000) / 10, "ts": "2024-01-01T10:00:00"}
        for i in range(args.rows)
    ]
    server.state.page_size = args.page
    server.state.cache_pages = True
    if WORK.exists():
        shutil.rmtree(WORK)
    files = {
        "project.yml": "name: bench\nretention: { keep_last: 1 }\n",
        "sources/api.yml": f'connector: http\nconnection: {{ base_url: "{server.url}" }}\ndatasets:\n'
        "  items:\n    path: /cursor/items\n    records: data.items\n"
        "    pagination: { style: cursor, cursor_path: meta.next_cursor }\n",
        "sinks/wh.yml": "connector: duckdb\nconnection: { path: wh.duckdb }\n",
        "pipelines/items.sql": "INSERT INTO {{ sink('wh', 'items') }}\n"
        "SELECT * FROM {{ source('api', 'items') }}\n",
    }
    for rel, text in files.items():
        path = WORK / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    runs: dict[str, list[tuple[float, int]]] = {"baseline": [], "this checkout": []}
    try:
        for _ in range(args.pairs):
            runs["baseline"].append(timed(WORK, args.baseline.resolve()))
            runs["this checkout"].append(timed(WORK, ROOT))
    finally:
        server.stop()
    load = os.getloadavg()[0]
    print(f"http read: {args.rows} rows, {args.page} per page, {args.pairs} pairs, load average {load:.1f}")
    print(f"{'code':<14} {'median s':>9} {'peak RSS MiB':>13}")
    for name, found in runs.items():
        print(f"{name:<14} {statistics.median(t for t, _ in found):>9.2f} {max(r for _, r in found):>13}")
    ratios = [b[0] / a[0] for a, b in zip(runs["baseline"], runs["this checkout"], strict=True)]
    pairs = ", ".join(f"{r:.2f}" for r in ratios)
    print(f"this/baseline per pair: {pairs}; median {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
