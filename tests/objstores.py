"""Loopback object stores for tests: a moto S3 server and an Azurite blob server, each started on a free
port of 127.0.0.1 and stopped by the fixture that started it.

Azurite comes from the npm package `azurite`, which `.ci/run` installs into `.tools/` (PZ_AZURITE may name
another `azurite-blob` executable). Without it (no node on the machine), the Azurite tests skip and say why.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import pyarrow.fs as pafs

REPO = Path(__file__).resolve().parent.parent
AZURITE_ACCOUNT = "devstoreaccount1"
# Azurite's published, well-known development account key (not a secret)
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
S3_KEY_ID = "pzaccesskey"
S3_SECRET = "pz-s3-secret-value-0c1d2e3f"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening")
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout}s")


@contextlib.contextmanager
def _process(cmd: list[str], port: int, what: str) -> Iterator[None]:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait(port, proc, what)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class S3Server:
    endpoint: str  # http://127.0.0.1:<port>

    def filesystem(self):  # type: ignore[no-untyped-def]
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(
            access_key=S3_KEY_ID,
            secret_key=S3_SECRET,
            endpoint_override=self.endpoint.removeprefix("http://"),
            scheme="http",
            region="us-east-1",
            allow_bucket_creation=True,
            allow_bucket_deletion=True,
        )

    def bucket(self, name: str) -> str:
        self.filesystem().create_dir(name)
        return name


@contextlib.contextmanager
def moto_server() -> Iterator[S3Server]:
    port = free_port()
    cmd = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    with _process(cmd, port, "moto server"):
        yield S3Server(f"http://127.0.0.1:{port}")


def azurite_command() -> list[str] | None:
    """How to start Azurite's blob server: PZ_AZURITE, else the copy `.ci/run` installs, else one on PATH."""
    named = os.environ.get("PZ_AZURITE")
    if named:
        return [named]
    main = REPO / ".tools" / "node_modules" / "azurite" / "dist" / "src" / "blob" / "main.js"
    node = shutil.which("node")
    if main.exists() and node:
        return [node, str(main)]
    found = shutil.which("azurite-blob")
    return [found] if found else None


@dataclass
class AzureServer:
    endpoint: str  # http://127.0.0.1:<port>/devstoreaccount1
    port: int
    log: Path | None = None  # Azurite's debug log (every request, its headers and its operation's name)

    def operations(self, since: int = 0) -> list[tuple[str, str]]:
        """(operation, request URL) of each request Azurite dispatched, from byte `since` of its debug log."""
        assert self.log is not None, "start Azurite with azurite_server(debug=True)"
        lines = self._logged_until_now(since)
        urls: dict[str, str] = {}
        found = []
        for line in lines:
            parts = line.split(" ", 3)
            if len(parts) < 4:
                continue
            request_id, text = parts[1], parts[3]
            if "RequestURL=" in text:
                urls[request_id] = text.split("RequestURL=", 1)[1].split(" ", 1)[0]
            elif "DispatchMiddleware: Operation=" in text:
                found.append((text.split("Operation=", 1)[1].strip(), urls.get(request_id, "")))
        return found

    def _logged_until_now(self, since: int) -> list[str]:
        """The log's lines from byte `since`, up to a marker request sent now (Azurite writes its log
        asynchronously, in order: once the marker is there, so is every earlier request)."""
        import urllib.error
        import urllib.request
        import uuid

        assert self.log is not None
        marker = f"pz-log-marker-{uuid.uuid4().hex}"
        with contextlib.suppress(urllib.error.URLError):
            urllib.request.urlopen(f"http://127.0.0.1:{self.port}/{AZURITE_ACCOUNT}/{marker}", timeout=10)
        deadline = time.monotonic() + 10
        while True:
            with self.log.open("rb") as f:
                f.seek(since)
                text = f.read().decode(errors="replace")
            if marker in text or time.monotonic() > deadline:
                return [line for line in text.splitlines() if marker not in line]
            time.sleep(0.05)

    def log_size(self) -> int:
        """The debug log's size once Azurite has stopped appending to it (it logs a request's lines after
        answering it: on a busy machine the previous request's last line can land after a bare stat)."""
        if self.log is None:
            return 0
        size, deadline = self.log.stat().st_size, time.monotonic() + 3.0
        while time.monotonic() < deadline:
            time.sleep(0.15)
            now = self.log.stat().st_size
            if now == size:
                break
            size = now
        return size

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={self.endpoint};"
        )

    def filesystem(self):  # type: ignore[no-untyped-def]
        import pyarrow.fs as pafs

        authority = f"127.0.0.1:{self.port}"
        return pafs.AzureFileSystem(
            account_name=AZURITE_ACCOUNT,
            account_key=AZURITE_KEY,
            blob_storage_authority=authority,
            dfs_storage_authority=authority,
            blob_storage_scheme="http",
            dfs_storage_scheme="http",
        )

    def container(self, name: str) -> str:
        self.filesystem().create_dir(name)
        return name


@contextlib.contextmanager
def azurite_server(debug: bool = False) -> Iterator[AzureServer]:
    """Azurite on a free port; `debug`: with its debug log (`AzureServer.operations`)."""
    exe = azurite_command()
    if exe is None:
        pytest.skip(
            "Azurite is not installed: run .ci/run (npm install --prefix .tools azurite) or set PZ_AZURITE"
        )
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="pz-azurite-") as data:
        cmd = [
            *exe,
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--location",
            data,
            "--skipApiVersionCheck",
            "--loose",
            "--silent",
        ]
        log = Path(data) / "debug.log" if debug else None
        if log is not None:
            cmd += ["--debug", str(log)]
        with _process(cmd, port, "azurite"):
            yield AzureServer(f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}", port, log)


def stored_keys(fs: pafs.FileSystem, root: str, prefix: str = "") -> list[str]:
    """The keys of every object under `root/prefix` (a bucket or a container), sorted, without the root."""
    import pyarrow.fs as pafs

    base = f"{root}/{prefix}".rstrip("/")
    infos = fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    return sorted(i.path[len(root) + 1 :] for i in infos if i.type == pafs.FileType.File)


def stored_contents(fs: pafs.FileSystem, root: str, prefix: str) -> dict[str, bytes]:
    """Every object under `root/prefix` with its bytes."""
    found = {}
    for key in stored_keys(fs, root, prefix):
        with fs.open_input_stream(f"{root}/{key}") as f:
            found[key] = f.read()
    return found
