"""Templates: every undeclared name in a file reported at once, dbt-style defaults honoured, and the sandbox
bounded in time and size (PZ0213), all in words a user reads."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from tests.conftest import pz, write_project

BASE = {
    "project.yml": """
        name: shop
        vars:
          used_late: { type: int, default: 1 }
          no_default: { type: int }
          with_default: { type: int, default: 3 }
        env:
          UNSET_X: {}
          LAKE_DIR: {}
    """,
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          orders: { format: csv, path: orders.csv, columns: { id: bigint } }
    """,
    "sinks/lake.yml": """
        connector: localfiles
        connection: { root: "{{ env('LAKE_DIR', 'out') }}" }
        outputs:
          a: { format: csv }
    """,
    "data/orders.csv": "id\n1\n",
}


def _codes(output: str) -> list[str]:
    return [
        line.split()[1] + " " + line.split()[2] for line in output.splitlines() if line.startswith("error:")
    ]


def test_rendering_goes_on_past_undeclared_names_and_reports_them_all(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/a.sql": """
                INSERT INTO {{ sink('lake', 'a') }}
                SELECT {{ var('nope1') }} AS x, {{ env('NOPE2') }} AS y, {{ var('used_late') }} AS z,
                       {{ var('no_default', 7) }} AS d, {{ var('with_default', 9) }} AS w
                FROM {{ source('files', 'orderz') }} JOIN {{ ref('bzz') }} USING (id)
                WHERE {{ var('nope3') }} IS NULL
            """,
        },
    )
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    assert _codes(result.output) == [
        "PZ0209 pipelines/a.sql:2:8:",
        "PZ0211 pipelines/a.sql:2:33:",
        "PZ0202 pipelines/a.sql:4:6:",
        "PZ0203 pipelines/a.sql:4:43:",
        "PZ0209 pipelines/a.sql:5:7:",
    ], result.output
    assert "PZ0222" not in result.output  # used_late is used, after the first failure
    assert "5 errors" in result.lines[-1]


def test_yaml_values_report_every_undeclared_name(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "sinks/lake.yml": """
                connector: localfiles
                connection: { root: "{{ env('NOPE_A') }}" }
                outputs:
                  a: { format: "{{ var('nope_b') }}", path: "{{ env('NOPE_C') }}" }
            """,
            "pipelines/a.sql": "INSERT INTO {{ sink('lake', 'a') }}\nSELECT {{ var('used_late') }} AS x\n",
        },
    )
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    messages = "\n".join(line for line in result.lines if line.startswith("error:"))
    for name in ("env('NOPE_A')", "var('nope_b')", "env('NOPE_C')"):
        assert name in messages, result.output


def test_env_and_var_defaults_in_the_call_are_used_when_unset(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/a.sql": """
                INSERT INTO {{ sink('lake', 'a') }}
                SELECT {{ var('no_default', 7) }} AS d, {{ var('with_default', 9) }} AS w,
                       {{ env('UNSET_X', 'fallback') }} AS e, {{ var('used_late') }} AS u, id
                FROM {{ source('files', 'orders') }}
            """,
        },
    )
    result = pz(project_dir, "run", env={"UNSET_X": None, "LAKE_DIR": None})
    assert result.exit_code == 0, result.output
    rows = duckdb.sql(f"SELECT d, w, e, u, id FROM read_csv('{project_dir}/out/a.csv')").fetchall()
    assert rows == [(7, 3, "fallback", 1, 1)]  # the declared default wins over the call's (3, not 9)
    with_env = pz(project_dir, "run", env={"UNSET_X": "set", "LAKE_DIR": "lake2"})
    assert with_env.exit_code == 0, with_env.output
    assert duckdb.sql(f"SELECT e FROM read_csv('{project_dir}/lake2/a.csv')").fetchall() == [("set",)]


def test_a_var_default_that_is_not_of_the_var_type_is_refused(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/a.sql": """
                INSERT INTO {{ sink('lake', 'a') }}
                SELECT {{ var('no_default', 'x7') }} AS d, {{ var('used_late') }} AS u
            """,
        },
    )
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    assert result.lines[0] == (
        "error: PZ0210 pipelines/a.sql:2:8: the default of var('no_default', 'x7') is not a valid int: "
        "'x7' is not a whole number"
    )
    assert "invalid literal" not in result.output


@pytest.mark.parametrize(
    ("template", "says"),
    [
        (
            '{{ "a" * 2000000000 }}',
            "repeating a value 2,000,000,000 times makes more than the sandbox allows",
        ),
        ("{{ [0] * 2000000000 }}", "repeating a value 2,000,000,000 times"),
        ("{% for i in range(10**9) %}x{% endfor %}", "a range() of more than 100,000 items"),
        (
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            "the template's loops ran more than 1,000,000 iterations",
        ),
        ("{{ 10 ** 100000000 }}", "10 ** 100000000 is larger than the sandbox computes"),
        (
            "{% for i in range(20) %}{{ 'a' * 1000000 }}{% endfor %}",
            "the template's output is larger than the sandbox allows (10,485,760 characters)",
        ),
        ('{{ "x" | center(2000000000) }}', "center() with a width above 1,000,000"),
        ('{{ "x".ljust(2000000000) }}', "ljust() with a width above 1,000,000"),
        ('{{ "{:>2000000000}".format(1) }}', "a format width or precision above 1,000,000 ('>2000000000')"),
        ('{{ "{:>{w}}".format(1, w=2000000000) }}', "a format width or precision above 1,000,000"),
        ('{{ "{:.2000000000f}".format(1.5) }}', "a format width or precision above 1,000,000"),
        ('{{ "{a:>{w}}".format_map({"a": 1, "w": 10**9}) }}', "a format width or precision above 1,000,000"),
        ('{{ "%2000000000s" % "x" }}', "a format width or precision above 1,000,000 ('%2000000000')"),
        ('{{ "%*s" % (2000000000, "x") }}', "a `*` format width above 1,000,000"),
        ('{{ "%2000000000d"|format(1) }}', "a format width or precision above 1,000,000"),
        ('{% set s = "a" * 999999 %}{{ ([s] * 999999)|join }}', "repeating a value 999,999 times"),
        ('{% set s = "a" * 999999 %}{{ "".join([s] * 999999) }}', "repeating a value 999,999 times"),
        ('{{ range(99999)|join("x" * 1000000) }}', "join() would build 11,000,014 characters"),
        ("{{ [[0] * 1000000] * 1000 }}", "repeating a value 1,000 times makes more than the sandbox allows"),
        ("{{ [2 ** 4000] * 100000 }}", "repeating a value 100,000 times"),
        ("{{ lipsum(2000000000) }}", "lipsum() of more than 100,000 words is more than the sandbox allows"),
        ('{{ [1] | batch(2000000000, "x") | list }}', "batch() with a count above 1,000,000"),
        ('{{ ("x" * 1000000) | wordwrap(1) }}', "wordwrap() of more than 50,000 characters"),
        (
            "{% set ns = namespace(x=3) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}{% endfor %}",
            "a product of more than 4096 bits is larger than the sandbox computes",
        ),
        ('{{ [1, 2] | slice(2000000000, "x") | list }}', "slice() with a count above 1,000,000"),
        (
            '{% set ns = namespace(s="x") %}{% for i in range(36) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}',
            "joining with ~ would build 16,777,216 characters, more than the sandbox allows (10,485,760)",
        ),
        (
            '{% set ns = namespace(s="x") %}{% for i in range(36) %}{% set ns.s = ns.s + ns.s %}{% endfor %}',
            "adding these values makes more than the sandbox allows (10,485,760 characters or items)",
        ),
        (
            "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}"
            "{{ ns.l | tojson }}",
            "printing this value makes more than the sandbox allows (10,485,760 characters or items)",
        ),
        (
            "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}"
            "{{ ns.l }}",
            "printing this value makes more than the sandbox allows",
        ),
        (
            "{% set l = [1] %}{% for i in range(36) %}{% set _ = l.extend(l) %}{% endfor %}",
            "extend() makes more than the sandbox allows (1,000,000 characters or items)",
        ),
        ('{% set s = "a" * 999999 %}{{ s.replace("a", s) }}', "replace() would build 999,998,000,001"),
        ('{% set s = "a" * 999999 %}{{ s|replace("a", s) }}', "replace() would build 999,998,000,001"),
        ("{{ source('files') }}", "source() takes (src, dataset), not ('files')"),
        ("{{ env('A', 'b', 'c') }}", "env() takes (name, default), not ('A', 'b', 'c')"),
        ("{{ 1 / 0 }}", "template error: division by zero"),
    ],
)
def test_the_sandbox_is_bounded_and_speaks_plainly(project_dir: Path, template: str, says: str) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/a.sql": "INSERT INTO {{ sink('lake', 'a') }}\nSELECT {{ var('used_late') }} AS x\n-- "
            + template
            + "\n",
        },
    )
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    place = r"pipelines/a.sql" if "output is larger" in says else r"pipelines/a.sql:3(:\d+)?"
    assert re.match(rf"error: PZ0213 {place}: ", result.lines[0]), result.output
    assert says in result.lines[0]
    for internal in ("<locals>", "Templater", "Error:", "Traceback"):
        assert internal not in result.output


def test_loops_within_bounds_still_render(project_dir: Path) -> None:
    write_project(
        project_dir,
        {
            **BASE,
            "pipelines/a.sql": """
                INSERT INTO {{ sink('lake', 'a') }}
                SELECT {% for i in range(3) %}{{ i }} AS c{{ i }}{{ ', ' if not loop.last }}{% endfor %},
                       {{ var('used_late') }} AS u
            """,
        },
    )
    assert pz(project_dir, "validate").exit_code == 0


def test_a_failing_env_or_var_in_a_yaml_value_is_reported_at_that_value(project_dir: Path) -> None:
    """Issue 6: a YAML value's failed env()/var() names the value's own line:col (not 1:1 of the file), each
    failing value at its own place and all of them at once: connection, output option, check option and
    project.yml."""
    write_project(
        project_dir,
        {
            **BASE,
            "project.yml": """
                name: shop
                vars:
                  used_late: { type: int, default: 1 }
                env:
                  DECLARED_UNSET: {}
                engine:
                  staging:
                    region: "{{ env('STAGE_REGION') }}"
            """,
            "sources/files.yml": """
                connector: localfiles
                connection:
                  root: data
                  note: "{{ env('UNDECLARED_A') }}"
                  other: "x {{ var('nope_v') }}"
                datasets:
                  orders:
                    format: csv
                    path: orders.csv
                    columns: { id: bigint }
                    checks:
                      - expression: { sql: "id > {{ env('UNDECLARED_C') }}" }
            """,
            "sinks/lake.yml": """
                connector: localfiles
                connection: { root: out }
                outputs:
                  a:
                    format: csv
                    path: "{{ env('DECLARED_UNSET') }}"
            """,
            "pipelines/a.sql": """
                INSERT INTO {{ sink('lake', 'a') }}
                SELECT id, {{ var('used_late') }} AS x FROM {{ source('files', 'orders') }}
            """,
        },
    )
    result = pz(project_dir, "validate", env={"DECLARED_UNSET": None, "STAGE_REGION": None})
    assert result.exit_code == 2
    assert sorted(_codes(result.output)) == [
        "PZ0209 sources/files.yml:5:10:",  # two failing values in one file, each at its own place
        "PZ0211 project.yml:8:13:",
        "PZ0211 sources/files.yml:12:28:",  # a check's option
        "PZ0211 sources/files.yml:4:9:",
        "PZ0212 sinks/lake.yml:6:11:",
    ], result.output


def test_an_error_after_a_call_written_over_lines_is_at_its_own_line(project_dir: Path) -> None:
    # the call spans three lines and the template needs Jinja (compiled by shape): the error two lines
    # below it is at line 6, as Jinja places it in the text as written
    sql = (
        "INSERT INTO {{ sink('lake', 'a') }}\n"
        "SELECT id FROM {{\n"
        "    source('files', 'orders')\n"
        "}}\n"
        "{% if true %}{% endif %}\n"
        "WHERE {{ 1 / 0 }} = 1\n"
    )
    result = pz(write_project(project_dir, {**BASE, "pipelines/a.sql": sql}), "validate")
    assert result.exit_code == 2, result.output
    assert "PZ0213 pipelines/a.sql:6: template error: division by zero" in result.output, result.output
