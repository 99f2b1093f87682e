"""The Ray executor's pure parts, without Ray: executor settings, task memory, the cluster resource check,
the RAY_ADDRESS reachability check."""

from __future__ import annotations

import socket
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from pipelinez.core.diagnostics import PzConfigError, error
from pipelinez.core.redact import Redactor
from pipelinez.engine.distributed.ray_address import RayAddress, check_reachable, parse
from pipelinez.engine.distributed.ray_cluster import (
    RayCluster,
    _check_resources,
    _probe_versions,
    memory_bytes,
)
from pipelinez.engine.run.executor_choice import ExecutorChoice, choose_executor, staging_location
from pipelinez.engine.staging.shared_staging import LocalStagingRoot, staging_root


def test_staging_urls_are_folders_or_s3_prefixes_and_other_object_stores_are_refused(tmp_path: Path) -> None:
    assert staging_location((tmp_path / "s").as_uri(), "cli") == str((tmp_path / "s").resolve())
    assert staging_location(str(tmp_path / "s"), "cli") == str((tmp_path / "s").resolve())
    assert staging_location("s3://pz-stage/a//b/", "cli") == "s3://pz-stage/a/b"
    assert staging_location("s3://pz-stage", "cli") == "s3://pz-stage"
    refused = ("gs://b/p", "az://c/p", "https://h/p", "ftp://h/p", "file://otherhost/x", " ", "s3a://b/p")
    malformed = ("s3://B_ad/p", "s3://b/p", "s3://bkt/../x", "s3://bkt/.hidden/x", "s3://bkt/p?endpoint=x")
    for url in (*refused, *malformed):
        with pytest.raises(PzConfigError) as raised:
            staging_location(url, "cli")
        assert raised.value.diagnostics[0].code == "PZ0711", url
    # a credential written into the URL is never echoed
    with pytest.raises(PzConfigError) as raised:
        staging_location("s3://AKIA:very-secret-key@bucket-x/p", "cli")
    assert "very-secret-key" not in raised.value.diagnostics[0].message


def test_an_s3_staging_root_pickles_without_its_client_and_never_shows_its_secret() -> None:
    import pickle

    root = staging_root(
        "s3://pz-stage/runs", {"secret_access_key": "sEcReT-value-123", "region": "eu-west-1"}
    )
    assert root.location == "s3://pz-stage/runs"
    assert root.file_uri("r1", "t__part0", "../t/x.parquet") == "s3://pz-stage/runs/r1/t/x.parquet"
    assert "sEcReT" not in repr(root)
    assert root.store.region == "eu-west-1"  # type: ignore[attr-defined]
    copy = pickle.loads(pickle.dumps(root))
    assert "_store" not in copy.__dict__ and copy == root
    assert isinstance(staging_root("/tmp/x"), LocalStagingRoot)


def test_the_executor_comes_from_flags_then_environment_then_the_run_a_retry_finishes(tmp_path: Path) -> None:
    state = tmp_path / ".pz"
    assert choose_executor(None, None, {}, state) == ExecutorChoice("local")
    ray = choose_executor(None, None, {"PZ_EXECUTOR": "RAY", "RAY_ADDRESS": "ray://h:1"}, state)
    assert ray == ExecutorChoice("ray", str((state / "staging").resolve()), "ray://h:1")
    assert choose_executor("local", None, {"PZ_EXECUTOR": "ray"}, state).kind == "local"  # the flag wins
    earlier = ExecutorChoice("ray", "s3://pz-stage/p")
    assert choose_executor(None, None, {}, state, default=earlier).staging == "s3://pz-stage/p"
    assert choose_executor("local", None, {}, state, default=earlier).kind == "local"


def test_task_memory_is_engine_memory_limit_in_bytes() -> None:
    assert memory_bytes("512MB") == 512_000_000
    assert memory_bytes(" 2 GiB ") == 2 * 1024**3
    assert memory_bytes("1.5GB") == 1_500_000_000
    with pytest.raises(ValueError):
        memory_bytes("80%")


class _FakeRay:
    def __init__(self, nodes: list[dict[str, Any]]):
        self._nodes = nodes

    def nodes(self) -> list[dict[str, Any]]:
        return self._nodes


def test_a_cluster_where_no_node_fits_one_task_is_refused_instead_of_waiting_forever() -> None:
    small = {"Alive": True, "Resources": {"CPU": 4.0, "memory": 100_000_000.0}}
    no_cpu = {"Alive": True, "Resources": {"memory": 8e9}}
    dead = {"Alive": False, "Resources": {"CPU": 8.0, "memory": 8e9}}
    choice = ExecutorChoice("ray", "/s")
    root = LocalStagingRoot(Path("/s"))
    cluster = RayCluster(choice, "512MB", Redactor(), root, ray=_FakeRay([small, no_cpu, dead]))
    with pytest.raises(PzConfigError) as raised:
        _check_resources(cluster)
    assert raised.value.diagnostics[0].code == "PZ0708"
    assert "512MB" in raised.value.diagnostics[0].message
    fits = {"Alive": True, "Resources": {"CPU": 2.0, "memory": 4e9}}
    cluster = RayCluster(choice, "512MB", Redactor(), root, ray=_FakeRay([small, fits]))
    _check_resources(cluster)
    assert cluster.slots == 6  # every alive node's CPUs: nodes at once unless --threads says


class _ProbingRay(_FakeRay):
    """Runs each probe task in this process, as a worker on every node would."""

    def remote(self, fn: Any) -> Any:
        class _Task:
            def options(self, **_: Any) -> Any:
                return self

            def remote(self, *args: Any) -> Any:
                return fn(*args)

        return _Task()

    def get(self, refs: list[Any], timeout: float | None = None) -> list[Any]:
        return refs


def test_a_node_that_cannot_reach_the_s3_staging_is_refused_by_the_probe_before_anything_runs() -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    secret = "probe-secret-value-9f8e7d"
    settings = {"endpoint": f"http://127.0.0.1:{port}", "access_key_id": "k", "secret_access_key": secret}
    root = staging_root("s3://pz-stage/p", settings)
    node = {
        "Alive": True,
        "NodeID": "a" * 56,
        "NodeManagerAddress": "10.0.0.7",
        "Resources": {"CPU": 2.0, "memory": 4e9},
    }
    cluster = RayCluster(
        ExecutorChoice("ray", root.location), "512MB", Redactor((secret,)), root, ray=_ProbingRay([node])
    )
    _check_resources(cluster)
    with pytest.raises(PzConfigError) as raised:
        _probe_versions(cluster)
    found = raised.value.diagnostics[0]
    assert found.code == "PZ0711"
    assert found.message.startswith("Ray node 10.0.0.7: the staging s3://pz-stage/p at endpoint 127.0.0.1:")
    assert "cannot be reached" in found.message and secret not in found.message


def test_the_probe_asks_only_the_nodes_a_task_fits_on_and_still_refuses_another_pipelinez(
    tmp_path: Path,
) -> None:
    """A head started with no CPU (or too little memory) never runs a pz task: probing it would start a
    worker process there before every run; each node a task fits on is still probed, and still refused."""
    asked: list[str] = []

    class _Counting(_ProbingRay):
        def remote(self, fn: Any) -> Any:
            run = super().remote(fn)

            class _Pinned:
                def options(self, scheduling_strategy: Any, **_: Any) -> Any:
                    asked.append(scheduling_strategy.node_id)
                    return run

            return _Pinned()

    def node(name: str, hex_id: str, **resources: float) -> dict[str, Any]:
        return {"Alive": True, "NodeID": hex_id * 56, "NodeManagerAddress": name, "Resources": resources}

    nodes = [
        node("head", "a", memory=8e9),
        node("small", "b", CPU=4.0, memory=1e8),
        node("w", "c", CPU=1.0, memory=4e9),
    ]
    root = LocalStagingRoot(tmp_path / "staging")
    cluster = RayCluster(
        ExecutorChoice("ray", root.location), "512MB", Redactor(), root, ray=_Counting(nodes)
    )
    _check_resources(cluster)
    _probe_versions(cluster)
    assert asked == ["c" * 56]  # not the CPU-less head, not the node short of memory
    with pytest.MonkeyPatch.context() as patch:
        from pipelinez.engine.distributed import ray_cluster

        patch.setattr(ray_cluster, "versions", lambda: {"pipelinez": "0.0.1"})  # the driver's view
        with pytest.raises(PzConfigError) as raised:
            _probe_versions(cluster)
    assert raised.value.diagnostics[0].code == "PZ0709" and "Ray node w runs pipelinez" in str(
        raised.value.diagnostics[0].message
    )


def test_ray_addresses_parse_to_host_and_port() -> None:
    assert parse("10.0.0.5:6379") == RayAddress("10.0.0.5:6379", "10.0.0.5", 6379, False)
    assert parse("ray://head:10001/") == RayAddress("ray://head:10001/", "head", 10001, True)
    assert parse("[::1]:6379") == RayAddress("[::1]:6379", "::1", 6379, False)
    assert parse("auto") is None and parse("local") is None and parse("ray://head") is None


def test_a_ray_address_with_a_listener_passes_and_a_ray_client_one_needs_grpc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket
    import sys

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        check_reachable(f"127.0.0.1:{port}")
        monkeypatch.setitem(sys.modules, "grpc", None)  # `import grpc` raises ImportError
        with pytest.raises(PzConfigError) as raised:
            check_reachable(f"ray://127.0.0.1:{port}")
    found = raised.value.diagnostics[0]
    assert found.code == "PZ0707" and "ray[client]" in found.message
    assert "pip install 'pipelinez[ray]'" in found.next_step


def test_a_loopback_ray_address_is_also_tried_at_the_node_ip() -> None:
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        check_reachable(f"localhost:{port}", node_ip=lambda: "127.0.0.1")
    tried: list[str] = []

    def node_ip() -> str:
        tried.append("asked")
        return "127.0.0.1"

    with pytest.raises(PzConfigError) as raised:
        check_reachable(f"localhost:{port}", node_ip=node_ip)  # the listener is gone
    assert raised.value.diagnostics[0].code == "PZ0708" and tried == ["asked"]
    assert f"localhost:{port}" in raised.value.diagnostics[0].message
    assert f"127.0.0.1:{port}" in raised.value.diagnostics[0].message


class _JoinableRay:
    """`import ray` for the early-join test: records when `init` is called and when Ray is left."""

    def __init__(self) -> None:
        self.inited = threading.Event()
        self.calls: list[str] = []
        self._up = False

    def is_initialized(self) -> bool:
        return self._up

    def init(self, address: str, **_: Any) -> None:
        self.calls.append(f"init {address}")
        self._up = True
        self.inited.set()

    def shutdown(self) -> None:
        self.calls.append("shutdown")
        self._up = False


def test_a_run_at_ray_address_joins_the_cluster_while_the_project_is_planned_and_leaves_it_when_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Joining registers the run's job, and the nodes start its worker processes then: so `ray.init` comes
    while the driver validates and plans, not after. A refused project still leaves the cluster."""
    from pipelinez.engine.run import workflow
    from tests.conftest import SMALL, write_project

    fake = _JoinableRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    seen: list[bool] = []

    def planning(*_: Any, **__: Any) -> Any:
        seen.append(fake.inited.wait(timeout=10))  # the join runs beside the plan
        raise PzConfigError([error("PZ0101", "refused for the test")])

    monkeypatch.setattr(workflow, "plan", planning)
    project = write_project(tmp_path / "p", SMALL)
    with socket.socket() as head:  # something answers at RAY_ADDRESS
        head.bind(("127.0.0.1", 0))
        head.listen()
        address = f"127.0.0.1:{head.getsockname()[1]}"
        with pytest.raises(PzConfigError):
            workflow.run(project, executor="ray", environ={"RAY_ADDRESS": address})
    assert seen == [True]
    assert fake.calls == [f"init {address}", "shutdown"]


class _StuckRay(_JoinableRay):
    """A head that accepts connections and does not answer: `init` returns only once `answer` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = threading.Event()
        self.left = threading.Event()

    def init(self, address: str, **kwargs: Any) -> None:
        self.answer.wait(timeout=30)
        super().init(address, **kwargs)

    def shutdown(self) -> None:
        super().shutdown()
        self.left.set()


def test_a_refused_project_is_reported_at_once_while_the_join_hangs_and_the_join_leaves_ray_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refused run does not wait for a join still under way (before, it waited for `ray.init`, which
    against a head that never answers does not return, and the user saw a hang, not the refusal); once the
    join gets through, its thread leaves the cluster itself."""
    from pipelinez.engine.run import workflow
    from tests.conftest import SMALL, write_project

    fake = _StuckRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")

    def planning(*_: Any, **__: Any) -> Any:
        raise PzConfigError([error("PZ0101", "refused for the test")])

    monkeypatch.setattr(workflow, "plan", planning)
    project = write_project(tmp_path / "p", SMALL)
    with socket.socket() as head:
        head.bind(("127.0.0.1", 0))
        head.listen()
        address = f"127.0.0.1:{head.getsockname()[1]}"
        with pytest.raises(PzConfigError) as raised:
            workflow.run(project, executor="ray", environ={"RAY_ADDRESS": address})
        assert raised.value.diagnostics[0].code == "PZ0101"
        assert fake.calls == []  # refused while ray.init still hangs
        fake.answer.set()
        assert fake.left.wait(timeout=10)
    assert fake.calls == [f"init {address}", "shutdown"]
