"""`--executor ray` with a RAY_ADDRESS nobody answers on: PZ0708 within seconds, before Ray is asked (Ray's
own connect retries for minutes, printing a warning every few seconds), for a GCS address and a ray:// (Ray
Client) address alike. Run as a user would (a process of its own), so Ray's core output would show."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.conftest import SMALL, pz_subprocess, write_project

pytest.importorskip("ray")


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_an_unreachable_ray_address_is_pz0708_within_seconds_without_ray_warnings(
    tmp_path: Path, scheme: str
) -> None:
    project = write_project(tmp_path / "p", SMALL)
    address = f"{scheme}127.0.0.1:{closed_port()}"
    result = pz_subprocess(project, "run", "--executor", "ray", env={"RAY_ADDRESS": address}, timeout=60)
    assert result.exit_code == 2, result.output
    assert "error: PZ0708" in result.output, result.output
    assert f"RAY_ADDRESS={address} cannot be reached" in result.output
    assert "refused" in result.output.lower()
    assert "ray start --head" in result.output  # the next step fits: where the cluster should run
    assert "Failed to connect" not in result.output and "rpc_client" not in result.output, result.output
    assert len(result.output.splitlines()) <= 4, result.output  # the error, its next step, the count
    assert not (project / ".pz" / "runs").exists()  # refused before any run started
