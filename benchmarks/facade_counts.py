"""How many compiles and plans each `pz` command costs, and how many modules one tiny `pz run` imports.

Usage: `PYTHONPATH=<checkout> python benchmarks/facade_counts.py` (prints a table). The commands run
in-process through the click CLI on a small localfiles project (two CSV sources, a duckdb and a localfiles
sink); `pz retry` finishes a run whose duckdb write failed at a failpoint. Compiles are calls of
`compile_project`, plans calls of `build_plan` and `plan_named`, counted wherever they are imported.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import textwrap
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROJECT = {
    "project.yml": "name: shop\nengine: { threads: 1 }\n",
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          orders: { format: csv, path: orders.csv }
          customers: { format: csv, path: customers.csv }
    """,
    "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
    "sinks/lake.yml": "connector: localfiles\nconnection: { root: out/lake }\n",
    "data/orders.csv": "id,customer,amount\n1,ada,10.5\n2,grace,20\n",
    "data/customers.csv": "name,country\nada,GB\ngrace,US\n",
    "pipelines/enriched.sql": """
        INSERT INTO {{ sink('lake', 'enriched') }}
        INSERT INTO {{ sink('wh', 'enriched') }}
        SELECT o.id, o.amount, c.country
        FROM {{ source('files', 'orders') }} AS o
        JOIN {{ source('files', 'customers') }} AS c ON c.name = o.customer
    """,
}
COUNTED = ("compile_project", "build_plan", "plan_named")
FAIL = {"PZ_FAILPOINTS": "sink.write@wh.enriched"}


def write(root: Path) -> Path:
    for name, text in PROJECT.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root


def count_calls(calls: Counter[str]) -> None:
    """Replace every counted function, in every loaded pipelinez module, by a counting wrapper."""
    import importlib

    for name in ("pipelinez.api", "pipelinez.cli.main", "pipelinez.engine.run.session"):
        importlib.import_module(name)
    for extra in (
        "pipelinez.engine.workflow",
        "pipelinez.engine.run.workflow",
        "pipelinez.engine.run.prepare",
    ):
        with contextlib.suppress(ImportError):
            importlib.import_module(extra)
    originals: dict[str, Callable[..., Any]] = {}
    for module in list(sys.modules.values()):
        if module is None or not getattr(module, "__name__", "").startswith("pipelinez"):
            continue
        for name in COUNTED:
            fn = getattr(module, name, None)
            if fn is None or not callable(fn):
                continue
            original = originals.setdefault(name, getattr(fn, "__wrapped__", fn))

            def wrapper(*a: Any, _n: str = name, _f: Callable[..., Any] = original, **k: Any) -> Any:
                calls[_n] += 1
                return _f(*a, **k)

            wrapper.__wrapped__ = original  # type: ignore[attr-defined]
            setattr(module, name, wrapper)


def counts() -> list[tuple[str, int, int]]:
    from click.testing import CliRunner

    from pipelinez.cli.main import cli

    calls: Counter[str] = Counter()
    count_calls(calls)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = write(Path(tmp))

        def pz(label: str, *args: str, env: dict[str, str] | None = None, counted: bool = True) -> None:
            calls.clear()
            result = CliRunner().invoke(cli, ["-p", str(root), *args], env=env, catch_exceptions=False)
            if counted:
                plans = calls["build_plan"] + calls["plan_named"]
                rows.append((f"{label} (exit {result.exit_code})", calls["compile_project"], plans))

        pz("pz plan", "plan")
        pz("pz run", "run")
        pz("pz run (failing)", "run", env=FAIL)
        pz("pz retry", "retry")
        pz("pz run (failing)", "run", env=FAIL, counted=False)
        pz("pz retry --full-refresh", "retry", "--full-refresh")
        from pipelinez.api import Project

        calls.clear()
        project = Project(root)
        project.plan()
        project.run()
        rows.append(("Project.plan() then .run()", calls["compile_project"], calls["build_plan"]))
        Project(root).plan()  # the run wrote its outputs into the folder: that compiles again
        calls.clear()
        Project(root).plan()
        rows.append(
            ("Project(...).plan() re-opened, unchanged", calls["compile_project"], calls["build_plan"])
        )
    return rows


def modules_of_a_tiny_run() -> tuple[int, int]:
    """(pipelinez modules, all modules) loaded by one `pz run` of the project, in a fresh interpreter."""
    probe = textwrap.dedent(
        """
        import sys
        from click.testing import CliRunner
        from pipelinez.cli.main import cli
        CliRunner().invoke(cli, ["-p", sys.argv[1], "run"], catch_exceptions=False)
        print(sum(m.startswith("pipelinez") for m in sys.modules), len(sys.modules))
        """
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = write(Path(tmp))
        out = subprocess.run(
            [sys.executable, "-c", probe, str(root)], capture_output=True, text=True, check=True
        )
    ours, everything = out.stdout.split()[-2:]
    return int(ours), int(everything)


def main() -> None:
    print(f"{'command':<45} {'compiles':>8} {'plans':>6}")
    for label, compiles, plans in counts():
        print(f"{label:<45} {compiles:>8} {plans:>6}")
    ours, everything = modules_of_a_tiny_run()
    print(f"\nmodules imported by one tiny `pz run`: {ours} pipelinez.*, {everything} in all")


if __name__ == "__main__":
    main()
