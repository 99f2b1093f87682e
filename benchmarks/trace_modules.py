"""Which pz modules one command touches: runs `pz <command>` of a project in a fresh Python process and
prints the `pipelinez` modules that process imported, and those in which at least one function ran (a
profile hook on every thread). Issue 21 compares them before and after the house's second pass.

    .venv/bin/python benchmarks/trace_modules.py                      # one CSV dataset → pipeline → DuckDB
    .venv/bin/python benchmarks/trace_modules.py --project examples/quickstart --command validate
    PYTHONPATH=/tmp/old .venv/bin/python benchmarks/trace_modules.py  # an older tree, from a neutral folder

The default project is the path of one source dataset: `data/orders.csv` read by a localfiles source, one
pipeline, one DuckDB sink.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

PROBE = """
import json, sys, threading
args = json.loads(sys.argv[1])
seen = set()
def hook(frame, event, arg):
    if event == "call" and frame.f_code.co_name != "<module>":  # a function ran, not an import
        name = frame.f_globals.get("__name__", "")
        if name.startswith("pipelinez"):
            seen.add(name)
if args[0] == "--api-run":  # Project.plan() untraced, then Project.run() traced: the run given its plan
    from pipelinez.api import Project
    project = Project(args[2])
    project.plan()
    sys.setprofile(hook)
    threading.setprofile(hook)
    project.run()
else:
    sys.setprofile(hook)
    threading.setprofile(hook)
    sys.argv = ["pz", *args]
    from pipelinez.cli.main import main
    try:
        main()
    except SystemExit:
        pass
sys.setprofile(None)
imported = sorted(m for m in sys.modules if m.startswith("pipelinez") and sys.modules[m] is not None)
print("RESULT " + json.dumps({"imported": imported, "executed": sorted(seen)}))
"""

ONE_DATASET = {
    "project.yml": "name: trace\n",
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          orders: { format: csv, path: orders.csv, columns: { id: bigint, amount: double } }
    """,
    "sinks/warehouse.yml": "connector: duckdb\nconnection: { path: warehouse.duckdb }\n",
    "pipelines/orders_total.sql": """
        INSERT INTO {{ sink('warehouse', 'orders_total') }}
        SELECT id, amount FROM {{ source('files', 'orders') }}
    """,
    "data/orders.csv": "id,amount\n1,10.5\n2,20\n",
}


def _modules(names: list[str]) -> list[str]:
    """Modules, not packages: a package's `__init__` counts only when code in it ran (executed list)."""
    return [n for n in names if n != "pipelinez"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--project", type=Path, help="a project to copy (default: one CSV dataset)")
    ap.add_argument(
        "--command", default="run", help="a pz command, or --api-run: Project.plan() then a traced run()"
    )
    ap.add_argument("--list", action="store_true", help="print the modules, not only the counts")
    ns = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proj = Path(tmp) / "p"
        if ns.project:
            shutil.copytree(ns.project, proj, ignore=shutil.ignore_patterns(".pz", "out", "*.duckdb"))
        else:
            for rel, text in ONE_DATASET.items():
                (proj / rel).parent.mkdir(parents=True, exist_ok=True)
                (proj / rel).write_text(textwrap.dedent(text).lstrip())
        args = [*ns.command.split(), "-p", str(proj)]
        out = subprocess.run(
            [sys.executable, "-c", PROBE, json.dumps(args)], capture_output=True, text=True, cwd=tmp
        )
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(out.stdout[-2000:] + out.stderr[-2000:])
    found = json.loads(line.removeprefix("RESULT "))
    executed = _modules(found["executed"])
    imported = _modules(found["imported"])
    print(f"pz {ns.command}: {len(imported)} pz modules imported, {len(executed)} ran a function")
    if ns.list:
        print("\n".join(executed))


if __name__ == "__main__":
    main()
