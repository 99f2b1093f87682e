"""Shared staging overhead of the local executor: whole `pz run` processes of one project (a Parquet source of
N rows, default 2M, five columns, loaded into staging; one pipeline aggregating it into a DuckDB sink), run
without a shared staging and with `--staging <folder>` (each source load also published as Parquet plus
`_manifest.json`, what `pz retry` on another worker reuses). `--s3` adds a third variant publishing to s3 on
a moto server on loopback (a stand-in for the network: it measures pz's side, not a real store's).

The variants run as whole processes, alternating and the order rotated every round (the machine's speed
drifts); the table gives each variant's median wall time, its source-load node time, its peak RSS and the
median per-round ratio against the run without a shared staging.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_shared_staging.py --rows 2000000 --rounds 5 [--s3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from pz_command import pz_command

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

LOAD = "src_files__events"


def write_project(root: Path, rows: int, endpoint: str | None) -> None:
    import duckdb

    (root / "data").mkdir(parents=True)
    (root / "sources").mkdir()
    (root / "sinks").mkdir()
    (root / "pipelines").mkdir()
    staging = ""
    if endpoint is not None:
        staging = (
            "engine:\n  staging:\n"
            f'    endpoint: "{endpoint}"\n'
            "    access_key_id: \"{{ env('S3_ID') }}\"\n"
            "    secret_access_key: \"{{ env('S3_SECRET') }}\"\n"
            "env:\n  S3_ID: {}\n  S3_SECRET: { secret: true }\n"
        )
    (root / "project.yml").write_text(f"name: bench\n{staging}", encoding="utf-8")
    (root / "sources" / "files.yml").write_text(
        "connector: localfiles\nconnection: { root: data }\ndatasets:\n"
        "  events: { path: events.parquet, format: parquet }\n",
        encoding="utf-8",
    )
    (root / "sinks" / "wh.yml").write_text(
        "connector: duckdb\nconnection: { path: wh.duckdb }\noutputs:\n  totals: { strategy: replace }\n",
        encoding="utf-8",
    )
    (root / "pipelines" / "totals.sql").write_text(
        "INSERT INTO {{ sink('wh', 'totals') }}\n"
        "SELECT grp, count(*) AS n, sum(amount) AS amount\n"
        "FROM {{ source('files', 'events') }} GROUP BY grp\n",
        encoding="utf-8",
    )
    con = duckdb.connect()
    con.execute(
        "COPY (SELECT range::BIGINT AS id, (range % 97)::INTEGER AS grp, "
        "(range / 3)::DECIMAL(12,2) AS amount, 'name-' || range AS name, "
        "TIMESTAMP '2026-01-01' + INTERVAL (range) SECOND AS updated_at "
        f"FROM range({rows})) TO '{root / 'data' / 'events.parquet'}' (FORMAT parquet)"
    )
    con.close()


def pz(project: Path, *args: str, env: dict[str, str] | None = None) -> tuple[float, int, float]:
    """(wall seconds, peak RSS MiB, the source load's seconds) of one `pz` process."""
    cmd = [*pz_command(), "-p", str(project), *args]
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        out.seek(0)
        text = out.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"pz {' '.join(args)} failed:\n{text[-3000:]}")
    run = sorted((project / ".pz" / "runs").iterdir())[-1]
    nodes = {n["name"]: n for n in json.loads((run / "run_results.json").read_text())["nodes"]}
    return elapsed, usage.ru_maxrss // 1024, int(nodes[LOAD]["duration_ms"]) / 1000


@contextlib.contextmanager
def moto(enabled: bool) -> Iterator[tuple[str | None, str | None, dict[str, str]]]:
    """(endpoint, staging URL, env) of a moto server on loopback with a fresh bucket; Nones without --s3."""
    if not enabled:
        yield None, None, {}
        return
    from tests.objstores import S3_KEY_ID, S3_SECRET, moto_server

    with moto_server() as server:
        bucket = server.bucket("pz-bench-shared")
        yield server.endpoint, f"s3://{bucket}/stage", {"S3_ID": S3_KEY_ID, "S3_SECRET": S3_SECRET}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--s3", action="store_true", help="also publish to s3 on a loopback moto server")
    opts = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pz-bench-shared-"))
    try:
        with moto(opts.s3) as (endpoint, s3_url, env):
            project = work / "project"
            write_project(project, opts.rows, endpoint)
            folder = work / "shared"
            variants: dict[str, tuple[str, ...]] = {
                "local only": (),
                "shared folder": ("--staging", str(folder)),
            }
            if s3_url is not None:
                variants["shared s3 (moto)"] = ("--staging", s3_url)
            pz(project, "run", env=env)  # warm-up: caches, page cache
            names = list(variants)
            found: dict[str, list[tuple[float, int, float]]] = {n: [] for n in names}
            for i in range(opts.rounds):
                order = names[i % len(names) :] + names[: i % len(names)]
                for name in order:
                    found[name].append(pz(project, "run", *variants[name], env=env))
                    shutil.rmtree(folder, ignore_errors=True)
            print_table(opts, found)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def print_table(opts: argparse.Namespace, found: dict[str, list[tuple[float, int, float]]]) -> None:
    base = found["local only"]
    shape = f"{opts.rows:,} rows, {opts.rounds} rounds, {os.cpu_count()} CPUs"
    print(f"pz run, {shape} (medians; peak RSS: the max)")
    print(f"{'variant':<18} {'wall s':>8} {'load s':>8} {'peak RSS':>10} {'ratio vs local':>15}")
    for name, rows in found.items():
        ratio = statistics.median(r[0] / b[0] for r, b in zip(rows, base, strict=True))
        print(
            f"{name:<18} {statistics.median(r[0] for r in rows):>8.2f} "
            f"{statistics.median(r[2] for r in rows):>8.2f} {max(r[1] for r in rows):>7} MiB {ratio:>15.3f}"
        )


if __name__ == "__main__":
    main()
