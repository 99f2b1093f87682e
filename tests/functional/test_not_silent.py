"""Nothing accepted silently: `sync:` is honoured and shown, `connectors:` pins get a word (`engine.breaker`
works); masking a secret never rewrites structured fields, and a short secret gets a warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelinez import __version__
from pipelinez.core.redact import Redactor
from tests.conftest import pz, write_project

BASE = {
    "project.yml": "name: shop\n",
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          orders: { format: csv, path: orders.csv, columns: { id: bigint, note: varchar } }
    """,
    "sinks/lake.yml": "connector: localfiles\nconnection: { root: out }\n",
    "pipelines/orders.sql": """
        INSERT INTO {{ sink('lake', 'orders') }}
        SELECT id, note FROM {{ source('files', 'orders') }}
    """,
    "data/orders.csv": "id,note\n1,success\n",
}


def test_incremental_sync_is_honoured_and_shown(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "sources/files.yml": """
                connector: localfiles
                connection: { root: data }
                datasets:
                  orders:
                    format: csv
                    path: orders.csv
                    columns: { id: bigint, note: varchar }
                    sync: { mode: incremental, cursor: id, start: 0 }
            """,
            "sinks/lake.yml": "connector: localfiles\nconnection: { root: out }\n"
            "outputs:\n  orders: { strategy: append, duplicates: accept }\n",
        },
    )
    plan = pz(project_dir, "plan")
    assert plan.exit_code == 0
    assert "       incremental: cursor id, watermark none committed yet" in plan.lines
    assert "       next read: id > 0 (and rows whose id is NULL)" in plan.lines
    assert pz(project_dir, "run").exit_code == 0
    assert pz(project_dir, "plan").lines.count("       incremental: cursor id, watermark 1") == 1


def test_a_breaker_block_is_accepted_without_a_warning_and_shown_by_plan(project_dir: Path) -> None:
    write_project(
        project_dir,
        {**BASE, "project.yml": "name: shop\nengine:\n  breaker: { failure_threshold: 5, cool_down: 30s }\n"},
    )
    result = pz(project_dir, "validate")
    assert (result.exit_code, result.lines) == (0, ["ok: project is valid (3 nodes)"])
    plan = pz(project_dir, "plan")
    assert plan.lines[1] == (
        "engine breaker: failure_threshold 5 (engine.breaker), cool_down 30s (engine.breaker); "
        "one per instance: sink:lake, source:files"
    )


@pytest.mark.parametrize(
    ("pin", "expected"),
    [
        (f">={__version__}", None),
        (__version__, None),
        (
            ">=99",
            f"error: PZ0220 project.yml:3:3: connector 'localfiles' {__version__} (pipelinez) does not",
        ),
        ("not a pin", "error: PZ0116 project.yml:3:3: connectors: pin 'not a pin' for 'localfiles'"),
    ],
)
def test_connector_pins_are_checked_against_installed_versions(
    project_dir: Path, pin: str, expected: str | None
) -> None:
    write_project(project_dir, {**BASE, "project.yml": f'name: shop\nconnectors:\n  localfiles: "{pin}"\n'})
    result = pz(project_dir, "validate")
    if expected is None:
        assert result.exit_code == 0, result.output
    else:
        assert result.exit_code == 2
        assert result.lines[0].startswith(expected), result.output


def test_a_pin_for_a_connector_that_is_not_installed_is_refused(project_dir: Path) -> None:
    write_project(project_dir, {**BASE, "project.yml": 'name: shop\nconnectors:\n  postgress: ">=1"\n'})
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    assert result.lines[0].startswith(
        "error: PZ0215 project.yml:3:3: connectors: pins 'postgress', which is not"
    )
    assert "did you mean 'postgres'?" in result.lines[0]


def test_masking_a_secret_never_rewrites_structured_fields(project_dir: Path) -> None:
    # the secret equals a node name, a status and a word in the data: only free text is masked
    write_project(
        project_dir,
        {
            **BASE,
            "project.yml": "name: shop\nenv:\n  TOKEN: { secret: true }\n",
            "pipelines/orders.sql": """
                INSERT INTO {{ sink('lake', 'orders') }}
                SELECT id, note, {{ env('TOKEN') }} AS t FROM {{ source('files', 'orders') }}
            """,
            "pipelines/success.sql": """
                INSERT INTO {{ sink('lake', 'success') }}
                SELECT CAST(note AS INT) AS n FROM {{ source('files', 'orders') }}
            """,
        },
    )
    result = pz(project_dir, "--log-format", "json", "run", env={"TOKEN": "success"})
    assert result.exit_code == 1
    events = [json.loads(line) for line in result.lines]
    done = {e["name"]: e for e in events if e["event"] == "node_completed"}
    assert done["orders"]["status"] == "success" and done["lake.orders"]["status"] == "success"
    # 'success' is streamed into lake.success, whose write runs (and fails on) its query: both failed
    assert done["success"]["status"] == "failed" and done["lake.success"]["status"] == "failed"
    assert done["lake.success"]["name"] == "lake.success"  # its name holds the secret, and stays readable
    message = done["lake.success"]["error"]["message"]
    assert "'***'" in message and "success" not in message, message
    results = result.run_results()
    assert {n["name"]: n["status"] for n in results["nodes"]}["orders"] == "success"
    assert results["status"] == "failed"


def test_redactor_masks_free_text_only() -> None:
    redact = Redactor(("ok12",))
    event = {"event": "node_completed", "name": "ok12", "status": "ok12", "message": "token ok12 refused"}
    assert redact.deep(event) == {**event, "message": "token *** refused"}
    assert redact.deep({"error": {"code": "PZ0501", "message": "ok12"}, "deps": ["ok12"]}) == {
        "error": {"code": "PZ0501", "message": "***"},
        "deps": ["ok12"],
    }


def test_a_short_secret_gets_a_warning_and_is_still_masked(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "project.yml": "name: shop\nenv:\n  PIN: { secret: true }\n",
            "pipelines/orders.sql": """
                INSERT INTO {{ sink('lake', 'orders') }}
                SELECT CAST({{ env('PIN') }} || 'x' AS INT) AS n
            """,
        },
    )
    result = pz(project_dir, "run", env={"PIN": "q7z"})
    assert result.exit_code == 1
    assert result.lines[0].startswith(
        "warning: PZ0115 project.yml:3:3: secret environment variable PIN is shorter"
    )
    assert "q7z" not in result.output and "'***x'" in result.output
