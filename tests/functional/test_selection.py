"""Selection: names, source:/sink:/tag: selectors, + operators, --exclude, ancestors always added."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import pz, write_project

FILES = {
    "project.yml": "name: sel\n",
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          a: { format: csv, path: a.csv }
          b: { format: csv, path: b.csv }
    """,
    "sinks/lake.yml": "connector: localfiles\nconnection: { root: out }\n",
    "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
    "data/a.csv": "id\n1\n2\n",
    "data/b.csv": "id\n3\n",
    "pipelines/pa.sql": "INSERT INTO {{ sink('lake', 'pa') }}\nSELECT * FROM {{ source('files', 'a') }}\n",
    "pipelines/pa.yml": "tags: [nightly]\nchecks:\n  - unique: { columns: [id] }\n",
    "pipelines/pb.sql": "INSERT INTO {{ sink('wh', 'pb') }}\nSELECT * FROM {{ source('files', 'b') }}\n",
    "pipelines/both.sql": "INSERT INTO {{ sink('wh', 'both') }}\nSELECT * FROM {{ ref('pa') }} UNION ALL "
    "SELECT * FROM {{ ref('pb') }}\n",
}


def _ran(project: Path, *args: str) -> set[str]:
    result = pz(project, "run", *args)
    assert result.exit_code == 0, result.output
    return {n["name"] for n in result.run_results()["nodes"]}


def test_pipeline_name_selects_its_file_and_needed_ancestors(project_dir: Path) -> None:
    write_project(project_dir, FILES)
    assert _ran(project_dir, "--select", "pa") == {"src_files__a", "pa", "chk_pa__unique_id", "lake.pa"}


def test_descendants_tags_sources_sinks_and_exclude(project_dir: Path) -> None:
    write_project(project_dir, FILES)
    assert _ran(project_dir, "--select", "pb+") == {
        "src_files__b",
        "pb",
        "wh.pb",
        "both",
        "wh.both",
        "src_files__a",
        "pa",
        "chk_pa__unique_id",
    }
    assert _ran(project_dir, "--select", "tag:nightly") == {
        "src_files__a",
        "pa",
        "chk_pa__unique_id",
        "lake.pa",
    }
    assert _ran(project_dir, "--select", "source:files") == {"src_files__a", "src_files__b"}
    assert _ran(project_dir, "--select", "sink:wh", "--exclude", "wh.both") == {"src_files__b", "pb", "wh.pb"}
    assert _ran(project_dir, "--select", "+wh.both") >= {"pa", "pb", "both", "wh.both"}


def test_unknown_selector_is_a_warning_with_suggestion_and_exit_0(project_dir: Path) -> None:
    write_project(project_dir, FILES)
    result = pz(project_dir, "run", "--select", "bothh")
    assert result.exit_code == 0, result.output
    assert any("PZ0250" in line and "did you mean 'both'?" in line for line in result.lines), result.output
    assert any("PZ0251" in line for line in result.lines), result.output
    assert not (project_dir / "out" / "pa").exists()
