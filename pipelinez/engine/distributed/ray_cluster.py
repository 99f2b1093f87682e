"""The Ray cluster of one run, joined or started and checked before any node runs.

`connect` checks the staging (it can be written: PZ0711; its bucket exists: PZ0531), then joins the cluster at
RAY_ADDRESS (something answers there within seconds, else PZ0708; a ray:// address needs Ray Client, PZ0707)
or starts a local Ray instance, and checks it: a node can host one task (PZ0708), every node runs the
driver's pipelinez/DuckDB/Python (PZ0709) and reaches the staging (PZ0711). Every refusal is a PzConfigError
with its message redacted, raised before the run starts.

`ray` is imported only in the distributed package, inside functions: without the extra installed,
`--executor ray` is PZ0707.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelinez.core.diagnostics import PzConfigError, error
from pipelinez.core.memory_budget import size_bytes
from pipelinez.core.redact import Redactor
from pipelinez.engine.distributed.ray_address import INSTALL, check_reachable
from pipelinez.engine.distributed.remote_task import STAGING_PROBLEM, probe, versions
from pipelinez.engine.run.context import RunContext
from pipelinez.engine.run.executor_choice import ExecutorChoice
from pipelinez.engine.staging.shared_staging import StagingRoot
from pipelinez.engine.staging.staging_store import first_line

if TYPE_CHECKING:
    from pipelinez.engine.distributed.ray_backend import RayBackend

TASK_CPUS = 1  # each task: one CPU, so its DuckDB runs one thread; memory: engine.memory_limit
PROBE_TIMEOUT = 120.0


def memory_bytes(limit: str) -> int:
    """engine.memory_limit ('512MB', '2GiB') in bytes: each task's Ray `memory` request."""
    return size_bytes(limit)


def _refuse(code: str, message: str, next_step: str = "") -> PzConfigError:
    return PzConfigError([error(code, message, file="executor ray", next_step=next_step)])


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise _refuse(
            "PZ0707",
            f"--executor ray needs the ray package, which this Python cannot import ({exc})",
            f"{INSTALL} (ray[client]>=2.60,<3), or run with --executor local",
        ) from None
    return ray


@dataclass
class RayCluster:
    """A connection to a Ray cluster for one run: checked (resources, versions, staging) before the run."""

    choice: ExecutorChoice
    memory_limit: str
    redactor: Redactor
    root: StagingRoot
    started: bool = False  # pz started a local Ray instance (and shuts it down at the end)
    slots: int = 1  # the cluster's CPUs: nodes at once unless --threads or engine.threads says
    ray: Any = field(default=None, repr=False)
    hosts: list[dict[str, Any]] = field(default_factory=list, repr=False)  # alive nodes a task fits on

    def backend(self, ctx: RunContext, slots: int) -> RayBackend:
        from pipelinez.engine.distributed.ray_backend import RayBackend

        return RayBackend(self, ctx, slots)

    def close(self) -> None:
        if self.started and self.ray is not None and self.ray.is_initialized():
            self.ray.shutdown()
        self.started = False


def connect(choice: ExecutorChoice, memory_limit: str, redactor: Redactor, root: StagingRoot) -> RayCluster:
    """Check the staging, join or start the cluster and check it (see the module's docstring). Raises
    PzConfigError (every message redacted); the run has not started."""
    ray = import_ray()
    _check_staging(root, redactor)
    cluster = RayCluster(choice, memory_limit, redactor, root, ray=ray)
    if not ray.is_initialized():
        _start(ray, choice)
        cluster.started = True
    try:
        _check_resources(cluster)
        _probe_versions(cluster)
    except BaseException:
        cluster.close()
        raise
    return cluster


def _start(ray: Any, choice: ExecutorChoice) -> None:
    """Join the cluster at RAY_ADDRESS, or start a local instance (PZ0708 when neither works)."""
    if choice.address:
        check_reachable(choice.address, node_ip=_node_ip)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    options: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,  # pz prints its own lines; a worker's stray output never reaches stdout
        "logging_level": logging.ERROR,
    }
    try:
        # without RAY_ADDRESS always a new local instance: never whatever cluster `ray start` left behind
        ray.init(address=choice.address or "local", **options)
    except Exception as exc:
        where = f"at RAY_ADDRESS={choice.address}" if choice.address else "locally"
        raise _refuse(
            "PZ0708", f"the Ray cluster cannot be reached or started {where}: {first_line(exc)}"
        ) from None


def _node_ip() -> str | None:
    """This machine's IP as Ray sees it (Ray connects there for a loopback RAY_ADDRESS)."""
    try:
        return str(importlib.import_module("ray._private.services").get_node_ip_address())
    except Exception:  # a Ray without it: the loopback address alone is tried
        return None


def _check_resources(cluster: RayCluster) -> None:
    ray = cluster.ray
    need = memory_bytes(cluster.memory_limit)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    fits = [
        n
        for n in nodes
        if n.get("Resources", {}).get("CPU", 0) >= TASK_CPUS
        and n.get("Resources", {}).get("memory", 0) >= need
    ]
    if not fits:
        raise _refuse(
            "PZ0708",
            f"no node of the Ray cluster offers {TASK_CPUS} CPU and {cluster.memory_limit} of memory "
            f"(engine.memory_limit), which each pz task asks for: a task would wait forever",
        )
    cluster.slots = max(1, int(sum(n.get("Resources", {}).get("CPU", 0) for n in nodes)))
    cluster.hosts = fits


def _probe_versions(cluster: RayCluster) -> None:
    """One probe task pinned to each node a pz task fits on (`_check_resources`: a node without a CPU or
    with less memory than engine.memory_limit never runs pz's code, as a head started with
    `--num-cpus 0`, so it is not asked; asking it would start a worker process there for nothing): the
    versions its workers import, and whether they can write and read the staging (a node that cannot
    reach the bucket, or lacks the shared mount's rights, is PZ0711 before anything runs, not a PZ0712 on
    every node it runs). The probe's worker process stays in the job's pool, so the first task on its node
    reuses it, with pipelinez and DuckDB imported."""
    ray = cluster.ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    remote = ray.remote(probe)
    nodes = cluster.hosts
    refs = [
        remote.options(
            num_cpus=0,
            max_retries=0,
            name="pz:version-probe",
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
        ).remote(cluster.root)
        for n in nodes
    ]
    try:
        found = ray.get(refs, timeout=PROBE_TIMEOUT)
    except Exception as exc:
        raise _refuse(
            "PZ0708", f"the version probe did not complete on every Ray node: {first_line(exc)}"
        ) from None
    mine = versions()
    for node, theirs in zip(nodes, found, strict=True):
        differ = [f"{k} {theirs.get(k)} (driver: {v})" for k, v in mine.items() if theirs.get(k) != v]
        host = node.get("NodeManagerAddress", node.get("NodeID", "?"))
        if differ:
            raise _refuse("PZ0709", f"Ray node {host} runs {', '.join(differ)}")
        if theirs.get(STAGING_PROBLEM):
            raise _refuse(
                "PZ0711",
                cluster.redactor(f"Ray node {host}: {theirs[STAGING_PROBLEM]}"),
                "every node needs the staging: a shared folder each one mounts, or an s3:// endpoint each "
                "one reaches with engine.staging's credentials",
            )


def _check_staging(root: StagingRoot, redactor: Redactor) -> None:
    try:
        root.check()
    except PzConfigError as exc:
        raise PzConfigError(
            [
                dataclasses.replace(d, message=redactor(d.message), next_step=redactor(d.next_step))
                for d in exc.diagnostics
            ]
        ) from None
