"""Ray executor benchmark: the local executor against `pz run --executor ray` on a simulated cluster of 1, 2
and 4 workers (a `ray.cluster_utils.Cluster` on this machine: a head with no CPUs plus W nodes of 1 CPU each,
which is what a real cluster looks like to the scheduler, minus the network).

Three projects:
- fixed: one 10-row CSV → pipeline → Parquet sink (3 nodes): what a Ray run costs over a local one whatever
  the data (joining the cluster, the version probe, the staging check, a task per node). One cluster of 1
  worker serves R alternating rounds (local, ray, local, …); the figure is the median of each Ray run's wall
  minus the mean of the local runs around it;
- partitioned: a PostgreSQL table (pz_bench.orders_<rows>, shared with bench_postgres.py) read in P
  partitions — on Ray one task per partition — and aggregated into a Parquet sink;
- branches: B independent branches of small CSV → stored pipeline → check → Parquet sink (4 nodes each),
  which measures what each Ray task costs beyond the local executor.

Each pz run is its own process (wall time and the driver's peak RSS from os.wait4; the Ray workers' memory is
not in that figure). Runs alternate: local, ray W=1, local, ray W=2, local, ray W=4, local, and each Ray run's
ratio is its wall time over the mean of the two local runs around it (machine speed drifts under load).
The cluster is started before its run (not timed: a cluster outlives many runs); pz's time to join it and
run the version probe is in the wall time. The pz tree is byte-compiled first, as an installed pz is, and each
run is what the `pz` console script runs (`pipelinez.cli.entry`).

    .venv/bin/python benchmarks/bench_ray.py                       # 1M rows, 8 partitions, 24 branches
    .venv/bin/python benchmarks/bench_ray.py --rows 10000000 --partitions 16
    .venv/bin/python benchmarks/bench_ray.py --scenarios fixed --rounds 5

The partitioned table also prints the 2-worker speed-up: the 1-worker Ray wall over the 2-worker one, and
the bound this machine sets on it: every run's "busy CPUs" is the whole machine's (pz, Ray's workers,
PostgreSQL's backends, anything else) from /proc/stat over the run, and a 1-worker run that already keeps B of
the machine's C CPUs busy cannot be sped up more than C / B by more simulated workers on the same CPUs.
"""

from __future__ import annotations

import argparse
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

from bench_incremental import byte_compile, measured_tree  # noqa: E402
from bench_postgres import Conn, ensure_table  # noqa: E402
from pz_command import pz_command  # noqa: E402


@dataclass
class Measure:
    scenario: str
    executor: str
    workers: int | None
    wall: float
    rss_mb: float
    nodes: int
    tasks: int
    node_ms: int  # sum of the nodes' duration_ms
    ok: bool
    busy_cpus: float  # the whole machine's busy CPUs over the run (pz, Ray's workers, PostgreSQL, the rest)


def cpu_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of every CPU of the machine since boot, from /proc/stat's first line."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _write(root: Path, files: dict[str, str]) -> Path:
    if root.exists():
        shutil.rmtree(root)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def partitioned_project(root: Path, table: str, partitions: int) -> Path:
    return _write(
        root,
        {
            "project.yml": "name: bench_parts\nengine: { memory_limit: 1GB }\n",
            "sources/pg.yml": f"""
                connector: postgres
                connection: {{ host: 127.0.0.1, port: 5432, database: test, user: postgres }}
                datasets:
                  orders:
                    table: pz_bench.{table}
                    partitions: {{ column: id, count: {partitions} }}
            """,
            "sinks/lake.yml": "connector: localfiles\nconnection: { root: out }\noutputs:\n"
            "  per_status: { format: parquet }\n",
            "pipelines/per_status.sql": """
                INSERT INTO {{ sink('lake', 'per_status') }}
                SELECT status, count(*) AS n, sum(amount) AS total
                FROM {{ source('pg', 'orders') }} GROUP BY 1
            """,
        },
    )


def fixed_project(root: Path) -> Path:
    return _write(
        root,
        {
            "project.yml": "name: bench_fixed\n",
            "data/tiny.csv": "id,v\n" + "".join(f"{i},{i * 3}\n" for i in range(10)),
            "sources/files.yml": "connector: localfiles\nconnection: { root: data }\ndatasets:\n"
            "  tiny: { format: csv, path: tiny.csv, columns: { id: bigint, v: bigint } }\n",
            "sinks/lake.yml": "connector: localfiles\nconnection: { root: out }\noutputs:\n"
            "  tiny_out: { format: parquet }\n",
            "pipelines/tiny_out.sql": "INSERT INTO {{ sink('lake', 'tiny_out') }}\n"
            "SELECT id, v FROM {{ source('files', 'tiny') }}\n",
        },
    )


def fixed_cost(project: Path, rounds: int) -> None:
    """R rounds local, ray (1 worker), …, local on one cluster; the median extra seconds of a Ray run."""
    cluster = start_cluster(1)
    try:
        local = [measure("fixed", project, "local", None, None)]
        ray: list[Measure] = []
        for _ in range(rounds):
            ray.append(measure("fixed", project, "ray", 1, cluster.address))  # type: ignore[attr-defined]
            local.append(measure("fixed", project, "local", None, None))
    finally:
        cluster.shutdown()  # type: ignore[attr-defined]
    extra = [r.wall - (local[i].wall + local[i + 1].wall) / 2 for i, r in enumerate(ray)]
    failed = "" if all(m.ok for m in [*local, *ray]) else " (A RUN FAILED)"
    print(f"\nfixed cost of a Ray run, {rounds} alternating rounds on a 1-worker cluster{failed}")
    print(f"local wall s: {', '.join(f'{m.wall:.2f}' for m in local)}")
    print(f"ray wall s:   {', '.join(f'{m.wall:.2f}' for m in ray)}")
    listed = ", ".join(f"{e:.2f}" for e in extra)
    print(f"ray - local (neighbours) s: {listed}; median {statistics.median(extra):.2f}")


def branches_project(root: Path, branches: int) -> Path:
    files = {
        "project.yml": "name: bench_branches\n",
    }
    datasets = []
    outputs = []
    for b in range(branches):
        files[f"data/b{b}.csv"] = "id,v\n" + "".join(f"{i},{i * b}\n" for i in range(1000))
        datasets.append(f"  b{b}: {{ format: csv, path: b{b}.csv, columns: {{ id: bigint, v: bigint }} }}")
        files[f"pipelines/p{b}.sql"] = (
            f"INSERT INTO {{{{ sink('lake', 'p{b}') }}}}\n"
            f"SELECT id % 10 AS k, sum(v) AS s FROM {{{{ source('files', 'b{b}') }}}} GROUP BY 1\n"
        )
        files[f"pipelines/p{b}.yml"] = "checks:\n  - not_null: { columns: [k] }\n"
        outputs.append(f"  p{b}: {{ format: parquet }}")
    files["sources/files.yml"] = "connector: localfiles\nconnection: { root: data }\ndatasets:\n" + "\n".join(
        datasets
    )
    files["sinks/lake.yml"] = "connector: localfiles\nconnection: { root: out }\noutputs:\n" + "\n".join(
        outputs
    )
    return _write(root, files)


def run_pz(
    project: Path, args: list[str], env: dict[str, str]
) -> tuple[float, float, dict[str, object], float]:
    """(wall s, the driver's peak RSS MiB, run_results, the machine's busy CPUs over the run)."""
    busy0, total0 = cpu_jiffies()
    start = time.perf_counter()
    proc = subprocess.Popen(
        [*pz_command(), "-p", str(project), "run", *args],
        env={**os.environ, **env},
        cwd=project,  # as a user runs it; `python -c` puts the working folder first on sys.path
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    busy1, total1 = cpu_jiffies()
    busy_cpus = (busy1 - busy0) / max(1, total1 - total0) * (os.cpu_count() or 1)
    runs = sorted((project / ".pz" / "runs").iterdir())
    results = json.loads((runs[-1] / "run_results.json").read_text())
    if os.waitstatus_to_exitcode(status) != 0:
        print(out.decode(errors="replace")[-2000:], file=sys.stderr)
    return wall, usage.ru_maxrss / 1024, results, busy_cpus


def measure(scenario: str, project: Path, executor: str, workers: int | None, address: str | None) -> Measure:
    env = {"RAY_USAGE_STATS_ENABLED": "0"}
    args: list[str] = []
    if executor == "ray":
        env["RAY_ADDRESS"] = address or ""
        args = ["--executor", "ray", "--staging", str(project / "shared")]
    wall, rss, results, busy = run_pz(project, args, env)
    nodes = results["nodes"]
    assert isinstance(nodes, list)
    tasks = 0
    for n in nodes:
        if n["kind"] == "pipeline" and n.get("message", "") and "streamed" in str(n.get("message")):
            continue  # a streamed pipeline is a view on the driver, no task
        parts = n.get("partitions") or []
        tasks += len(parts) if (executor == "ray" and parts) else 1
    return Measure(
        scenario,
        executor,
        workers,
        wall,
        rss,
        len(nodes),
        tasks,
        sum(int(n["duration_ms"]) for n in nodes),
        results["status"] == "success",
        busy,
    )


def start_cluster(workers: int) -> object:
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    for _ in range(workers):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    return cluster


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--branches", type=int, default=24)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--scenarios", default="partitioned,branches")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of the fixed scenario")
    args = parser.parse_args()
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    byte_compile(measured_tree())  # as pip installs it: no pz process (nor Ray worker) compiles its modules
    work = Path(tempfile.mkdtemp(prefix="pz-bench-ray-"))
    projects: dict[str, Path] = {}
    scenarios = args.scenarios.split(",")
    if "partitioned" in scenarios:
        table = ensure_table(Conn("127.0.0.1", 5432, "postgres", "test"), args.rows)
        projects["partitioned"] = partitioned_project(work / "partitioned", table, args.partitions)
    if "branches" in scenarios:
        projects["branches"] = branches_project(work / "branches", args.branches)
    workers = [int(w) for w in args.workers.split(",")]
    rows: list[Measure] = []
    try:
        if "fixed" in scenarios:
            fixed_cost(fixed_project(work / "fixed"), args.rounds)
        for scenario, project in projects.items():
            local = [measure(scenario, project, "local", None, None)]
            for w in workers:
                cluster = start_cluster(w)
                try:
                    rows.append(measure(scenario, project, "ray", w, cluster.address))  # type: ignore[attr-defined]
                finally:
                    cluster.shutdown()  # type: ignore[attr-defined]
                local.append(measure(scenario, project, "local", None, None))
            base = statistics.mean(m.wall for m in local)
            rows.extend(local)
            _print(scenario, local, [r for r in rows if r.scenario == scenario and r.executor == "ray"], base)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()
    print(f"\nload average during the run: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} (2 CPUs, shared)")


def _print(scenario: str, local: list[Measure], ray: list[Measure], base: float) -> None:
    print(f"\n{scenario}: local executor wall {base:.2f}s (mean of {len(local)} runs)")
    print(
        "| executor | workers | wall s | vs local (neighbours) | nodes | tasks | overhead/task ms "
        "| driver RSS MB | busy CPUs |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for i, r in enumerate(ray):
        around = statistics.mean([local[i].wall, local[i + 1].wall])
        per_task = (r.wall - around) / r.tasks * 1000 if r.tasks else 0.0
        ok = "" if r.ok else " (FAILED)"
        print(
            f"| ray{ok} | {r.workers} | {r.wall:.2f} | {r.wall / around:.2f}x | {r.nodes} | {r.tasks} | "
            f"{per_task:.0f} | {r.rss_mb:.0f} | {r.busy_cpus:.2f} |"
        )
    walls = {r.workers: r.wall for r in ray}
    if 1 in walls and 2 in walls:
        one = next(r for r in ray if r.workers == 1)
        bound = (os.cpu_count() or 1) / max(one.busy_cpus, 0.01)
        print(
            f"2-worker speed-up over 1 worker: {walls[1] / walls[2]:.2f}x; the 1-worker run kept "
            f"{one.busy_cpus:.2f} of {os.cpu_count()} CPUs busy: no worker count can beat {bound:.2f}x here"
        )
    lrss = max(m.rss_mb for m in local)
    lbusy = statistics.mean(m.busy_cpus for m in local)
    print(
        f"| local | threads=CPUs | {base:.2f} | 1.00x | {local[0].nodes} | - | - | {lrss:.0f} | {lbusy:.2f} |"
    )


if __name__ == "__main__":
    main()
