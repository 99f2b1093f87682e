"""A validate whose project YAML all comes from the parse cache (`config.parse_cache`) does not import the
YAML parser: `YamlDoc` lives apart from it (`config.yaml_doc`). A changed YAML file is
parsed, and imports it."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import write_project
from tests.functional.test_shape_memo import INCREMENTAL, validate_in_a_process

PARSER = "ruamel.yaml"


def test_yaml_from_the_parse_cache_needs_no_parser(tmp_path: Path) -> None:
    project = write_project(tmp_path / "shop", INCREMENTAL)  # incremental: every validate loads and compiles
    assert validate_in_a_process(project, PARSER) == {"code": 0, PARSER: True}  # first: every file parsed
    assert validate_in_a_process(project, PARSER) == {"code": 0, PARSER: False}
    sql = next((project / "pipelines").glob("*.sql"))
    sql.write_text(sql.read_text() + "\n-- an edit\n")
    assert validate_in_a_process(project, PARSER) == {"code": 0, PARSER: False}  # SQL only: no YAML parsed
    source = project / "sources" / "files.yml"
    source.write_text(source.read_text() + "# a comment\n")
    assert validate_in_a_process(project, PARSER) == {"code": 0, PARSER: True}  # another text: parsed again
