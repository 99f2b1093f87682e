"""Schema checks remembered by content (`config.shape_memo`): a project file, or a connector block, whose data
passed its JSON Schema before is not checked by jsonschema again; an edit is checked in full, a broken memo
is no memo, and the memo holds no readable content."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pipelinez.config.shape_memo import ShapeMemo
from tests.conftest import SMALL, pz, write_project

# an incremental dataset: the validate cache never answers for it, so every validate loads and compiles
INCREMENTAL = {
    **SMALL,
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          orders:
            format: csv
            path: orders.csv
            columns: { id: bigint }
            sync: { mode: incremental, cursor: id }
    """,
    "sinks/lake.yml": """
        connector: localfiles
        connection: { root: out }
        outputs: { p: { strategy: append, duplicates: accept } }
    """,
}

PROBE = """
import json, sys
watched = sys.argv[2]
sys.argv = ["pz", "-p", sys.argv[1], "validate"]
from pipelinez.cli.main import main
try:
    main()
except SystemExit as done:
    code = done.code
print("RESULT " + json.dumps({"code": code, watched: watched in sys.modules}))
"""


def validate_in_a_process(project: Path, watched: str = "jsonschema") -> dict[str, object]:
    """`pz validate` of `project` in a new process: its exit code, and whether it imported `watched`."""
    command = [sys.executable, "-c", PROBE, str(project), watched]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, done.stdout + done.stderr
    result: dict[str, object] = json.loads(line.removeprefix("RESULT "))
    return result


def test_an_unchanged_project_is_loaded_again_without_jsonschema(tmp_path: Path) -> None:
    project = write_project(tmp_path / "shop", INCREMENTAL)
    assert validate_in_a_process(project) == {"code": 0, "jsonschema": True}  # first: every file checked
    assert not (project / ".pz" / "target" / "validate.json").exists()  # incremental: no validation replay
    assert validate_in_a_process(project) == {"code": 0, "jsonschema": False}
    source = project / "sources" / "files.yml"
    source.write_text(source.read_text() + "# a comment\n")
    assert validate_in_a_process(project) == {"code": 0, "jsonschema": False}  # a comment: the same data
    (project / "sinks" / "lake.yml").write_text("connector: localfiles\nconnection: { root: out2 }\n")
    assert validate_in_a_process(project)["jsonschema"] is True  # changed data is checked again


def test_an_edit_that_breaks_a_remembered_file_is_reported(tmp_path: Path) -> None:
    project = write_project(tmp_path / "shop", INCREMENTAL)
    assert pz(project, "validate").exit_code == 0
    sink = project / "sinks" / "lake.yml"
    sink.write_text("connector: localfiles\nconnection: { root: out, rooot: x }\n")
    result = pz(project, "validate")
    assert result.exit_code == 2 and "PZ0301" in result.output and "rooot" in result.output  # tier 3
    (project / "project.yml").write_text("name: shop\nretention: { keep_last: -1 }\n")
    result = pz(project, "validate")
    assert result.exit_code == 2 and "PZ0103" in result.output and "keep_last" in result.output  # tier 1


def test_a_corrupt_or_foreign_memo_is_no_memo(tmp_path: Path) -> None:
    project = write_project(tmp_path / "shop", INCREMENTAL)
    assert pz(project, "validate").exit_code == 0
    target = project / ".pz" / "target"
    (target / "shapes.json").write_text("{not json")
    entry = json.loads((target / "connector_shapes.json").read_text())
    (target / "connector_shapes.json").write_text(json.dumps({**entry, "key": "another pz"}))
    (project / "sinks" / "lake.yml").write_text("connector: localfiles\nconnection: { root: 5 }\n")
    result = pz(project, "validate")
    assert result.exit_code == 2 and "PZ0301" in result.output, result.output
    assert json.loads((target / "shapes.json").read_text())["passed"]  # rewritten


def test_the_memo_passes_only_what_passed_and_holds_salted_digests(tmp_path: Path) -> None:
    memo = ShapeMemo(tmp_path)
    data = {"connection": {"password": "hunter2"}, "n": 1}
    digest = memo.digest("{}", data)
    assert digest is not None and not memo.passed(digest)
    memo.remember(digest)
    memo.save()
    again = ShapeMemo(tmp_path)
    assert again.passed(again.digest("{}", data))
    assert not again.passed(again.digest("{}", {**data, "n": True}))  # 1 and true differ
    assert not again.passed(again.digest('{"type": "object"}', data))  # another schema
    assert again.digest("{}", {1: "a key that is not a string"}) is None
    stored = (tmp_path / ".pz" / "target" / "shapes.json").read_text()
    assert "hunter2" not in stored
    assert oct((tmp_path / ".pz" / "validate.key").stat().st_mode & 0o777) == "0o600"
