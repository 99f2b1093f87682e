"""The Ray cluster of one run, joined or started and checked before any node runs.

`connect` checks the staging (it can be written: PZ0711; its bucket exists: PZ0531), then joins the cluster at
RAY_ADDRESS (something answers there within seconds, else PZ0708; a ray:// address needs Ray Client, PZ0707)
or starts a local Ray instance, and checks it: a node can host one task (PZ0708), every node that can runs the
driver's pipelinez/DuckDB/Python (PZ0709) and reaches the staging (PZ0711). Every refusal is a PzConfigError
with its message redacted, raised before the run starts. A run at RAY_ADDRESS joins while the driver plans
(`begin_join`), so the nodes start the run's worker processes meanwhile.

`ray` is imported only in the distributed package, inside functions: without the extra installed,
`--executor ray` is PZ0707.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import logging
import os
import threading
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


def connect(
    choice: ExecutorChoice,
    memory_limit: str,
    redactor: Redactor,
    root: StagingRoot,
    join: RayJoin | None = None,
) -> RayCluster:
    """Check the staging, join or start the cluster (or take the connection `join` opened while the driver
    planned) and check it (see the module's docstring). Raises PzConfigError (every message redacted); the
    run has not started. The refusals come in the same order either way: PZ0707, the staging's, PZ0708."""
    join = join or RayJoin(choice)
    ray = join.imported()
    try:
        _check_staging(root, redactor)
        started = join.joined()
    except BaseException:
        join.close()
        raise
    cluster = RayCluster(choice, memory_limit, redactor, root, started=started, ray=ray)
    join.hand_over()
    try:
        _check_resources(cluster)
        _probe_versions(cluster)
    except BaseException:
        cluster.close()
        raise
    return cluster


class RayJoin:
    """`import ray` and `ray.init` for one run: inline in `connect`, or begun in a thread (`begin_join`)
    before the driver validates and plans. Joining a cluster registers the run's job, and each node's raylet
    then starts a worker process for it (Python, Ray, about 800 modules: seconds on a loaded machine), so
    that start overlaps the driver's own work instead of following it. Failures are kept for `connect`,
    which raises them where it always did. Ray is asked from a thread, so it leaves the process's SIGTERM
    handler alone (pz's own records the interruption)."""

    def __init__(self, choice: ExecutorChoice):
        self.choice = choice
        self.ray: Any = None
        self.started = False  # this join started or joined Ray (`close` shuts it down unless handed over)
        self._failure: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._owned = False  # a RayCluster took the connection over: it shuts it down
        self._lock = threading.Lock()
        self._done = True  # no join under way (set False while the thread joins)
        self._abandoned = False  # the run was refused while the thread still joined: the thread leaves Ray

    def begin(self) -> RayJoin:
        self._done = False
        self._thread = threading.Thread(target=self._join, name="pz-ray-join", daemon=True)
        self._thread.start()
        return self

    def _join(self) -> None:
        try:
            self.ray = import_ray()
            # ray.init's own logging_level, a little earlier: no "SIGTERM handler is not set" warning
            logging.getLogger("ray").setLevel(logging.ERROR)
            self.joined()
        except BaseException as exc:  # raised in the driver's thread by `imported` or `joined`
            self._failure = exc
        finally:
            with self._lock:
                self._done = True
                abandoned = self._abandoned
            if abandoned:  # the run was refused meanwhile and did not wait: leave what was joined
                self._leave()

    def _wait(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def imported(self) -> Any:
        """The ray module (PZ0707 when it cannot be imported)."""
        self._wait()
        if self.ray is None:
            if self._failure is not None:
                raise self._failure
            self.ray = import_ray()
        return self.ray

    def joined(self) -> bool:
        """Ray joined or started (PZ0708 when it could not be): True when this join started it."""
        if self._thread is not None and threading.current_thread() is not self._thread:
            self._wait()
            if self._failure is not None:
                raise self._failure
            return self.started
        if not self.ray.is_initialized():
            _start(self.ray, self.choice)
            self.started = True
        return self.started

    def hand_over(self) -> None:
        self._owned = True

    def close(self) -> None:
        """Leave Ray if this join started it and no RayCluster took it over (the run was refused). A join
        still under way is not waited for (`ray.init` against a head that accepts connections and never
        answers does not return): the refusal is reported at once, and the thread leaves Ray when it can."""
        with self._lock:
            self._abandoned = True
            done = self._done
        if done:
            self._leave()

    def _leave(self) -> None:
        with contextlib.suppress(Exception):  # leaving a half-joined Ray must not hide the run's own error
            if self.started and not self._owned and self.ray is not None and self.ray.is_initialized():
                self.ray.shutdown()
        self.started = False


def begin_join(choice: ExecutorChoice) -> RayJoin | None:
    """Begin joining the cluster at RAY_ADDRESS while the driver plans (None for another executor, or
    without RAY_ADDRESS: a local instance is started by `connect` only once the project is accepted, so
    a refused project never starts and stops one). The caller closes it."""
    if not (choice.is_ray and choice.address):
        return None
    return RayJoin(choice).begin()


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
