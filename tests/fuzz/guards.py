"""What the fuzz harness checks around a command, beyond its output: that the project's own files are as
they were written (issue 20: an output must never land on a source or a project folder), and how a `pz`
process behaves when a signal arrives during a run (SIGTERM from a scheduler, SIGINT from Ctrl-C).

A signalled command runs as a `pz` process of its own, as a user's does: the in-process worker of the
harness cannot take a signal for the command alone.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

# --- the project's own files --------------------------------------------------------------------------------


def snapshot(project: Path) -> dict[str, bytes]:
    """The content of every regular file of the project as written (not under `.pz/` or `out/`, not reached
    through a symbolic link): what no command may change."""
    files: dict[str, bytes] = {}
    real_root = os.path.realpath(project)
    for folder, dirs, names in os.walk(project):
        rel_folder = os.path.relpath(folder, project)
        if rel_folder == ".":
            dirs[:] = [d for d in dirs if d not in (".pz", "out")]
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
        for name in names:
            path = os.path.join(folder, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            if not os.path.realpath(path).startswith(real_root + os.sep):
                continue
            with contextlib.suppress(OSError), open(path, "rb") as f:
                files[os.path.relpath(path, project)] = f.read(1 << 20)
    return files


def overwritten(project: Path, before: dict[str, bytes], command: str) -> list[tuple[str, str]]:
    """A violation for the first of the project's files that `command` changed or removed."""
    for rel, data in sorted(before.items()):
        path = project / rel
        try:
            if not os.path.lexists(path):
                return [("project file overwritten", f"{command}: {rel} was removed")]
            if path.is_symlink() or not path.is_file():
                return [("project file overwritten", f"{command}: {rel} was replaced by a folder or link")]
            with open(path, "rb") as f:
                now = f.read(1 << 20)
        except OSError:
            return [("project file overwritten", f"{command}: {rel} was removed")]
        if now != data:
            return [("project file overwritten", f"{command}: {rel} was changed")]
    return []


# --- a signal during a command --------------------------------------------------------------------------

SIGNAL_GRACE = 30.0  # seconds a signalled pz may take to end (spec: "promptly")
FIRST_LINE_WAIT = 20.0  # seconds to wait for the run's first node line
STARTUP_DELAY = 0.2  # seconds after the interpreter is up that a "startup" signal is sent
NODE_LINE = re.compile(rb"^(ok|FAIL|WARN|SKIP|CANCEL|RETRY) \S")


def _await_interpreter(proc: subprocess.Popen[bytes], limit: float = 10.0) -> None:
    """Wait until the process catches SIGINT (Python's own handler is installed as the interpreter starts):
    a delay counts from there, since no program can handle a signal before its runtime is up."""
    deadline = time.monotonic() + limit
    bit = 1 << (signal.SIGINT - 1)
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
        except OSError:
            return
        caught = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
        if int(caught, 16) & bit:
            return
        time.sleep(0.01)


def run_signalled(
    root: Path, args: list[str], env: dict[str, str], sig: list[Any], home: Path, timeout: float
) -> tuple[int | None, str, str]:
    """Run `pz args` as its own process and send it `sig[0]`: at `sig[1]` == "startup", STARTUP_DELAY
    seconds after its interpreter is up (pz is importing or validating); else `sig[1]` seconds after the
    run's first node line (`ok …`, `FAIL …`: the run is under way), and not at all when the process ends
    first, so the signal never races the process's own exit. It gets SIGNAL_GRACE seconds to end, then is
    killed (a `timeout`). A process the signal killed has exit code 128 + the signal's number, as a shell
    shows. Returns the exit code (None: it had to be killed), the output and why there is no exit code."""
    name, delay = str(sig[0]), sig[1]
    command = [sys.executable, "-c", "from pipelinez.cli.entry import main; main()"]
    base_env = {k: v for k, v in os.environ.items() if k != "FZ_TOKEN"}
    repo = str(Path(__file__).resolve().parents[2])
    base_env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, base_env.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen(
        [*command, "-p", str(root / "project"), *args],
        cwd=root,
        env={**base_env, "HOME": str(home), **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    chunks: list[bytes] = []
    running = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            chunks.append(line)
            if NODE_LINE.match(line):
                running.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    _await_interpreter(proc)
    if delay == "startup":
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(STARTUP_DELAY)
    else:
        deadline = time.monotonic() + FIRST_LINE_WAIT
        while not running.is_set() and proc.poll() is None and time.monotonic() < deadline:
            running.wait(0.05)
        with contextlib.suppress(subprocess.TimeoutExpired):
            if running.is_set():
                proc.wait(float(delay))
    sent = proc.poll() is None and (delay == "startup" or running.is_set())
    if sent:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(getattr(signal, name))
    grace = min(SIGNAL_GRACE, timeout)
    try:
        code: int | None = proc.wait(grace if sent else timeout)
        abnormal = ""
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        code = None
        abnormal = f"no answer within {grace:.0f}s of {name}" if sent else f"no answer within {timeout:.0f}s"
    reader.join(10)
    output = b"".join(chunks).decode("utf-8", "replace")
    if code is not None and code < 0:  # killed by the signal: what a shell shows as 128 + n
        code = 128 - code
    return code, output, abnormal
