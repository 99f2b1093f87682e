"""The Ray executor's pure parts, without Ray: executor settings, task memory, the cluster resource check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipelinez.core.diagnostics import PzConfigError
from pipelinez.core.redact import Redactor
from pipelinez.engine.executor_choice import ExecutorChoice, choose_executor, staging_folder
from pipelinez.engine.ray_backend import RayCluster, _check_resources, memory_bytes


def test_staging_urls_are_folders_and_object_stores_are_refused(tmp_path: Path) -> None:
    assert staging_folder((tmp_path / "s").as_uri(), "cli") == (tmp_path / "s").resolve()
    assert staging_folder(str(tmp_path / "s"), "cli") == (tmp_path / "s").resolve()
    for url in ("s3://b/p", "gs://b/p", "az://c/p", "https://h/p", "ftp://h/p", "file://otherhost/x", " "):
        with pytest.raises(PzConfigError) as raised:
            staging_folder(url, "cli")
        assert raised.value.diagnostics[0].code == "PZ0711", url


def test_the_executor_comes_from_flags_then_environment_then_the_run_a_retry_finishes(tmp_path: Path) -> None:
    state = tmp_path / ".pz"
    assert choose_executor(None, None, {}, state) == ExecutorChoice("local")
    ray = choose_executor(None, None, {"PZ_EXECUTOR": "RAY", "RAY_ADDRESS": "ray://h:1"}, state)
    assert ray == ExecutorChoice("ray", (state / "staging").resolve(), "ray://h:1")
    assert choose_executor("local", None, {"PZ_EXECUTOR": "ray"}, state).kind == "local"  # the flag wins
    earlier = ExecutorChoice("ray", tmp_path / "shared")
    assert choose_executor(None, None, {}, state, default=earlier).staging == tmp_path / "shared"
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
    choice = ExecutorChoice("ray", Path("/s"))
    cluster = RayCluster(choice, "512MB", Redactor(), ray=_FakeRay([small, no_cpu, dead]))
    with pytest.raises(PzConfigError) as raised:
        _check_resources(cluster)
    assert raised.value.diagnostics[0].code == "PZ0708"
    assert "512MB" in raised.value.diagnostics[0].message
    fits = {"Alive": True, "Resources": {"CPU": 2.0, "memory": 4e9}}
    cluster = RayCluster(choice, "512MB", Redactor(), ray=_FakeRay([small, fits]))
    _check_resources(cluster)
    assert cluster.slots == 6  # every alive node's CPUs: nodes at once unless --threads says
