"""Which pz modules one run touches: runs `pz run` of a project (the quickstart by default) in a fresh Python
process and prints the `pipelinez.*` modules that process imported, with their count. Issue 21 compares it
before and after the house's second pass.

    .venv/bin/python benchmarks/trace_modules.py                     # the quickstart, a copy in a tmp dir
    .venv/bin/python benchmarks/trace_modules.py --project DIR --command "retry"
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROBE = """
import sys
sys.argv = ["pz", *{args!r}]
from pipelinez.cli.main import main
try:
    main()
except SystemExit:
    pass
names = sorted(m for m in sys.modules if m == "pipelinez" or m.startswith("pipelinez."))
files = dict((m, getattr(sys.modules[m], "__file__", "") or "") for m in names)
mods = [m for m in names if files[m] and not files[m].endswith("__init__.py")]
print("\\n".join(mods))
print("TOTAL", len(mods), "modules,", len(names), "with packages")
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--project", type=Path, default=HERE.parent / "examples" / "quickstart")
    ap.add_argument("--command", default="run")
    ap.add_argument("--quiet", action="store_true", help="print the totals only")
    ns = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proj = Path(tmp) / "p"
        shutil.copytree(ns.project, proj, ignore=shutil.ignore_patterns(".pz", "out", "*.duckdb"))
        args = [*ns.command.split(), "-p", str(proj)]
        out = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True)
        lines = [ln for ln in out.stdout.splitlines() if ln.startswith("pipelinez") or ln.startswith("TOTAL")]
        print("\n".join(ln for ln in lines if not ns.quiet or ln.startswith("TOTAL")))


if __name__ == "__main__":
    main()
