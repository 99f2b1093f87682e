"""A file pz refuses is never echoed beyond a short escaped excerpt (PZ0102), and a secret too short to mask
is refused (PZ0122) while pz's own words about it are never masked."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import SMALL, pz, write_project


def test_a_symlink_to_a_system_file_is_one_diagnostic_without_its_lines(
    project_dir: Path, tmp_path: Path
) -> None:
    system_file = tmp_path / "system.conf"
    system_file.write_text("".join(f"private_line_{i}: value{i}\n" for i in range(30)), encoding="utf-8")
    write_project(project_dir, SMALL)
    (project_dir / "sources" / "x.yml").symlink_to(system_file)
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    unknown = [line for line in result.lines if "PZ0102" in line]
    assert unknown == [
        "error: PZ0102 sources/x.yml:1:1: 30 unknown keys at the top level of sources/x.yml (the first: "
        "'private_line_0'); is this the right file? allowed keys: connector, connection, max_concurrency, "
        "retry, engine, datasets"
    ]
    assert "private_line_1" not in result.output and "value" not in result.output


def test_an_unknown_key_is_shown_as_a_short_escaped_excerpt(project_dir: Path) -> None:
    key = "k\\u001b[31m" + "x" * 300
    write_project(
        project_dir,
        {**SMALL, "sinks/lake.yml": f'connector: localfiles\nconnection: {{ root: out }}\n"{key}": 1\n'},
    )
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    line = next(line for line in result.lines if "PZ0102" in line)
    assert "unknown key 'k\\x1b[31mxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'" in line
    assert "\x1b" not in result.output and "x" * 50 not in result.output


def test_a_duplicate_key_is_shown_as_a_short_excerpt(project_dir: Path) -> None:
    key = "private_" + "k" * 200
    write_project(project_dir, {**SMALL, "sinks/lake.yml": f"connector: localfiles\n{key}: 1\n{key}: 2\n"})
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    assert f'duplicate key "private_{"k" * 29}...": each key may appear once per mapping' in result.output
    assert "k" * 50 not in result.output


def _secret_project(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **SMALL,
            "project.yml": "name: shop\nenv:\n  PIN: { secret: true }\n",
            "pipelines/p.sql": """
                INSERT INTO {{ sink('lake', 'p') }}
                SELECT id FROM {{ source('files', 'orders') }} WHERE {{ env('PIN') }} <> 'zz'
            """,
        },
    )


def test_a_one_character_secret_is_refused_in_plain_words(project_dir: Path) -> None:
    _secret_project(project_dir)
    result = pz(project_dir, "run", env={"PIN": "e"})
    assert result.exit_code == 2
    assert result.lines[0] == (
        "error: PZ0122 project.yml:3:3: secret environment variable PIN is 1 character(s) long: masking it "
        "would rewrite those letters in every message; pz refuses a secret shorter than 3 characters"
    )
    assert "***" not in result.output
    assert not (project_dir / ".pz" / "runs").exists()


def test_a_short_secret_warning_is_not_masked_into_itself(project_dir: Path) -> None:
    _secret_project(project_dir)
    result = pz(project_dir, "validate", env={"PIN": "ent"})  # "ent" is in "environment"
    assert result.exit_code == 0, result.output
    assert result.lines[0].startswith(
        "warning: PZ0115 project.yml:3:3: secret environment variable PIN is shorter than 4 characters"
    )
