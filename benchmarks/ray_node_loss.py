"""A Ray node removed while it runs a partition of a source load: the issue's fault case, on a 3-node
`ray.cluster_utils.Cluster` of this machine (too heavy for CI: four raylets; the CI suite kills a worker
process instead, `tests/functional/test_ray_faults.py`).

A PostgreSQL table is read in 6 partitions through a view that sleeps 3 s per query, so each partition task
runs long enough to be caught. One of the three nodes is removed
(`Cluster.remove_node(..., allow_graceful=False)`: its raylet and workers die) as soon as no CPU of the
cluster is free: pz's tasks are the only ones asking for a CPU, so then every node runs a partition.
Expected, and checked:

- exactly one `node_retry` of the load, error PZ0710 (transient), and the run succeeds;
- no `breaker_state_changed` event although `engine.breaker` trips after ONE transient failure;
- the sink holds every id exactly once (no duplicate rows), and only the lost partition(s) were read again.

    .venv/bin/python benchmarks/ray_node_loss.py
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

ROWS = 60_000
PARTS = 6
HERE = Path(__file__).resolve().parent


def _project(root: Path, db: str) -> Path:
    files = {
        "project.yml": """
            name: node_loss
            engine:
              retry: { max_attempts: 3, base_delay: 100ms, max_delay: 100ms }
              breaker: { failure_threshold: 1, cool_down: 1h }
        """,
        "sources/pg.yml": f"""
            connector: postgres
            connection: {{ host: 127.0.0.1, port: 5432, database: {db}, user: postgres }}
            datasets:
              orders: {{ table: public.slow_orders, partitions: {{ column: id, count: {PARTS} }} }}
        """,
        "sinks/lake.yml": "connector: localfiles\nconnection: { root: out }\noutputs:\n"
        "  orders: { format: parquet }\n",
        "pipelines/orders.sql": (
            "INSERT INTO {{ sink('lake', 'orders') }}\nSELECT * FROM {{ source('pg', 'orders') }}\n"
        ),
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def main() -> None:
    import duckdb
    import psycopg
    import ray
    from ray.cluster_utils import Cluster

    from pipelinez import Project

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    db = f"pz_node_loss_{secrets.token_hex(3)}"
    admin = psycopg.connect(host="127.0.0.1", user="postgres", dbname="postgres", autocommit=True)
    admin.execute(f'CREATE DATABASE "{db}"')  # type: ignore[arg-type]
    cluster = None
    root: Path | None = None
    try:
        with psycopg.connect(host="127.0.0.1", user="postgres", dbname=db, autocommit=True) as con:
            con.execute(
                "CREATE TABLE orders AS SELECT i AS id, 'c' || (i % 97) AS customer "
                f"FROM generate_series(1, {ROWS}) i;"
                "CREATE VIEW slow_orders AS SELECT o.* FROM orders o CROSS JOIN (SELECT pg_sleep(3)) s"
            )
        started = time.perf_counter()
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
        workers = [cluster.add_node(num_cpus=1) for _ in range(3)]
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        up = time.perf_counter() - started
        root = _project(Path(tempfile.mkdtemp(prefix="pz-node-loss-")), db)
        outcome: dict[str, Any] = {}

        def run() -> None:
            t0 = time.perf_counter()
            outcome["run"] = Project(root).run(executor="ray", staging=str(root / "shared"))
            outcome["wall"] = time.perf_counter() - t0

        thread = threading.Thread(target=run)
        thread.start()
        removed = None
        deadline = time.monotonic() + 300
        # the only tasks that ask for a CPU are pz's: when none is free, every node runs a partition
        while removed is None and time.monotonic() < deadline and thread.is_alive():
            if ray.available_resources().get("CPU", 0) == 0:
                victim = workers[0]
                cluster.remove_node(victim, allow_graceful=False)
                removed = (victim.node_id, time.perf_counter() - started)
                break
            time.sleep(0.1)
        thread.join()
        result = outcome["run"]
        run_dir = root / ".pz" / "runs" / result.run_id
        events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
        retries = [e for e in events if e["event"] == "node_retry"]
        breakers = [e for e in events if e["event"] == "breaker_state_changed"]
        load = next(n for n in result.nodes if n.name == "src_pg__orders")
        files = [str(p) for p in (root / "out").rglob("*.parquet") if p.is_file()]
        ids = duckdb.sql(f"SELECT count(*), count(DISTINCT id) FROM read_parquet({files!r})").fetchone()
        started_parts = [e for e in events if e["event"] == "node_started" and e["name"] == "src_pg__orders"]
        print(f"cluster: head (0 CPU) + 3 nodes x 1 CPU, up in {up:.1f}s")
        victim_id, at = (removed[0][:12], round(removed[1], 1)) if removed else (None, None)
        print(f"removed node {victim_id} while every node ran a partition ({at}s after the cluster start)")
        print(f"run status {result.status}, wall {outcome['wall']:.1f}s; load attempts {load.attempts}")
        seen = [(e["name"], e["attempt"], e["error"]["code"], e["error"]["transient"]) for e in retries]
        print(f"node_retry events: {seen}")
        print(f"breaker_state_changed events: {len(breakers)} (threshold 1)")
        print(
            f"sink rows {ids[0] if ids else None}, distinct ids {ids[1] if ids else None}, table rows {ROWS}"
        )
        print(f"load node_started events: {len(started_parts)}")
        ok = (
            removed is not None
            and result.status == "success"
            and len(retries) == 1
            and retries[0]["error"]["code"] == "PZ0710"
            and not breakers
            and ids == (ROWS, ROWS)
        )
        print("PASS" if ok else "FAIL")
        la = os.getloadavg()
        print(f"load average {la[0]:.1f} {la[1]:.1f} {la[2]:.1f} (2 CPUs shared)")
        if not ok:
            sys.exit(1)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')  # type: ignore[arg-type]
        admin.close()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
