"""Shared test helpers: write a small project into a tmp dir and drive the real `pz` CLI on it."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pipelinez.cli.main import cli


@dataclass
class PzResult:
    exit_code: int
    output: str
    project: Path

    @property
    def lines(self) -> list[str]:
        return self.output.splitlines()

    def run_results(self) -> dict[str, Any]:
        runs = sorted((self.project / ".pz" / "runs").iterdir())
        return json.loads((runs[-1] / "run_results.json").read_text())

    def node(self, name: str) -> dict[str, Any]:
        return next(n for n in self.run_results()["nodes"] if n["name"] == name)


def write_project(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


# the smallest whole project: one CSV dataset, one pipeline, one local sink
SMALL = {
    "project.yml": "name: shop\n",
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          orders: { format: csv, path: orders.csv, columns: { id: bigint } }
    """,
    "sinks/lake.yml": "connector: localfiles\nconnection: { root: out }\n",
    "pipelines/p.sql": """
        INSERT INTO {{ sink('lake', 'p') }}
        SELECT id FROM {{ source('files', 'orders') }}
    """,
    "data/orders.csv": "id\n1\n",
}


def pz(project: Path, *args: str, env: dict[str, str] | None = None) -> PzResult:
    """Run the CLI in-process (fast); output is what a non-terminal stdout receives."""
    runner = CliRunner()
    result = runner.invoke(cli, ["-p", str(project), *args], env=env, catch_exceptions=False)
    return PzResult(result.exit_code, result.output, project)


def pz_subprocess(
    project: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> PzResult:
    """Run the CLI as its own process, exactly as a user would."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "pipelinez.cli.main", "-p", str(project), *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )
    return PzResult(proc.returncode, proc.stdout + proc.stderr, project)


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    return tmp_path / "proj"


PG_HOST, PG_PORT, PG_USER = "127.0.0.1", 5432, "postgres"


@contextlib.contextmanager
def fresh_pg_database(setup_sql: str = "") -> Iterator[str]:
    """A new PostgreSQL database with a unique name (after running `setup_sql` in it), dropped afterwards.
    Fails, never skips, when the server is down: CI starts it."""
    import psycopg

    try:
        admin = psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres", autocommit=True)
    except psycopg.Error as exc:
        pytest.fail(f"PostgreSQL not reachable on {PG_HOST}:{PG_PORT} (start it as .ci/run does): {exc}")
    name = f"pz_test_{secrets.token_hex(4)}"
    admin.execute(f'CREATE DATABASE "{name}" ENCODING UTF8 TEMPLATE template0')
    try:
        if setup_sql:
            with psycopg.connect(
                host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=name, autocommit=True
            ) as con:
                con.execute(setup_sql)  # type: ignore[arg-type]
        yield name
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture(scope="session")
def ray_instance() -> Iterator[Any]:
    """One local Ray instance per test session (per xdist worker that runs a Ray test: 2 CPUs, no dashboard,
    no usage stats), shut down at the end; `pz run --executor ray` in-process joins it."""
    import logging

    import ray

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    ray.init(
        address="local",  # a new instance, never another cluster of this machine
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
    )
    try:
        yield ray
    finally:
        ray.shutdown()
