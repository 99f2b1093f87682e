"""Cold `pz validate` issues DuckDB statements per pipeline and per check, not per column or value (issue 22,
lane coldval): counted with a profile hook on the DuckDB connection's C calls, as
tests/functional/test_startup_budget.py counts them, on projects of several pipelines with a sidecar of
checks. Every pipeline and check is still bound (the bind counter `compile.check_binds.BINDS`), and a check
whose options do not fit its column still fails with its own message."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pipelinez.api import Project
from pipelinez.compile.check_binds import BINDS
from pipelinez.core.diagnostics import PzError
from tests.conftest import write_project
from tests.duckdb_counts import is_duckdb_statement

PIPELINES = 8
VALUES = list(range(10))

SIDECAR = (
    "checks:\n  - not_null: { columns: [id, amount] }\n  - unique: { columns: [id] }\n"
    f"  - accepted_values: {{ column: grp, values: {VALUES} }}\n"
    '  - expression: { sql: "amount >= 0", name: non_negative }\n'
)


def _files(sidecar: str = SIDECAR) -> dict[str, str]:
    files = {
        "project.yml": "name: counted\n",
        "sources/files.yml": (
            "connector: localfiles\nconnection: { root: data }\ndatasets:\n"
            "  raw: { format: parquet, path: raw.parquet, columns: "
            "{ id: bigint, grp: integer, amount: 'decimal(12,2)' } }\n"
        ),
        "sinks/lake.yml": "connector: localfiles\nconnection: { root: out }\noutputs:\n  p_0: {}\n",
    }
    for i in range(PIPELINES):
        read = "{{ source('files', 'raw') }}" if i == 0 else f"{{{{ ref('p_{i - 1}') }}}}"
        head = "INSERT INTO {{ sink('lake', 'p_0') }}\n" if i == PIPELINES - 1 else ""
        files[f"pipelines/p_{i}.sql"] = f"{head}SELECT id, grp, amount FROM {read}\n"
        files[f"pipelines/p_{i}.yml"] = sidecar
    files[f"pipelines/p_{PIPELINES - 1}.sql"] = files[f"pipelines/p_{PIPELINES - 1}.sql"].replace(
        "p_0') }}", f"p_{PIPELINES - 1}') }}}}"
    )
    files["sinks/lake.yml"] = files["sinks/lake.yml"].replace("p_0", f"p_{PIPELINES - 1}")
    return files


@contextmanager
def counted() -> Iterator[Counter[str]]:
    counts: Counter[str] = Counter()

    def hook(_frame: object, event: str, arg: object) -> None:
        if is_duckdb_statement(event, arg):
            counts["statements"] += 1
        elif event == "c_call" and getattr(arg, "__name__", None) == "extract_statements":
            counts["parses"] += 1

    sys.setprofile(hook)
    try:
        yield counts
    finally:
        sys.setprofile(None)


def test_checks_cost_statements_per_check_not_per_value(project_dir: Path) -> None:
    root = write_project(project_dir, _files())
    BINDS.clear()
    with counted() as counts:
        report = Project(root, compile_cache=False).validate()
    checks = 4 * PIPELINES
    assert report.nodes == 1 + PIPELINES + checks + 1
    assert sum(1 for name in BINDS if name.startswith("p_")) == PIPELINES  # every pipeline bound once
    assert len(BINDS) == PIPELINES + checks  # and every check
    # before: each check described its table, each expression's type was a DESCRIBE and each of the ten
    # values a statement of its own (148 statements here). Now a table is described once, the values are cast
    # once (same values, same type) and an expression's type is bound, not run: 45.
    assert counts["statements"] < 6 * PIPELINES, counts


def test_a_plain_pipeline_is_bound_without_a_parse_of_its_own(project_dir: Path) -> None:
    """A query whose parentheses all close outside strings and quoted names is bound wrapped as a subquery
    without DuckDB's parser reading it alone first (before: one parse a pipeline)."""
    files = _files(sidecar="")
    files = {k: v for k, v in files.items() if not k.endswith(".yml") or not k.startswith("pipelines/")}
    for i in range(1, PIPELINES):
        files[f"pipelines/p_{i}.sql"] = files[f"pipelines/p_{i}.sql"].replace(
            "SELECT id, grp, amount", "SELECT id, coalesce(grp, length(')')) AS grp, (amount) AS \"amount\""
        )
    root = write_project(project_dir, files)
    BINDS.clear()
    with counted() as counts:
        Project(root, compile_cache=False).validate()
    assert sum(BINDS.values()) == PIPELINES
    assert counts["parses"] == 0, counts


@pytest.mark.parametrize(
    ("query", "alone"),
    [
        ("SELECT (1) AS a, ')' AS b, \"c)\" FROM t", True),
        ("SELECT 1) UNION (SELECT 2", False),
        ("SELECT ((1)", False),
        ("SELECT 1 -- )", False),
        ("SELECT $$)$$", False),
        ("SELECT E'\\'')'", False),
        ("SELECT 'unclosed", False),
    ],
)
def test_which_queries_skip_their_parse(query: str, alone: bool) -> None:
    from pipelinez.compile.pipeline_sql import nested_alone as _nested_alone

    assert _nested_alone(query) is alone


def test_a_value_that_does_not_fit_is_still_named(project_dir: Path) -> None:
    sidecar = SIDECAR.replace(f"values: {VALUES}", "values: [1, two, 3]")
    root = write_project(project_dir, _files(sidecar))
    with pytest.raises(PzError) as raised:
        Project(root, compile_cache=False).validate()
    found = [d for d in raised.value.diagnostics if d.code == "PZ0405"]
    assert len(found) == PIPELINES
    assert all("value 'two' can never be a value of 'grp' (INTEGER)" in d.message for d in found)


@pytest.mark.parametrize(("expression", "problem"), [("amount", "it is DECIMAL(12,2)"), ("nope > 0", "nope")])
def test_an_expression_that_is_not_true_or_false_is_still_refused(
    project_dir: Path, expression: str, problem: str
) -> None:
    sidecar = SIDECAR.replace('sql: "amount >= 0"', f'sql: "{expression}"')
    root = write_project(project_dir, _files(sidecar))
    with pytest.raises(PzError) as raised:
        Project(root, compile_cache=False).validate()
    found = [d for d in raised.value.diagnostics if d.code == "PZ0405"]
    assert len(found) == PIPELINES and all(problem in d.message for d in found), found
