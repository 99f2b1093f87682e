"""A validate whose project YAML all comes from the parse cache (`config.parse_cache`) does not import the
YAML parser: `YamlDoc` lives apart from it (`config.yaml_doc`). A changed YAML file is
parsed, and imports it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import write_project
from tests.functional.test_shape_memo import INCREMENTAL

PROBE = """
import json, sys
sys.argv = ["pz", "-p", sys.argv[1], "validate"]
from pipelinez.cli.main import main
try:
    main()
except SystemExit as done:
    code = done.code
print("RESULT " + json.dumps({"code": code, "parser": "ruamel.yaml" in sys.modules}))
"""


def validate_in_a_process(project: Path) -> dict[str, object]:
    command = [sys.executable, "-c", PROBE, str(project)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, done.stdout + done.stderr
    result: dict[str, object] = json.loads(line.removeprefix("RESULT "))
    return result


def test_yaml_from_the_parse_cache_needs_no_parser(tmp_path: Path) -> None:
    project = write_project(tmp_path / "shop", INCREMENTAL)  # incremental: every validate loads and compiles
    assert validate_in_a_process(project) == {"code": 0, "parser": True}  # first: every file parsed
    assert validate_in_a_process(project) == {"code": 0, "parser": False}
    sql = next((project / "pipelines").glob("*.sql"))
    sql.write_text(sql.read_text() + "\n-- an edit\n")
    assert validate_in_a_process(project) == {"code": 0, "parser": False}  # SQL only: no YAML parsed
    source = project / "sources" / "files.yml"
    source.write_text(source.read_text() + "# a comment\n")
    assert validate_in_a_process(project) == {"code": 0, "parser": True}  # another text: parsed again
