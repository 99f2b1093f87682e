"""State backend overhead: whole `pz run` and `pz validate` processes of one generated 100-node project
(diamond DAG, benchmarks/gen_diamond_project.py), kept locally (.pz/) against each shared state backend:
PostgreSQL (`state: { backend: postgres }`, a database created for the benchmark on 127.0.0.1:5432 and dropped
after), S3 (`backend: s3` on a moto server on loopback) and Azure Blob (`backend: azureblob` on Azurite).

Each round runs every variant once, back to back, the order rotated every round (the machine's speed drifts);
the table gives each variant's median wall time and median peak RSS (the pz process's own, from wait4) and
the median per-round ratio against local. moto and Azurite answer from loopback: the ratio measures pz's
requests (their count and their cost in the pz process), not a real store's network round trips.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_state_backend.py --pipelines 80 --pairs 5
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg
from gen_diamond_project import DATASETS, generate
from pz_command import pz_command

from tests.objstores import S3_KEY_ID, S3_SECRET, AzureServer, S3Server, azurite_server, moto_server

HERE = Path(__file__).resolve().parent
DATA = HERE / ".data" / "state_backend"


def timed(project: Path, *args: str) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of one whole pz process."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [*pz_command(), "-p", str(project), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=os.environ.copy(),
    )
    assert proc.stdout is not None
    output = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"pz {' '.join(args)} in {project} failed:\n{output[-3000:]}")
    return wall, usage.ru_maxrss / 1024


def write_data(folder: Path) -> None:
    """The generated sources' Parquet files: 1,000 rows each."""
    import duckdb

    folder.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    for i in range(DATASETS):
        con.execute(
            "COPY (SELECT range::BIGINT AS id, (range % 7)::INTEGER AS grp, (range / 3)::DECIMAL(12,2) AS "
            "amount, 'n' || range AS name, TIMESTAMP '2026-01-01' + INTERVAL (range) SECOND AS updated_at "
            f"FROM range(1000)) TO '{folder / f'raw_{i}.parquet'}' (FORMAT parquet)"
        )
    con.close()


def nodes(project: Path) -> int:
    proc = subprocess.run([*pz_command(), "-p", str(project), "ls"], capture_output=True, text=True)
    return len([line for line in proc.stdout.splitlines() if line.strip()])


ENV = {
    "PZ_STATE_KEY_ID": S3_KEY_ID,
    "PZ_STATE_SECRET": S3_SECRET,
    "PZ_STATE_AZ": "",
}
ENV_YML = (
    "env:\n  PZ_STATE_KEY_ID: {}\n  PZ_STATE_SECRET: { secret: true }\n  PZ_STATE_AZ: { secret: true }\n"
)


def blocks(db: str, s3: S3Server, azure: AzureServer) -> dict[str, str]:
    """The `state:` block of each shared variant (fresh database, bucket and container)."""
    bucket, container = s3.bucket(f"pz-{secrets.token_hex(4)}"), azure.container(f"pz-{secrets.token_hex(4)}")
    os.environ["PZ_STATE_AZ"] = azure.connection_string
    key_id, secret = "\"{{ env('PZ_STATE_KEY_ID') }}\"", "\"{{ env('PZ_STATE_SECRET') }}\""
    return {
        "postgres": "state:\n  backend: postgres\n"
        f"  connection: {{ host: 127.0.0.1, user: postgres, database: {db} }}\n",
        "s3": f"state:\n  backend: s3\n  url: s3://{bucket}/bench\n"
        f"  connection: {{ endpoint: '{s3.endpoint}', access_key_id: {key_id}, "
        f"secret_access_key: {secret} }}\n",
        "azureblob": f"state:\n  backend: azureblob\n  url: az://{container}/bench\n"
        "  connection: { connection_string: \"{{ env('PZ_STATE_AZ') }}\" }\n",
    }


def measure(projects: dict[str, Path], command: tuple[str, ...], rounds: int) -> list[tuple[Any, ...]]:
    names = list(projects)
    walls: dict[str, list[float]] = {n: [] for n in names}
    rss: dict[str, list[float]] = {n: [] for n in names}
    ratios: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        got = {name: timed(projects[name], *command) for name in order}
        for name, (wall, peak) in got.items():
            walls[name].append(wall)
            rss[name].append(peak)
            ratios[name].append(wall / got["local"][0])
    med = statistics.median
    return [(f"pz {' '.join(command)}", n, med(walls[n]), med(rss[n]), med(ratios[n])) for n in names]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipelines", type=int, default=80)
    parser.add_argument("--pairs", type=int, default=5, help="rounds (each runs every variant once)")
    opts = parser.parse_args()
    generate(DATA, opts.pipelines, dbt=False)
    write_data(DATA / "pz" / "data")
    os.environ.update(ENV)
    db = f"pz_bench_{secrets.token_hex(4)}"
    admin = psycopg.connect(host="127.0.0.1", user="postgres", dbname="postgres", autocommit=True)
    admin.execute(f'CREATE DATABASE "{db}"')  # type: ignore[arg-type]
    try:
        with moto_server() as s3, azurite_server() as azure:
            projects = {"local": DATA / "local"}
            shutil.copytree(DATA / "pz", projects["local"])
            for name, block in blocks(db, s3, azure).items():
                projects[name] = DATA / name
                shutil.copytree(DATA / "pz", projects[name])
                text = (projects[name] / "project.yml").read_text(encoding="utf-8").rstrip("\n")
                (projects[name] / "project.yml").write_text(f"{text}\n{ENV_YML}{block}", encoding="utf-8")
            print(f"{nodes(projects['local'])} nodes; {opts.pairs} rounds, order rotated each round")
            rows = measure(projects, ("run",), opts.pairs) + measure(projects, ("validate",), opts.pairs)
        print(f"{'command':<14} {'backend':<10} {'wall s':>8} {'peak RSS MiB':>13} {'ratio vs local':>15}")
        for command, name, wall, peak, ratio in rows:
            print(f"{command:<14} {name:<10} {wall:>8.2f} {peak:>13.0f} {ratio:>15.2f}")
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')  # type: ignore[arg-type]
        admin.close()


if __name__ == "__main__":
    main()
