"""No command of a local project imports an optional or heavy package it does not need: pandas (DuckDB's
Python client tries it on every parameter bind), polars, numpy, Ray, the database drivers, the object-store
SDKs, sqlglot (only `pz docs` lineage) or a browser driver. Each command runs in a fresh Python process, as
`pz` does, and its `sys.modules` is read at the end: an entry that is None is a recorded absence, not an
import."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
NOT_ON_ANY_LOCAL_PATH = (
    "pandas",
    "polars",
    "numpy",
    "ray",
    "psycopg",
    "adbc_driver_postgresql",
    "adbc_driver_manager",
    "connectorx",
    "boto3",
    "azure",
    "sqlglot",
    "playwright",
)
PROBE = """
import json, sys
sys.argv = ["pz", *json.loads(sys.argv[1])]
from pipelinez.cli.main import main
try:
    main()
except SystemExit:
    pass
loaded = sorted({name.split(".")[0] for name, mod in sys.modules.items() if mod is not None})
print("LOADED " + json.dumps(loaded))
"""


@pytest.mark.parametrize("command", [["--version"], ["validate"], ["plan"], ["run", "--quiet"]])
def test_a_local_command_imports_no_optional_package(tmp_path: Path, command: list[str]) -> None:
    project = tmp_path / "quickstart"
    shutil.copytree(QUICKSTART, project, ignore=shutil.ignore_patterns(".pz", "out", "*.duckdb"))
    args = command if command == ["--version"] else [*command, "-p", str(project)]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)], capture_output=True, text=True, cwd=tmp_path
    )
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("LOADED "))
    loaded = set(json.loads(line.removeprefix("LOADED ")))
    assert "pipelinez" in loaded
    assert loaded.isdisjoint(NOT_ON_ANY_LOCAL_PATH), sorted(loaded & set(NOT_ON_ANY_LOCAL_PATH))


def test_an_absent_pandas_is_recorded_once_so_duckdb_stops_searching_for_it() -> None:
    probe = """
import importlib.util, sys
from pipelinez.core.duck_connect import connect
con = connect()
con.execute("SELECT ?::INTEGER", [1]).fetchone()
installed = importlib.util.find_spec("pandas") is not None
print("INSTALLED" if installed else repr(sys.modules.get("pandas", "unset")))
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() in ("None", "INSTALLED")
    if done.stdout.strip() == "None":  # an import attempt now fails at once, as before, without a search
        attempt = (
            "import sys; sys.modules['pandas'] = None\n"
            "try:\n import pandas\nexcept ImportError: print('refused')"
        )
        assert (
            subprocess.run([sys.executable, "-c", attempt], capture_output=True, text=True).stdout
            == "refused\n"
        )
