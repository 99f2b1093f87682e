"""Before joining a Ray cluster at RAY_ADDRESS: can it be reached, and can this Python speak to it?

`ray.init` retries an address that does not answer for a minute and more, printing a warning every few
seconds from Ray's core. pz first opens a plain TCP connection to the address, bounded by CONNECT_TIMEOUT:
an address nobody answers on is PZ0708 within seconds, and Ray is never asked. A `ray://host:port` address
is a Ray Client address: it needs `ray[client]` (grpcio), PZ0707 when this Python cannot import it.

A loopback host (localhost, 127.0.0.1) is also tried as this machine's node IP, as Ray connects there.
"""

from __future__ import annotations

import importlib
import socket
from collections.abc import Callable
from dataclasses import dataclass

from pipelinez.core.diagnostics import PzConfigError, error

CONNECT_TIMEOUT = 5.0  # seconds a TCP connection to RAY_ADDRESS may take to open
CLIENT_SCHEME = "ray://"
LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
INSTALL = "pip install 'pipelinez[ray]'"
UNREACHABLE_NEXT = (
    "check RAY_ADDRESS: the head node's GCS address (host:6379) or its Ray Client address "
    "(ray://host:10001); start the cluster there (`ray start --head`) and open that port to this machine, "
    "or unset RAY_ADDRESS to start a local Ray instance for the run"
)


@dataclass(frozen=True)
class RayAddress:
    text: str  # as RAY_ADDRESS says it
    host: str
    port: int
    client: bool  # a ray:// (Ray Client) address


def parse(address: str) -> RayAddress | None:
    """host and port of RAY_ADDRESS; None for what is no network address (auto, local) or what Ray itself
    must judge (no port)."""
    text = address.strip()
    client = text.startswith(CLIENT_SCHEME)
    rest = text[len(CLIENT_SCHEME) :] if client else text
    host, sep, port = rest.rstrip("/").rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit():
        return None
    return RayAddress(text, host, int(port), client)


def check_reachable(
    address: str, node_ip: Callable[[], str | None] = lambda: None, timeout: float = CONNECT_TIMEOUT
) -> None:
    """PZ0708 when nothing answers at RAY_ADDRESS within `timeout` (for each host tried); PZ0707 when it
    is a ray:// address and Ray Client cannot be imported."""
    where = parse(address)
    if where is None:
        return
    hosts = [where.host]
    if where.host.lower() in LOOPBACK:
        other = node_ip()
        if other and other not in hosts:
            hosts.append(other)
    problems = []
    for host in hosts:
        try:
            with socket.create_connection((host, where.port), timeout=timeout):
                break
        except OSError as exc:
            problems.append(f"{host}:{where.port}: {_reason(exc, timeout)}")
    else:
        raise PzConfigError(
            [
                error(
                    "PZ0708",
                    f"the Ray cluster at RAY_ADDRESS={where.text} cannot be reached: " + "; ".join(problems),
                    file="executor ray",
                    next_step=UNREACHABLE_NEXT,
                )
            ]
        )
    if where.client:
        _require_client(where)


def _reason(exc: OSError, timeout: float) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout:g}s"
    if isinstance(exc, socket.gaierror):
        return f"unknown host ({exc.strerror or exc})"
    return exc.strerror or str(exc) or type(exc).__name__


def _require_client(where: RayAddress) -> None:
    try:
        importlib.import_module("grpc")  # what ray[client] adds to ray
    except ImportError as exc:
        raise PzConfigError(
            [
                error(
                    "PZ0707",
                    f"RAY_ADDRESS={where.text} is a Ray Client address, which needs ray[client]: this Python "
                    f"cannot import grpc ({exc})",
                    file="executor ray",
                    next_step=f"{INSTALL} (it includes ray[client]), or set RAY_ADDRESS to the head node's "
                    "GCS address (host:6379) when pz runs on a node of the cluster",
                )
            ]
        ) from None
