"""An output never deletes what it does not own: validate refuses an output over a declared source's data
(PZ0236) or over the project's own folders and files (PZ0237); a replace removes only the files pz wrote
(its `.pz-manifest.json`), refusing a folder holding others (PZ0530) unless the output sets
`foreign_files: replace`. The object stores' side is in test_connector_s3 and test_connector_azureblob."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import SMALL, pz, write_project
from tests.functional.test_storage_safety import _writes

OVERLAPS = {
    "project.yml": "name: overlaps\n",
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          raw: { path: "raw/*.csv", columns: { id: bigint } }
          one: { path: orders.csv, columns: { id: bigint } }
          deep: { path: "logs/**/*.csv", columns: { id: bigint } }
    """,
    "sources/db.yml": """
        connector: duckdb
        connection: { path: data/wh.duckdb }
        datasets:
          t: { table: t, columns: { id: bigint } }
    """,
    "sinks/data.yml": """
        connector: localfiles
        connection: { root: data }
        outputs:
          over_raw: { path: raw }
          over_one: { path: orders.csv }
          in_deep: { path: logs/2026/eu }
          beside_raw: { path: raw/sub }
          beside: { path: exports/orders }
          over_db: { path: wh.duckdb }
    """,
    "sinks/proj.yml": """
        connector: localfiles
        connection: { root: . }
        outputs:
          sql: { path: pipelines }
          state: { path: .pz/out }
          inside_sources: { path: sources/x }
          fine: { path: out/orders }
    """,
    "sinks/up.yml": """
        connector: localfiles
        connection: { root: .. }
        outputs:
          everything: { path: proj }
    """,
    "sinks/wh.yml": "connector: duckdb\nconnection: { path: data/raw/wh.csv }\n",
    "sinks/wh_ok.yml": "connector: duckdb\nconnection: { path: data/wh.duckdb }\n",
    "sinks/wh_cfg.yml": "connector: duckdb\nconnection: { path: sinks/wh.duckdb }\n",
    "data/raw/a.csv": "id\n1\n",
    "data/orders.csv": "id\n1\n",
}


def test_an_output_over_source_data_or_the_project_is_refused_at_validate(tmp_path: Path) -> None:
    outputs = (
        "data.over_raw", "data.over_one", "data.in_deep", "data.beside_raw", "data.beside", "data.over_db",
        "proj.sql", "proj.state", "proj.inside_sources", "proj.fine", "up.everything",
        "wh.t", "wh_ok.t", "wh_cfg.t",
    )  # fmt: skip
    project = write_project(tmp_path / "proj", {**OVERLAPS, **_writes(*outputs)})
    result = pz(project, "validate")
    assert result.exit_code == 2, result.output
    sources = [line for line in result.lines if "PZ0236" in line]
    expected_sources = [
        ("'data.over_raw'", "folder data/raw, which holds path data/raw/*.csv of source dataset 'files.raw'"),
        ("'data.over_one'", "which is the same as path data/orders.csv of source dataset 'files.one'"),
        ("'up.everything'", "which holds path data/raw/*.csv of source dataset 'files.raw'"),
        ("'up.everything'", "which holds path data/orders.csv"),
        ("'up.everything'", "which holds path data/logs/**/*.csv"),
        ("'up.everything'", "which holds database file data/wh.duckdb of source dataset 'db.t'"),
        ("'data.in_deep'", "which lies in path data/logs/**/*.csv of source dataset 'files.deep'"),
        ("'wh.t'", "table main.t in data/raw/wh.csv, which lies in path data/raw/*.csv"),
        ("'data.over_db'", "folder data/wh.duckdb, which is the same as database file data/wh.duckdb"),
    ]
    for output, text in expected_sources:
        assert any(output in line and text in line for line in sources), (output, result.output)
    assert len(sources) == len(expected_sources), result.output
    assert "writing there would overwrite or delete the source's data" in sources[0]
    project_lines = [line for line in result.lines if "PZ0237" in line]
    expected_project = [
        ("'proj.sql'", "folder pipelines, which is the project's pipelines"),
        ("'proj.state'", "folder .pz/out, which is inside the project's .pz"),
        ("'proj.inside_sources'", "which is inside the project's sources"),
        ("'up.everything'", "which is the project folder"),
        ("'wh_cfg.t'", "table main.t in sinks/wh.duckdb, which is inside the project's sinks"),
    ]
    for output, text in expected_project:
        assert any(output in line and text in line for line in project_lines), (output, result.output)
    assert len(project_lines) == len(expected_project), result.output
    # clear of both: a folder the glob cannot reach into, another folder, a DuckDB file beside the sources
    # (and another table of the database file a duckdb source reads)
    for fine in ("'data.beside_raw'", "'data.beside'", "'proj.fine'", "'wh_ok.t'"):
        assert not any(fine in line for line in [*sources, *project_lines]), fine
    # a replace run never started: the source data and the project are all there
    assert (project / "data" / "raw" / "a.csv").is_file() and (project / "pipelines").is_dir()


def _shared_folder_project(root: Path, output_options: str = "") -> Path:
    return write_project(
        root,
        {
            **SMALL,
            "sinks/lake.yml": f"""
                connector: localfiles
                connection: {{ root: out }}
                outputs:
                  p: {{ path: shared{output_options} }}
            """,
        },
    )


def _manifest(folder: Path) -> list[str]:
    files: list[str] = json.loads((folder / ".pz-manifest.json").read_text())["files"]
    return files


def test_a_replace_never_deletes_files_pz_did_not_write(tmp_path: Path) -> None:
    project = _shared_folder_project(tmp_path / "proj")
    shared = project / "out" / "shared"
    shared.mkdir(parents=True)
    (shared / "notes.txt").write_text("another team's file\n")
    (shared / "part-00000.parquet").write_text("not pz's: it sits next to a foreign file\n")

    refused = pz(project, "run")
    assert refused.exit_code == 1, refused.output
    assert "PZ0530" in refused.output and "holds 2 file(s) pz did not write" in refused.output
    assert "notes.txt" in refused.output and "foreign_files: replace" in refused.output
    assert sorted(p.name for p in shared.iterdir()) == ["notes.txt", "part-00000.parquet"]
    assert (shared / "notes.txt").read_text() == "another team's file\n"

    opted_in = pz(_shared_folder_project(project, ", foreign_files: replace"), "run")
    assert opted_in.exit_code == 0, opted_in.output
    assert sorted(p.name for p in shared.iterdir()) == [".pz-manifest.json", "part-00000.parquet"]
    assert _manifest(shared) == ["part-00000.parquet"]

    # the folder is pz's now: a replace without the opt-in runs; a file added later is refused again
    assert pz(_shared_folder_project(project), "run").exit_code == 0
    (shared / "later.csv").write_text("id\n9\n")
    again = pz(project, "run")
    assert again.exit_code == 1 and "PZ0530" in again.output and "(later.csv)" in again.output, again.output
    assert (shared / "later.csv").is_file()


def test_a_folder_an_older_pz_wrote_counts_as_pz_s_and_a_bad_manifest_is_refused(tmp_path: Path) -> None:
    """No manifest, every file named as pz names its files: pz's (written before manifests existed)."""
    project = _shared_folder_project(tmp_path / "proj")
    shared = project / "out" / "shared"
    (shared / "day=1").mkdir(parents=True)
    for name in ("part-00000.parquet", "part-20261001T000000Z-ab12-00000.parquet", "day=1/part-0.parquet"):
        (shared / name).write_text("old\n")
    result = pz(project, "run")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in shared.iterdir()) == [".pz-manifest.json", "part-00000.parquet"]

    (shared / ".pz-manifest.json").write_text("{not json")
    broken = pz(project, "run")
    assert broken.exit_code == 1 and "PZ0532" in broken.output, broken.output
    assert (shared / ".pz-manifest.json").read_text() == "{not json"


def test_an_append_adds_to_a_shared_folder_and_records_only_its_own_files(tmp_path: Path) -> None:
    project = _shared_folder_project(tmp_path / "proj", ", strategy: append")
    shared = project / "out" / "shared"
    shared.mkdir(parents=True)
    (shared / "theirs.csv").write_text("another team's file\n")
    for _ in range(2):
        result = pz(project, "run")
        assert result.exit_code == 0, result.output
    mine = sorted(p.name for p in shared.glob("part-*.parquet"))
    assert len(mine) == 2 and _manifest(shared) == mine
    # foreign_files says what a replace may delete: on an append it is refused, not ignored
    both = pz(_shared_folder_project(project, ", strategy: append, foreign_files: replace"), "validate")
    assert (
        both.exit_code == 2
        and "PZ0305" in both.output
        and "foreign_files only applies to replace" in both.output
    )
    replaced = pz(_shared_folder_project(project), "run")
    assert replaced.exit_code == 1, replaced.output
    assert "holds 1 file(s) pz did not write (theirs.csv)" in replaced.output
    assert sorted(p.name for p in shared.iterdir()) == [".pz-manifest.json", *mine, "theirs.csv"]
