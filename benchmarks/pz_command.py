"""The command line every benchmark times for pz: what the `pz` console script runs
(`pipelinez.cli.entry:main`, as pip writes it). A `pz` process leaves with `os._exit` once its output and
files are flushed, so it skips Python's interpreter shutdown (freeing every object of a 2,000-pipeline
compile, DuckDB's teardown): `python -m pipelinez.cli.main` pays that shutdown, which no user waits for. A
tree older than the console-script module (`--before` runs) is run with `python -m pipelinez.cli.main`.
"""

from __future__ import annotations

import sys
from pathlib import Path


def pz_command(tree: Path | None = None) -> list[str]:
    """`[python, ...]` to which a benchmark appends pz's arguments (`-p DIR run`)."""
    if tree is not None and not (tree / "pipelinez" / "cli" / "entry.py").is_file():
        return [sys.executable, "-m", "pipelinez.cli.main"]
    return [sys.executable, "-c", "from pipelinez.cli.entry import main; main()"]
