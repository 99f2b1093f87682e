"""A cheap regression guard for start-up and fixed costs (issue 22), counted, not timed: for `pz --version`,
`pz --help`, and `pz validate` and `pz run` of a small project, the number of `pipelinez` modules the process
imports and the number of DuckDB statements it issues (calls of `execute`, `executemany`, `sql` and `query` on
a DuckDB connection or cursor, from any thread, seen by a profile hook on C calls: no seam in pz's own code).
Each command runs in a fresh Python process, as `pz` does. A `pz validate` answered from the validate cache
has its own budget (REPLAY_MODULES) and imports neither DuckDB, jsonschema, ruamel, Jinja, the compiler nor
the connector SDK; a second `pz run` of the unchanged project (a delta run) has its own (WARM_RUN) and imports
no YAML parser.

The test fails when a change makes a command import more pz modules or run more statements than its budget.
To update a budget after a deliberate change: run
`PYTHONPATH=$PWD .venv/bin/python -m pytest tests/functional/test_startup_budget.py -q`, read the counts the
failure message prints, and write them into BUDGETS below with a word in the commit on why they grew (a
command that now imports the engine for `--version`, or a query per node, is the kind of growth this catches).
A count below its budget passes; lower the budget in the same change so the guard stays tight.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipelinez.cli.main import cli
from tests.conftest import SMALL, write_project
from tests.duckdb_counts import PROBE_SOURCE

# command → (pipelinez modules imported, DuckDB statements executed), upper bounds. Before issue 22's start-up
# work (a2e81e6): --version 30/0, --help 30/0, validate 148/11, run 179/35.
BUDGETS: dict[str, tuple[int, int]] = {
    "--version": (8, 0),  # the command modules are imported on first use (cli/lazy_group.py)
    "--help": (33, 0),  # every command's module, not the engine (cli.common.utc_now imports it late);
    # 28 -> 33 with `pz state` and `pz import` registered lazily beside the others
    # validate 145 -> 164, run 176 -> 196: the shared state seam (core.state, compile.state_block,
    # engine.state.shared/lease/mirror), the re-validation caches (compile.bind_cache, check_binds,
    # engine.run.validate_cache, folder_key), the facade split into pipelinez.api.results/functions
    # validate 164 -> 167, run 196 -> 199: the per-file re-validation caches (config.parse_cache,
    # compile.render_cache, core.signed_cache)
    # validate 164 -> 162, run 196 -> 195: tier 5's connectivity module imported only with --connect, and
    # config.shape_memo added (schema checks remembered by content: no jsonschema for unchanged files)
    # together: validate 165, run 198
    # validate 165 -> 167 / 11 -> 12 statements, run 198 -> 200 / 35 -> 39: core.memory_budget (one budget
    # split between the DuckDB instances open at once: a `SET memory_limit` whenever the split changes, e.g.
    # the quickstart's DuckDB sink file opening beside staging and closing again), with the last merges of
    # issues 22/23 (the binder's and the lease fence's modules)
    # validate 167 -> 168: core.installed (what is installed, read for the cache keys without
    # importlib.metadata)
    # validate 168 -> 156 (issue 22, edit lane): the facade imports neither the planner (plan.*: 4) nor the
    # engine that runs (engine.run.workflow, engine.events, engine.run.failures, engine.state.shared and
    # run_results, core.stop_signals, ...) for a validate; + 1 (coldval lane, and run 197 -> 198):
    # config.yaml_fast (plain YAML composed by libyaml, positions kept); + 1 (edit2 lane, run + 1):
    # config.yaml_doc (YamlDoc apart from the parser: a validate whose YAML all comes from the parse cache
    # imports no ruamel.yaml); + 1 (edit3 lane, run + 1): core.once (a cached property without
    # functools.cached_property's per-access lock, asked ~6,000 times a compile at 2,000 pipelines);
    # - 5 (edit3 lane): the localfiles connector imports its read side (files.reading, csvformat,
    # netfail, jsonread, jsondepth) on the first read, not for tier 3's static rules and targets; - 4 (edit3
    # lane, run - 4): the watermark() SQL analysis (compile.watermark_sql, _tree, _walk, _outcomes) imported
    # only for a project whose pipelines call watermark()
    "validate": (150, 12),
    # run 200 -> 196 (issue 22, delta lane): a local run imports neither the shared staging (and with it the
    # object-store kit) nor, reading only, the postgres connector's sink side and universal reader; + 1 for
    # core.installed; + 1 for core.once; - 4 without watermark() calls (edit3 lane, as validate)
    # run 38 -> 34 statements (issue 22, csv3 lane): a CSV source whose `columns:` contract decides its schema
    # opens no DuckDB instance of the connector's own (two fewer, each a progress-bar and memory SET); with
    # edit3's core.once + 1 and watermark() - 4: 196 (csv3's write-behind thread, + 1 module, reverted after
    # review: closing its descriptor dropped DuckDB's POSIX lock on the staging file)
    "run": (196, 34),
}
# `pz --version` through the console script (cli/entry.py answers it before click is imported)
CONSOLE_VERSION_MODULES = 6

PROBE = (
    "import json, sys, threading\n"
    + PROBE_SOURCE
    + """
counts = {"statements": 0}

def hook(frame, event, arg):
    if is_duckdb_statement(event, arg):
        counts["statements"] += 1

sys.argv = ["pz", *json.loads(sys.argv[1])]
sys.setprofile(hook)
threading.setprofile(hook)
from pipelinez.cli.main import main
try:
    main()
except SystemExit as done:
    code = done.code
sys.setprofile(None)
threading.setprofile(None)
modules = sorted(m for m, mod in sys.modules.items() if m.split(".")[0] == "pipelinez" and mod is not None)
HEAVY = {"duckdb", "jsonschema", "ruamel", "jinja2", "importlib.metadata", "pyarrow"}
heavy = sorted(HEAVY & {m for m, mod in sys.modules.items() if mod})
found = {"code": code, "modules": modules, "statements": counts["statements"], "heavy": heavy}
print("COUNTS " + json.dumps(found))
"""
)


def counts(args: list[str], cwd: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)], capture_output=True, text=True, cwd=cwd, timeout=300
    )
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("COUNTS ")), None)
    assert line is not None, done.stdout + done.stderr
    result: dict[str, object] = json.loads(line.removeprefix("COUNTS "))
    return result


@pytest.mark.parametrize("command", list(BUDGETS))
def test_a_command_stays_within_its_import_and_query_budget(tmp_path: Path, command: str) -> None:
    project = write_project(tmp_path / "shop", SMALL)
    args = [command] if command.startswith("--") else ["-p", str(project), command]
    got = counts(args, tmp_path)
    assert got["code"] == 0, got
    modules = got["modules"]
    assert isinstance(modules, list)
    max_modules, max_statements = BUDGETS[command]
    found = (len(modules), got["statements"])
    print(f"pz {command}: {found[0]} pipelinez modules, {found[1]} DuckDB statements")
    assert len(modules) <= max_modules and got["statements"] <= max_statements, (
        f"pz {command} now imports {found[0]} pipelinez modules (budget {max_modules}) and executes "
        f"{found[1]} DuckDB statements (budget {max_statements}); if the growth is deliberate, update "
        f"BUDGETS in this file (see its docstring). Modules: {modules}"
    )


# `pz validate` of an unchanged project, answered from .pz/target/validate.json (engine.run.validate_cache)
# 36 + core.signed_cache (validate_cache reads its key through it) + core.installed (the installed
# distributions, read without importlib.metadata)
REPLAY_MODULES = 38


def test_a_replayed_validate_imports_neither_the_compiler_nor_duckdb_nor_jsonschema(tmp_path: Path) -> None:
    project = write_project(tmp_path / "shop", SMALL)
    args = json.dumps(["-p", str(project), "validate"])
    first = subprocess.run([sys.executable, "-c", PROBE, args], capture_output=True, text=True, cwd=tmp_path)
    assert "COUNTS " in first.stdout, first.stdout + first.stderr
    done = subprocess.run(
        [sys.executable, "-c", PROBE, args], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("COUNTS ")), None)
    assert line is not None, done.stdout + done.stderr
    got = json.loads(line.removeprefix("COUNTS "))
    assert got["code"] == 0 and got["statements"] == 0, got
    modules = got["modules"]
    # of HEAVY: duckdb, jsonschema, ruamel, jinja2, importlib.metadata (the key reads what is installed
    # without it), pyarrow
    assert got["heavy"] == [], got["heavy"]
    assert not [
        m for m in modules if m.startswith(("pipelinez.compile.compiler", "pipelinez.connectors.sdk"))
    ]
    assert len(modules) <= REPLAY_MODULES, (
        f"a replayed `pz validate` imports {len(modules)} pipelinez modules (budget {REPLAY_MODULES}; "
        f"see the docstring to update it): {modules}"
    )


def test_a_native_csv_run_imports_no_pyarrow(tmp_path: Path) -> None:
    """A local CSV read natively (DuckDB's read_csv into staging, Parquet written by DuckDB's COPY) needs no
    pyarrow: its header row is read by Python itself (~40 ms of import a run saved)."""
    project = write_project(tmp_path / "shop", SMALL)
    got = counts(["-p", str(project), "run"], tmp_path)
    assert got["code"] == 0, got
    heavy = got["heavy"]
    assert isinstance(heavy, list) and "pyarrow" not in heavy, heavy


def test_the_console_script_answers_version_without_importing_click(tmp_path: Path) -> None:
    entry = "from pipelinez.cli.entry import main; main()"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", entry, "--version"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == CliRunner().invoke(cli, ["--version"]).output  # word for word what click prints
    imported = {ln.rsplit("|", 1)[-1].strip() for ln in done.stderr.splitlines() if ln.startswith("import ")}
    assert "click" not in imported
    ours = sorted(m for m in imported if m.split(".")[0] == "pipelinez")
    assert len(ours) <= CONSOLE_VERSION_MODULES, (
        f"the console script's `pz --version` imports {len(ours)} pipelinez modules (budget "
        f"{CONSOLE_VERSION_MODULES}; see the docstring to update it): {ours}"
    )


def test_importing_the_facade_imports_neither_jsonschema_nor_duckdb() -> None:
    """Each is imported when first used (a file's shape checked, a query bound), so a command that needs
    neither, or a validation answered from a cache, does not pay for them (about 0.2 s of CPU together)."""
    probe = "import sys, pipelinez.api; print(sorted({'jsonschema', 'duckdb'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# `pz run` again of the unchanged project (modules, statements): its YAML comes from the parse cache
# (.pz/target/parsed.json), its schema checks from the shape memo (issue 22, lane delta3: 199 -> 197 without
# config.yaml_loader and config.yaml_fast, and ruamel.yaml with them; with csv3 and edit3 merged: 194 / 28)
WARM_RUN: tuple[int, int] = (194, 28)


def test_a_run_of_an_unchanged_project_imports_no_yaml_parser(tmp_path: Path) -> None:
    """The second run's YAML files all come from the parse cache: neither ruamel.yaml nor pz's YAML
    loader is imported (the state backend's check of project.yml imports the loader only when the file
    may declare a `state:` block)."""
    project = write_project(tmp_path / "shop", SMALL)
    args = ["-p", str(project), "run"]
    assert counts(args, tmp_path)["code"] == 0
    got = counts(args, tmp_path)
    assert got["code"] == 0, got
    modules = got["modules"]
    assert isinstance(modules, list) and isinstance(got["heavy"], list)
    assert "ruamel" not in got["heavy"], got["heavy"]
    assert "pipelinez.config.yaml_loader" not in modules
    found = (len(modules), got["statements"])
    print(f"pz run (unchanged project): {found[0]} pipelinez modules, {found[1]} DuckDB statements")
    assert found[0] <= WARM_RUN[0] and found[1] <= WARM_RUN[1], (
        f"a second `pz run` now imports {found[0]} pipelinez modules and executes {found[1]} DuckDB "
        f"statements (budget {WARM_RUN}; see the docstring to update it). Modules: {modules}"
    )
