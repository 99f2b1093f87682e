"""Run fuzz cases against the real `pz` CLI and classify what came back.

A case runs in a worker process that drives the CLI in-process (click's CliRunner: no interpreter start per
command) with its file descriptors 1 and 2 redirected to a file, so native output (a driver's panic text)
is seen too. The parent waits at most `timeout` seconds per command: a worker that hangs is killed and
replaced (outcome `timeout`), one that dies (a segfault) is replaced (outcome `crash`).

The invariants (reference section 8 and issue 6): exit code 0, 1 or 2; every error line carries a registered
PZ code (`error: PZ0xxx ...`, and each `FAIL node` line is followed by `  PZ0xxx: ...`); exit 2 prints at
least one error, exit 1 at least one failed node or error; never PZ0512 (internal error); never a Python
traceback or native panic text; never a hang. Issue 20 adds two: a command never changes or removes a file
of the project it was given (outside `.pz/` and `out/`), and a secret never reaches another origin.

A case with a `signal` runs its first command as a `pz` process of its own (signals reach it as they reach a
user's), sends it SIGTERM or SIGINT, and waits a bounded time for it to end. A case whose tree names
`__FZ_HTTP__` reads from or writes to the loopback API of `tests.fuzz.misbehaving_http`.
"""

from __future__ import annotations

import base64
import contextlib
import io
import itertools
import json
import multiprocessing
import multiprocessing.connection
import os
import re
import shutil
import tempfile
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fuzz.guards import overwritten, run_signalled, snapshot
from tests.fuzz.seeds import Tree

# --- cases ---------------------------------------------------------------------------------------------


@dataclass
class Case:
    """One fuzz case: a project tree, how it was made, and the commands to run on it."""

    seed: str
    tree: Tree
    mutations: list[str]
    first: list[
        str
    ]  # the first command with its flags, e.g. ["validate"] or ["--log-format", "json", "plan"]
    then: list[str] | None  # run after `first` exits 0 (or always, when `force_then`)
    force_then: bool = False
    env: dict[str, str] = field(default_factory=dict)
    prelude: Tree | None = None  # a valid tree run once before `tree` replaces it (existing targets)
    signal: list[Any] | None = None  # [SIGTERM|SIGINT, "startup" or seconds]: see run_signalled

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "mutations": self.mutations,
            "first": self.first,
            "then": self.then,
            "force_then": self.force_then,
            "env": self.env,
            "tree": _tree_json(render(self.tree)),
            "prelude": _tree_json(render(self.prelude)) if self.prelude is not None else None,
            "signal": self.signal,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Case:
        return cls(
            seed=data["seed"],
            tree=_tree_from_json(data["tree"]),
            mutations=data["mutations"],
            first=data["first"],
            then=data["then"],
            force_then=data["force_then"],
            env=data["env"],
            prelude=_tree_from_json(data["prelude"]) if data.get("prelude") is not None else None,
            signal=data.get("signal"),
        )


def dump_yaml(obj: Any) -> str:
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.allow_unicode = True
    yaml.width = 4096
    buf = io.StringIO()
    try:
        yaml.dump(obj, buf)
    except Exception:  # a value the dumper refuses: JSON text is YAML too (or broken YAML, also a case)
        return json.dumps(obj, default=str)
    return buf.getvalue()


def render(tree: Tree) -> Tree:
    """The tree with every YAML entry turned into text."""
    return {p: (("text", dump_yaml(v)) if k == "yaml" else (k, v)) for p, (k, v) in tree.items()}


def _tree_json(tree: Tree) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for path, (kind, value) in tree.items():
        if kind == "text":
            value = base64.b64encode(value.encode("utf-8", "surrogatepass")).decode()
            kind = "bytes"
        elif kind == "bytes":
            value = base64.b64encode(value).decode()
        out[path] = [kind, value]
    return out


def _tree_from_json(data: dict[str, list[Any]]) -> Tree:
    return {p: ((k, base64.b64decode(v)) if k == "bytes" else (k, v)) for p, (k, v) in data.items()}


PLACEHOLDERS = ("__FZ_HTTP__", "__FZ_ROOT__")


def placeholders(tree: Tree) -> set[str]:
    """The placeholders (`__FZ_HTTP__`, `__FZ_ROOT__`) the rendered tree's text names."""
    texts = [v for k, v in render(tree).values() if k == "text"]
    return {p for p in PLACEHOLDERS if any(p in t for t in texts)}


def materialize(root: Path, tree: Tree, http_base: str = "") -> None:
    """Write `tree` under `root`, with `__FZ_ROOT__` replaced by `root` and `__FZ_HTTP__` by `http_base`.
    Entries that the file system refuses (a file under a file) are left out."""
    root.mkdir(parents=True, exist_ok=True)
    for rel, (kind, value) in sorted(render(tree).items(), key=lambda kv: (kv[0].count("/"), kv[0])):
        if kind == "text":
            value = value.replace("__FZ_ROOT__", str(root)).replace("__FZ_HTTP__", http_base)
        path = root / rel
        with contextlib.suppress(OSError, ValueError):
            path.parent.mkdir(parents=True, exist_ok=True)
            if kind == "dir":
                path.mkdir(parents=True, exist_ok=True)
            elif kind == "text":
                path.write_bytes(value.encode("utf-8", "surrogatepass"))
            elif kind == "bytes":
                path.write_bytes(value)
            elif kind == "link":
                os.symlink(value, path)
            elif kind == "fifo":
                os.mkfifo(path)


def clear_project(root: Path) -> None:
    """Remove a project's own files, keeping `.pz/` and `out/` (what a previous run left)."""
    for child in root.iterdir():
        if child.name in (".pz", "out"):
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                child.unlink()


# --- the worker process ----------------------------------------------------------------------------------


@contextlib.contextmanager
def _fd_capture() -> Iterator[io.BytesIO]:
    """Redirect fds 1 and 2 to a temp file; what native code writes there ends up in the yielded buffer."""
    captured = io.BytesIO()
    with tempfile.TemporaryFile() as tmp:
        saved = os.dup(1), os.dup(2)
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        try:
            yield captured
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            tmp.seek(0)
            captured.write(tmp.read())


def _invoke(root: str, args: list[str], env: dict[str, str]) -> tuple[int, str]:
    from click.testing import CliRunner

    from pipelinez.cli.main import cli

    os.chdir(root)
    with _fd_capture() as native:
        result = CliRunner().invoke(cli, ["-p", os.path.join(root, "project"), *args], env=env)
    output = result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        output += "".join(traceback.format_exception(result.exception))
    stray = native.getvalue().decode("utf-8", "replace")
    if stray:
        output += ("" if output.endswith("\n") or not output else "\n") + stray
    return result.exit_code, output


def _worker_main(conn: multiprocessing.connection.Connection, home: str) -> None:
    os.environ["HOME"] = home
    os.environ.pop("FZ_TOKEN", None)
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        if request is None:
            return
        conn.send(_invoke(*request))


class Worker:
    """A process that runs CLI commands for the parent; replaced when it hangs or dies."""

    def __init__(self, home: Path):
        self.home = home
        self.ctx = multiprocessing.get_context("spawn")
        self.proc: Any = None
        self.conn: multiprocessing.connection.Connection | None = None

    def _start(self) -> None:
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker_main, args=(child, str(self.home)), daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent

    def call(self, root: Path, args: list[str], env: dict[str, str], timeout: float) -> CommandResult:
        if self.proc is None or not self.proc.is_alive():
            self._start()
        assert self.conn is not None
        self.conn.send((str(root), args, env))
        if not self.conn.poll(timeout):
            self.stop(kill=True)
            return CommandResult(args, None, "", f"no answer within {timeout:.0f}s")
        try:
            exit_code, output = self.conn.recv()
        except (EOFError, OSError):
            self.proc.join(5)
            code = self.proc.exitcode
            self.stop(kill=True)
            return CommandResult(args, None, "", f"worker died (exit {code})")
        return CommandResult(args, exit_code, output)

    def stop(self, kill: bool = False) -> None:
        if self.proc is None:
            return
        if kill:
            self.proc.kill()
        else:
            with contextlib.suppress(OSError, BrokenPipeError):
                assert self.conn is not None
                self.conn.send(None)
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        if self.conn is not None:
            self.conn.close()
        self.proc, self.conn = None, None


# --- classification ------------------------------------------------------------------------------------


@dataclass
class CommandResult:
    args: list[str]
    exit_code: int | None  # None: timed out or the worker died
    output: str
    abnormal: str = ""  # why there is no exit code
    crash_log: str = ""  # the log a PZ0512 points at, for triage

    @property
    def command(self) -> str:
        return " ".join(a for a in self.args if not a.startswith("-") and "=" not in a)


@dataclass
class Outcome:
    kind: str  # "ok" | "refused" | "failed" | "violation"
    codes: list[str]  # PZ codes of error / FAIL lines, in order
    violations: list[tuple[str, str]]  # (class, detail)
    results: list[CommandResult]


ERROR_LINE = re.compile(r"^error: (PZ0[1-7]\d\d) \S")
WARNING_LINE = re.compile(r"^warning: (PZ0[1-7]\d\d) \S")
FAIL_LINE = re.compile(r"^FAIL \S+ ")
FAIL_CODE = re.compile(r"^  (PZ0[1-7]\d\d): \S")
ERRORISH = re.compile(r"^\s*(error|fatal|panic)\b|^\s*\w*(Error|Exception):", re.IGNORECASE)
# every line `pz validate` / `pz run` print in text mode (reference section 8); anything else is a message's
# second line leaking (a multi-line driver error) or output that is not pz's own
LINE_GRAMMAR = re.compile(
    r"^((ok|FAIL|WARN|SKIP|CANCEL|RETRY|BREAKER) \S|(note|warning|error): |  next: |  PZ0[1-7]\d\d: |"
    r"\d+ (errors?|warnings?)(, \d+ warnings?)?$|ok: project is valid|$)"
)
TRACEBACK = re.compile(
    r"Traceback \(most recent call last\)|^Exception (in thread|ignored in)|"
    r'^\s*File ".*", line \d+|panicked at|RUST_BACKTRACE',
    re.MULTILINE,
)
VIOLATIONS = (
    "PZ0512 internal error",
    "traceback / panic text",
    "bad exit code",
    "error without PZ code",
    "stray output line",
    "unregistered PZ code",
    "exit code without error",
    "timeout",
    "crash (process died)",
    "project file overwritten",
    "secret sent to another origin",
)


def _registered() -> frozenset[str]:
    from pipelinez.core.codes import REGISTRY

    return frozenset(c.code for c in REGISTRY if not c.retired)


def check_command(result: CommandResult) -> tuple[list[str], list[tuple[str, str]]]:
    """The PZ codes a command printed for errors, and every invariant it broke."""
    if result.exit_code is None:
        kind = "timeout" if result.abnormal.startswith("no answer") else "crash (process died)"
        return [], [(kind, f"{result.command}: {result.abnormal}")]
    bad: list[tuple[str, str]] = []
    json_mode = "--log-format" in result.args and "json" in result.args
    codes, errors_seen, fails_seen = (
        _json_lines(result, bad) if json_mode else _text_lines(_lines(result.output), bad)
    )
    if not json_mode and result.command.split()[:1] in (["validate"], ["run"]):
        stray = [line for line in _lines(result.output) if not LINE_GRAMMAR.match(line)]
        if stray and not any(d.startswith(stray[0][:100]) for _, d in bad):
            bad.append(("stray output line", f"{result.command.split()[0]}: {stray[0][:200]}"))
    if "PZ0512" in result.output:
        cause = _crash_cause(result.crash_log) or _first(result.output, "PZ0512")
        bad.append(("PZ0512 internal error", cause))
    tb = TRACEBACK.search(result.output)
    if tb:
        bad.append(("traceback / panic text", _line_at(result.output, tb.start())))
    if result.exit_code not in (0, 1, 2):
        bad.append(("bad exit code", f"{result.command}: exit {result.exit_code}"))
    if result.exit_code == 2 and not errors_seen:
        bad.append(("exit code without error", f"{result.command}: exit 2 without an error line"))
    if result.exit_code == 1 and not (errors_seen or fails_seen):
        bad.append(("exit code without error", f"{result.command}: exit 1 without a FAIL or error line"))
    registered = _registered()
    for code in codes:
        if code not in registered:
            bad.append(("unregistered PZ code", f"{result.command}: {code}"))
    return codes, bad


def _text_lines(lines: list[str], bad: list[tuple[str, str]]) -> tuple[list[str], bool, bool]:
    codes: list[str] = []
    errors_seen = fails_seen = False
    for i, line in enumerate(lines):
        if m := ERROR_LINE.match(line):
            codes.append(m.group(1))
            errors_seen = True
        elif FAIL_LINE.match(line):
            fails_seen = True
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if m := FAIL_CODE.match(nxt):
                codes.append(m.group(1))
            else:
                bad.append(("error without PZ code", f"{line[:160]} / next line: {nxt[:160]!r}"))
        elif _uncoded(line):
            bad.append(("error without PZ code", line[:200]))
    return codes, errors_seen, fails_seen


def _uncoded(line: str) -> bool:
    """A warning or error-looking line that is not in the `warning: PZ0xxx` / `error: PZ0xxx` form."""
    if line.startswith("warning:"):
        return not WARNING_LINE.match(line)
    return bool(ERRORISH.match(line)) and not line.startswith(("  next:", "  PZ"))


def _json_lines(result: CommandResult, bad: list[tuple[str, str]]) -> tuple[list[str], bool, bool]:
    codes: list[str] = []
    errors_seen = fails_seen = False
    for line in _lines(result.output):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            bad.append(("error without PZ code", f"not JSON under --log-format json: {line[:200]}"))
            continue
        if not isinstance(event, dict):
            bad.append(("error without PZ code", f"not a JSON object: {line[:200]}"))
            continue
        if event.get("event") == "error":
            code = str(event.get("code", ""))
            if re.fullmatch(r"PZ0[1-7]\d\d", code):
                codes.append(code)
                errors_seen = True
            else:
                bad.append(("error without PZ code", line[:200]))
        elif event.get("event") == "node_completed" and event.get("status") == "failed":
            fails_seen = True
            code = str((event.get("error") or {}).get("code", ""))
            if re.fullmatch(r"PZ0[1-7]\d\d", code):
                codes.append(code)
            else:
                bad.append(("error without PZ code", line[:200]))
    return codes, errors_seen, fails_seen


def _crash_cause(log: str) -> str:
    """`Exception: message (at pipelinez/x.py:123 in f)` from a crash log's traceback, or ''."""
    lines = [line for line in log.splitlines() if line.strip()]
    if not lines:
        return ""
    frames = re.findall(r'File ".*?(pipelinez/[^"]+)", line (\d+), in (\S+)', log)
    where = f" (at {frames[-1][0]}:{frames[-1][1]} in {frames[-1][2]})" if frames else ""
    return lines[-1][:200] + where


def _lines(text: str) -> list[str]:
    """Lines as a terminal shows them: split at newlines only (splitlines also splits at \\v, \\f)."""
    return [line.rstrip("\r") for line in text.split("\n")]


def _first(text: str, needle: str) -> str:
    return next((line for line in _lines(text) if needle in line), needle)[:240]


def _line_at(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start : end if end >= 0 else len(text)][:240]


def classify(results: list[CommandResult]) -> Outcome:
    codes: list[str] = []
    violations: list[tuple[str, str]] = []
    for r in results:
        c, v = check_command(r)
        codes += c
        violations += v
    last = results[-1]
    if violations:
        kind = "violation"
    elif last.exit_code == 0:
        kind = "ok"
    elif last.exit_code == 1:
        kind = "failed"
    else:
        kind = "refused"
    return Outcome(kind, codes, violations, results)


# --- running a case ---------------------------------------------------------------------------------------


def run_case(case: Case, worker: Worker, workdir: Path, timeout: float) -> Outcome:
    """Materialize `case` under `workdir/project` (emptied first) and run its commands in `worker` (the
    first one as a process of its own when the case sends a signal)."""
    shutil.rmtree(workdir, ignore_errors=True)
    project = workdir / "project"
    results: list[CommandResult] = []
    extra: list[tuple[str, str]] = []
    uses = placeholders(case.tree) | (placeholders(case.prelude) if case.prelude is not None else set())
    api, number = (_http_api(), next(_CASE_NUMBERS)) if "__FZ_HTTP__" in uses else (None, 0)
    base = api.base(number) if api is not None else ""
    if case.prelude is not None:
        materialize(project, case.prelude, base)
        before = snapshot(project)
        results.append(worker.call(workdir, ["run"], case.env, timeout))
        extra += overwritten(project, before, "run (prelude)")
        clear_project(project)
    materialize(project, case.tree, base)
    before = snapshot(project)
    if case.signal is not None:
        code, output, abnormal = run_signalled(
            workdir, case.first, case.env, case.signal, worker.home, timeout
        )
        first = CommandResult(case.first, code, output, abnormal)
    else:
        first = worker.call(workdir, case.first, case.env, timeout)
    results.append(first)
    extra += overwritten(project, before, " ".join(case.first))
    if case.then is not None and (first.exit_code == 0 or (case.force_then and first.exit_code is not None)):
        results.append(worker.call(workdir, case.then, case.env, timeout))
        extra += overwritten(project, before, " ".join(case.then))
    if api is not None:
        extra += [("secret sent to another origin", leak) for leak in api.leaked(number)]
        api.forget(number)
    for r in results:
        if m := CRASH_LOG.search(r.output):
            with contextlib.suppress(OSError):
                r.crash_log = Path(m.group(1)).read_text(errors="replace")[-6000:]
    outcome = classify(results)
    if extra:
        outcome.violations += list(dict.fromkeys(extra))
        outcome.kind = "violation"
    return outcome


def _http_api() -> Any:
    from tests.fuzz.misbehaving_http import api

    return api()


_CASE_NUMBERS = itertools.count(1)


CRASH_LOG = re.compile(r"PZ0512 .*please report it with (\S+)")
