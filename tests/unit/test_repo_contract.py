"""The repository's promises: README's two commands, .ci/run calls the test command, quickstart is current."""

from __future__ import annotations

import re
from pathlib import Path

from pipelinez.scaffold.quickstart import FILES

ROOT = Path(__file__).parents[2]


def _readme_commands() -> list[str]:
    return re.findall(r"```bash\n(.+?)\n```", (ROOT / "README.md").read_text(), flags=re.S)[:2]


def test_readme_starts_with_quickstart_and_test_commands() -> None:
    quickstart, tests = _readme_commands()
    assert "pz run -p examples/quickstart" in quickstart and "pip install" in quickstart
    assert "pytest" in tests and "pip install" in tests and "[dev]" in tests


def test_ci_runs_the_readme_test_command() -> None:
    assert _readme_commands()[1] in (ROOT / ".ci" / "run").read_text()


def test_examples_quickstart_is_what_pz_init_writes() -> None:
    for rel, text in FILES.items():
        assert (ROOT / "examples" / "quickstart" / rel).read_text(encoding="utf-8") == text, rel
