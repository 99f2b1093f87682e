"""`pz restore`: pinned connector packages installed into the running environment (offline, from a folder
of wheels), pz.lock written, failures as PZ07xx. The example connector package (examples/connectors/
pz-numbers) is installed, used by a real `pz run`, and uninstalled again."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from tests.conftest import pz, pz_subprocess, write_project
from tests.wheels import build_wheel

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "connectors" / "pz-numbers"
PACKAGE = "pz-numbers"


def project(root: Path, pins: str) -> Path:
    return write_project(
        root,
        {
            "project.yml": f"name: gen\nconnectors:\n{pins}",
            "sources/gen.yml": """
                connector: numbers
                datasets:
                  thousand: { count: 1000, batch_rows: 300 }
            """,
            "sinks/wh.yml": "connector: duckdb\nconnection: { path: wh.duckdb }\n",
            "pipelines/squares.sql": """
                INSERT INTO {{ sink('wh', 'squares') }}
                SELECT n, n * n AS square FROM {{ source('gen', 'thousand') }}
            """,
        },
    )


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args], capture_output=True, text=True
    )


@pytest.fixture
def wheels(tmp_path: Path) -> Iterator[Path]:
    """A folder holding the example package's wheel; the package is uninstalled afterwards."""
    folder = tmp_path / "wheels"
    build_wheel(EXAMPLE, folder)
    try:
        yield folder
    finally:
        _pip("uninstall", "-y", PACKAGE)


def test_restore_installs_the_pinned_package_writes_the_lock_and_the_project_runs(
    tmp_path: Path, wheels: Path
) -> None:
    root = project(tmp_path / "p", '  numbers: ">=0.1,<0.2"\n  duckdb: ">=0.1"\n')
    before = pz_subprocess(root, "validate")
    assert before.exit_code == 2
    assert "PZ0215 project.yml:3:3: connectors: pins 'numbers', which is not installed" in before.output
    assert "run `pz restore` to install it" in before.output

    result = pz_subprocess(root, "restore", "--no-index", "--find-links", str(wheels))
    assert result.exit_code == 0, result.output
    assert "installed pz-numbers<0.2,>=0.1" in result.output
    assert "ok numbers 0.1.0 pz-numbers from find-links" in result.output
    lock = json.loads((root / "pz.lock").read_text())
    by_name = {c["name"]: c for c in lock["connectors"]}
    assert by_name["numbers"] == {
        "name": "numbers",
        "package": "pz-numbers",
        "version": "0.1.0",
        "source": f"find-links {wheels}",
        "pin": ">=0.1,<0.2",
    }
    assert by_name["duckdb"]["source"] == "builtin" and by_name["duckdb"]["package"] == "pipelinez"

    run = pz_subprocess(root, "run")
    assert run.exit_code == 0, run.output
    assert "ok src_gen__thousand 1000 rows" in run.output
    with duckdb.connect(str(root / "wh.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*), max(square) FROM squares").fetchone() == (1000, 1_000_000)

    again = pz_subprocess(root, "restore", "--no-index", "--find-links", str(wheels), "--log-format", "json")
    assert again.exit_code == 0, again.output
    event = json.loads(again.lines[-1])
    assert event["event"] == "restore" and event["installed"] == []  # satisfied: pip is not called

    # a pin naming a package that provides no such connector is PZ0705 (pz-numbers provides 'numbers')
    wrong = project(tmp_path / "w", '  counter: "pz-numbers>=0.1"\n')
    refused = pz_subprocess(wrong, "restore", "--no-index", "--find-links", str(wheels))
    assert refused.exit_code == 2
    assert (
        "error: PZ0705 project.yml:3:3: connectors: installed pz-numbers>=0.1 for 'counter', "
        "but it provides numbers" in refused.output
    )


def test_restore_refusals_are_pz07xx_and_reported_together(tmp_path: Path) -> None:
    root = project(tmp_path / "p", '  duckdb: ">=9"\n  localfiles: ">=9"\n  numbers: "=>1"\n')
    result = pz(root, "restore", "--no-index")
    assert result.exit_code == 2
    assert "PZ0116 project.yml:5:3: connectors: pin '=>1' for 'numbers'" in result.output
    refused = pz(project(tmp_path / "q", '  duckdb: ">=9"\n  localfiles: ">=9"\n'), "restore", "--no-index")
    assert refused.exit_code == 2
    lines = [line for line in refused.lines if line.startswith("error:")]
    assert lines == [
        f"error: PZ0704 project.yml:{line}:3: connectors: '{name}' is a builtin of pipelinez 0.1.0, "
        "which does not satisfy the pin '>=9'"
        for line, name in ((3, "duckdb"), (4, "localfiles"))
    ]
    assert not (tmp_path / "q" / "pz.lock").exists()


def test_a_package_the_index_does_not_have_is_pz0703_with_pips_words(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    root = project(tmp_path / "p", '  numbers: ">=0.1"\n')
    result = pz(root, "restore", "--no-index", "--find-links", str(empty))
    assert result.exit_code == 2
    assert "error: PZ0703 command line" not in result.output
    assert "PZ0703" in result.output and "pip could not install pz-numbers>=0.1" in result.output
    assert "No matching distribution found for pz-numbers" in result.output
    assert not (root / "pz.lock").exists()
