"""`pz restore`: pinned connector packages installed into the running environment (offline, from a folder
of wheels), pz.lock written and read back (PZ0232), exactly the locked versions installed, URL pins checked
against where a package was installed from (PEP 610), failures as PZ07xx with URL credentials masked.

Every test installs into its own throwaway virtual environment (`isolated`), which sees the test
environment's packages through a .pth file but installs into its own site-packages: tests running in
parallel never install into, or uninstall from, the shared environment.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from tests.conftest import PzResult, pz, write_project
from tests.wheels import build_wheel

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "connectors" / "pz-numbers"
PACKAGE = "pz-numbers"
CREDENTIAL = "pz-sekrit-t0ken"


@dataclass
class Env:
    python: Path

    def pz(self, project: Path, *args: str) -> PzResult:
        proc = subprocess.run(
            [str(self.python), "-m", "pipelinez.cli.main", "-p", str(project), *args],
            capture_output=True,
            text=True,
            timeout=300,
        )
        return PzResult(proc.returncode, proc.stdout + proc.stderr, project)

    def pip(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.python), "-m", "pip", "--disable-pip-version-check", *args],
            capture_output=True,
            text=True,
            timeout=300,
        )


@pytest.fixture
def isolated(tmp_path: Path) -> Env:
    """A virtual environment of its own that also sees this one's packages (pipelinez, pip, pyarrow…)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site_packages = next(venv.glob("lib/python*/site-packages"))
    shared = sysconfig.get_paths()["purelib"]
    (site_packages / "zz_pz_shared.pth").write_text(f"import site; site.addsitedir({shared!r})\n")
    return Env(venv / "bin" / "python")


def wheel_of(version: str, tmp_path: Path, folder: Path) -> Path:
    """The example package's wheel, at `version`, built into `folder`."""
    src = tmp_path / f"src-{version}"
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("__pycache__"))
    pyproject = src / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('version = "0.1.0"', f'version = "{version}"'))
    return build_wheel(src, folder)


def project(root: Path, pins: str) -> Path:
    return write_project(
        root,
        {
            "project.yml": f"name: gen\nconnectors:\n{pins}" if pins else "name: gen\n",
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


def lock_of(root: Path) -> dict[str, dict[str, str]]:
    return {c["name"]: c for c in json.loads((root / "pz.lock").read_text())["connectors"]}


def test_restore_installs_the_pinned_package_writes_the_lock_and_the_project_runs(
    tmp_path: Path, isolated: Env
) -> None:
    wheels = tmp_path / "wheels"
    build_wheel(EXAMPLE, wheels)
    root = project(tmp_path / "p", '  numbers: ">=0.1,<0.2"\n  duckdb: ">=0.1"\n')
    before = isolated.pz(root, "validate")
    assert before.exit_code == 2
    assert "PZ0215 project.yml:3:3: connectors: pins 'numbers', which is not installed" in before.output
    assert "run `pz restore` to install it" in before.output

    result = isolated.pz(root, "restore", "--no-index", "--find-links", str(wheels))
    assert result.exit_code == 0, result.output
    assert "installed pz-numbers<0.2,>=0.1" in result.output
    assert "ok numbers 0.1.0 pz-numbers from find-links" in result.output
    by_name = lock_of(root)
    assert by_name["numbers"] == {
        "name": "numbers",
        "package": "pz-numbers",
        "version": "0.1.0",
        "source": f"find-links {wheels}",
        "pin": ">=0.1,<0.2",
    }
    assert by_name["duckdb"]["source"] == "builtin" and by_name["duckdb"]["package"] == "pipelinez"

    run = isolated.pz(root, "run")
    assert run.exit_code == 0, run.output
    assert "ok src_gen__thousand 1000 rows" in run.output
    with duckdb.connect(str(root / "wh.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*), max(square) FROM squares").fetchone() == (1000, 1_000_000)

    again = isolated.pz(root, "restore", "--no-index", "--find-links", str(wheels), "--log-format", "json")
    assert again.exit_code == 0, again.output
    event = json.loads(again.lines[-1])
    assert event["event"] == "restore" and event["installed"] == []  # satisfied: pip is not called

    # a pin naming a package that provides no such connector is PZ0705 (pz-numbers provides 'numbers')
    wrong = project(tmp_path / "w", '  counter: "pz-numbers>=0.1"\n')
    refused = isolated.pz(wrong, "restore", "--no-index", "--find-links", str(wheels))
    assert refused.exit_code == 2
    assert (
        "error: PZ0705 project.yml:3:3: connectors: installed pz-numbers>=0.1 for 'counter', "
        "but it provides numbers" in refused.output
    )


def test_the_lock_is_read_back_and_restore_installs_exactly_the_locked_version(
    tmp_path: Path, isolated: Env
) -> None:
    wheels = tmp_path / "wheels"
    wheel_of("0.1.0", tmp_path, wheels)
    root = project(tmp_path / "p", '  numbers: ">=0.1,<0.2"\n')
    assert isolated.pz(root, "restore", "--no-index", "--find-links", str(wheels)).exit_code == 0
    assert lock_of(root)["numbers"]["version"] == "0.1.0"
    assert isolated.pz(root, "validate").exit_code == 0

    # a newer version that still satisfies the pin is installed by hand: the lock says otherwise
    wheel_of("0.1.1", tmp_path, wheels)
    assert (
        isolated.pip("install", "--no-index", "--find-links", str(wheels), "pz-numbers==0.1.1").returncode
        == 0
    )
    drifted = isolated.pz(root, "validate")
    assert drifted.exit_code == 2, drifted.output
    assert (
        "error: PZ0232 pz.lock:14: connector 'numbers': pz.lock records pz-numbers 0.1.0, installed is "
        "pz-numbers 0.1.1" in drifted.output
    )
    assert "run `pz restore` to install exactly what pz.lock records" in drifted.output

    # restore installs the locked 0.1.0 although 0.1.1 satisfies the pin and is in the folder
    restored = isolated.pz(root, "restore", "--no-index", "--find-links", str(wheels))
    assert restored.exit_code == 0, restored.output
    assert "installed pz-numbers==0.1.0" in restored.output
    assert isolated.pz(root, "validate").exit_code == 0

    # a changed pin: the lock entry no longer applies (PZ0232 says so) and restore resolves the new pin
    (root / "project.yml").write_text('name: gen\nconnectors:\n  numbers: ">=0.1.1"\n')
    changed = isolated.pz(root, "validate")
    assert changed.exit_code == 2
    assert "PZ0220" in changed.output  # 0.1.0 does not satisfy >=0.1.1; the lock is not reported twice
    assert "PZ0232" not in changed.output
    updated = isolated.pz(root, "restore", "--no-index", "--find-links", str(wheels))
    assert updated.exit_code == 0, updated.output
    assert lock_of(root)["numbers"]["version"] == "0.1.1" and lock_of(root)["numbers"]["pin"] == ">=0.1.1"
    assert isolated.pz(root, "validate").exit_code == 0

    # a third-party connector the project uses but the lock does not record
    lock = json.loads((root / "pz.lock").read_text())
    lock["connectors"] = [c for c in lock["connectors"] if c["name"] != "numbers"]
    (root / "pz.lock").write_text(json.dumps(lock))
    (root / "project.yml").write_text("name: gen\n")
    missing = isolated.pz(root, "validate")
    assert missing.exit_code == 2
    assert (
        "PZ0232 pz.lock: connector 'numbers': pz.lock does not record it (installed: pz-numbers 0.1.1)"
        in missing.output
    )


def test_a_url_pin_is_satisfied_only_by_a_package_installed_from_that_url(
    tmp_path: Path, isolated: Env
) -> None:
    wheels = tmp_path / "wheels"
    wheel = wheel_of("0.1.0", tmp_path, wheels)
    assert isolated.pip("install", "--no-index", "--find-links", str(wheels), PACKAGE).returncode == 0
    root = project(tmp_path / "p", f'  numbers: "pz-numbers @ {wheel.as_uri()}"\n')
    refused = isolated.pz(root, "validate")
    assert refused.exit_code == 2
    assert (
        "PZ0220 project.yml:3:3: connector 'numbers' 0.1.0 (pz-numbers, installed from a package index or "
        "folder, not from the pin's URL) does not satisfy the pin" in refused.output
    )
    restored = isolated.pz(root, "restore", "--no-index")
    assert restored.exit_code == 0, restored.output
    assert f"installed pz-numbers @ {wheel.as_uri()}" in restored.output
    assert lock_of(root)["numbers"]["source"] == wheel.as_uri()
    assert isolated.pz(root, "validate").exit_code == 0

    # the same version from another URL is not what the lock (or the pin) records
    other = tmp_path / "other"
    moved = wheel_of("0.1.0", tmp_path / "again", other)
    (root / "project.yml").write_text(f'name: gen\nconnectors:\n  numbers: "pz-numbers @ {moved.as_uri()}"\n')
    moved_pin = isolated.pz(root, "validate")
    assert moved_pin.exit_code == 2
    assert f"installed from {wheel.as_uri()}) does not satisfy the pin" in moved_pin.output


def test_restore_refusals_are_pz07xx_and_reported_together(tmp_path: Path) -> None:
    root = project(tmp_path / "p", '  duckdb: ">=9"\n  localfiles: ">=9"\n  numbers: "=>1"\n')
    result = pz(root, "restore", "--no-index")
    assert result.exit_code == 2
    assert "PZ0116 project.yml:5:3: connectors: pin '=>1' for 'numbers'" in result.output
    refused = pz(project(tmp_path / "q", '  duckdb: ">=9"\n  localfiles: ">=9"\n'), "restore", "--no-index")
    assert refused.exit_code == 2
    lines = [line for line in refused.lines if line.startswith("error:")]
    assert lines[:2] == [
        f"error: PZ0704 project.yml:{line}:3: connectors: '{name}' is a builtin of pipelinez 0.1.0, "
        "which does not satisfy the pin '>=9'"
        for line, name in ((3, "duckdb"), (4, "localfiles"))
    ]
    assert not (tmp_path / "q" / "pz.lock").exists()


def test_an_unpinned_connector_that_is_not_installed_is_an_error_not_ok(tmp_path: Path) -> None:
    root = project(tmp_path / "p", "")
    result = pz(root, "restore", "--no-index")
    assert result.exit_code == 2, result.output
    assert "ok numbers" not in result.output
    assert (
        "error: PZ0215 sources/gen.yml:1:1: source file sources/gen.yml uses connector 'numbers', which is "
        "not installed, not pinned in project.yml and not recorded in pz.lock" in result.output
    )
    assert 'connectors: { numbers: ">=<version>" } installs pz-numbers' in result.output
    assert not (root / "pz.lock").exists()


def test_a_package_the_index_does_not_have_is_pz0703_with_pips_words_and_no_credentials(
    tmp_path: Path,
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    root = project(tmp_path / "p", '  numbers: ">=0.1"\n')
    result = pz(root, "restore", "--no-index", "--find-links", str(empty))
    assert result.exit_code == 2
    assert "error: PZ0703 command line" not in result.output
    assert "PZ0703" in result.output and "pip could not install pz-numbers>=0.1" in result.output
    assert "No matching distribution found for pz-numbers" in result.output
    assert not (root / "pz.lock").exists()

    # a URL pin's credentials never show up: not in pz's words, not in pip's it quotes
    url = f"https://pzuser:{CREDENTIAL}@127.0.0.1:9/simple/pz_numbers-0.1.0-py3-none-any.whl"
    secret = project(tmp_path / "s", f'  numbers: "pz-numbers @ {url}"\n')
    check = pz(secret, "validate")
    assert check.exit_code == 2 and CREDENTIAL not in check.output
    refused = pz(secret, "restore", "--no-index", env={"PIP_RETRIES": "0", "PIP_TIMEOUT": "5"})
    assert refused.exit_code == 2
    assert "PZ0703" in refused.output
    assert "pip could not install pz-numbers @ https://***@127.0.0.1:9/simple/" in refused.output
    assert CREDENTIAL not in refused.output and "pzuser" not in refused.output
