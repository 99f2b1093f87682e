"""Incremental declaration in SQL: `pz validate` infers watermark() comparisons with DuckDB's parser and
reports PZ0224-PZ0227 (one project per case of the article), PZ0214, all at once, each with a place, the
pipeline or dataset, a cause and a next step.

Until incremental reads run end to end, a SQL-declared dataset is also refused with the PZ0233 stopgap;
these tests look at every other line, so they hold with and without it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import PzResult, pz, write_project

ORDERS_COLUMNS = (
    "{ id: bigint, customer_id: bigint, amount: double, updated_at: timestamp, created_at: date }"
)

# every output these projects write appends and accepts repeats: an incremental dataset may feed neither a
# replace output (PZ0231) nor an append without duplicates: accept (PZ0214)
ACCEPT = "{ strategy: append, duplicates: accept }"
OUTPUTS = ("p", "q", "a", "b", "upper", "yaml_too", "events", "audit_all")
LAKE = "connector: localfiles\nconnection: { root: out }\noutputs:\n" + "".join(
    f"  {name}: {ACCEPT}\n" for name in OUTPUTS
)

BASE = {
    "project.yml": "name: shop\n",
    "sources/files.yml": f"""
        connector: localfiles
        connection: {{ root: data }}
        datasets:
          orders:
            format: csv
            path: orders.csv
            columns: {ORDERS_COLUMNS}
          customers:
            format: csv
            path: customers.csv
            columns: {{ id: bigint, name: varchar, updated_at: timestamp }}
    """,
    "sinks/lake.yml": LAKE,
    "data/orders.csv": "id,customer_id,amount,updated_at,created_at\n"
    "1,1,2.5,2024-01-01 00:00:00,2024-01-01\n",
    "data/customers.csv": "id,name,updated_at\n1,ada,2024-01-01 00:00:00\n",
}

ERROR = re.compile(r"^error: (PZ\d{4}) (\S+?): (.+)$")


def errors(result: PzResult) -> list[tuple[str, str, str]]:
    """(code, place, message) of every error line except the PZ0233 stopgap."""
    found = []
    for line in result.lines:
        match = ERROR.match(line)
        if match and match.group(1) != "PZ0233":
            found.append((match.group(1), match.group(2), match.group(3)))
    return found


def next_steps(result: PzResult) -> list[str]:
    """The next step of every error line except the PZ0233 stopgap, in order."""
    lines = result.lines
    return [
        lines[i + 1].strip().removeprefix("next: ")
        for i, line in enumerate(lines[:-1])
        if ERROR.match(line)
        and not line.startswith("error: PZ0233")
        and lines[i + 1].strip().startswith("next: ")
    ]


def validate(project_dir: Path, pipelines: dict[str, str], **files: str) -> PzResult:
    write_project(project_dir, {**BASE, **{f"pipelines/{n}.sql": t for n, t in pipelines.items()}, **files})
    return pz(project_dir, "validate")


def one_pipeline(where: str, frm: str = "{{ source('files', 'orders') }} AS o") -> dict[str, str]:
    return {"p": f"INSERT INTO {{{{ sink('lake', 'p') }}}}\nSELECT * FROM {frm}\nWHERE {where}\n"}


WM = "{{ watermark('files', 'orders') }}"
JOINED = "{{ source('files', 'orders') }} AS o JOIN {{ source('files', 'customers') }} AS c ON c.id = o.id"


# -- recognised declarations: nothing but the stopgap ----------------------------------------------


@pytest.mark.parametrize(
    "where",
    [
        f"o.updated_at > {WM}",
        f"o.updated_at >= {WM}",
        f"{WM} < o.updated_at",  # the mirrored form: the same lower bound written the other way round
        f"o.updated_at > {WM} - INTERVAL 1 HOUR AND o.amount > 0",
        f"o.id > {WM} + 0",  # before the first commit: -inf + 0, no lower bound
        f"NOT (o.updated_at <= {WM})",  # DuckDB's parser turns this into o.updated_at > …
    ],
)
def test_recognised_lower_bounds_validate(project_dir: Path, where: str) -> None:
    result = validate(project_dir, one_pipeline(where))
    assert errors(result) == []
    assert result.exit_code in (0, 2)  # 2 only for the PZ0233 stopgap
    assert all("PZ0233" in line for line in result.lines if line.startswith("error:"))


def test_cursor_traced_through_ctes_subqueries_and_joins(project_dir: Path) -> None:
    sql = f"""
        INSERT INTO {{{{ sink('lake', 'p') }}}}
        WITH recent AS (
            SELECT * FROM {{{{ source('files', 'orders') }}}}
        ), picked AS (SELECT id, customer_id, updated_at FROM recent)
        SELECT s.id, c.name
        FROM (SELECT * FROM picked) AS s
        JOIN {{{{ source('files', 'customers') }}}} AS c ON c.id = s.customer_id
        WHERE s.updated_at > {WM}
    """
    result = validate(project_dir, {"p": sql})
    assert errors(result) == []


# -- PZ0224: one project per "fires when" bullet ---------------------------------------------------


@pytest.mark.parametrize(
    ("case", "pipelines", "cause"),
    [
        (
            "upper bound <",
            one_pipeline(f"o.updated_at < {WM}"),
            "is an upper bound (o.updated_at < watermark())",
        ),
        ("upper bound <=", one_pipeline(f"o.updated_at <= {WM}"), "is an upper bound"),
        ("upper bound, mirrored", one_pipeline(f"{WM} > o.updated_at"), "is an upper bound"),
        ("equality", one_pipeline(f"o.updated_at = {WM}"), "is compared with ="),
        ("inequality", one_pipeline(f"o.updated_at != {WM}"), "is compared with !="),
        (
            "function on the cursor side",
            one_pipeline(f"date_trunc('day', o.updated_at) > {WM}"),
            "has a function or expression on the cursor side",
        ),
        (
            "expression on the cursor side",
            one_pipeline(f"o.id + 1 > {WM}"),
            "has a function or expression on the cursor side",
        ),
        (
            "column on the value side",
            one_pipeline(f"o.updated_at > {WM} + o.amount * INTERVAL 1 SECOND"),
            "has a column or a subquery on its value side",
        ),
        (
            "outside a comparison",
            {
                "p": f"INSERT INTO {{{{ sink('lake', 'p') }}}}\n"
                f"SELECT {WM} AS since, * FROM {{{{ source('files', 'orders') }}}}\n"
            },
            "is not inside a comparison",
        ),
        (
            "unqualified cursor, several base tables",
            one_pipeline(
                f"updated_at > {WM}",
                JOINED,
            ),
            "compares the unqualified cursor 'updated_at' in a query that reads several tables (o, c)",
        ),
        (
            "cursor of another dataset",
            one_pipeline(
                f"c.updated_at > {WM}",
                JOINED,
            ),
            "which traces to source('files', 'customers'), not to the dataset the call names",
        ),
        (
            "never source()d",
            {
                "p": "INSERT INTO {{ sink('lake', 'p') }}\n"
                "SELECT * FROM {{ source('files', 'customers') }} AS c\n"
                f"WHERE c.updated_at > {WM}\n"
            },
            "names a dataset the pipeline never source()s",
        ),
    ],
)
def test_pz0224(project_dir: Path, case: str, pipelines: dict[str, str], cause: str) -> None:
    result = validate(project_dir, pipelines)
    assert result.exit_code == 2, case
    found = errors(result)
    assert [code for code, _, _ in found] == ["PZ0224"], (case, result.output)
    _, place, message = found[0]
    assert re.fullmatch(r"pipelines/p\.sql:\d+:\d+", place), place
    assert message.startswith("pipeline 'p': watermark('files', 'orders') ")
    assert cause in message, message
    step = next_steps(result)[0]
    if case == "never source()d":
        assert "add {{ source('files', 'orders') }}" in step
    else:
        assert "watermark('files', 'orders')" in step


def test_pz0224_points_at_each_call(project_dir: Path) -> None:
    sql = (
        "INSERT INTO {{ sink('lake', 'p') }}\nSELECT * FROM {{ source('files', 'orders') }} AS o\n"
        f"WHERE o.updated_at > {WM}\n  AND o.updated_at < {WM}\n"
    )
    result = validate(project_dir, {"p": sql})
    assert [(c, p) for c, p, _ in errors(result)] == [("PZ0224", "pipelines/p.sql:4:22")]


# -- PZ0225 --------------------------------------------------------------------------------------------------


def _sources_with(sync: str) -> str:
    return f"""
        connector: localfiles
        connection: {{ root: data }}
        datasets:
          orders:
            format: csv
            path: orders.csv
            columns: {ORDERS_COLUMNS}
            sync: {sync}
          customers:
            format: csv
            path: customers.csv
            columns: {{ id: bigint, name: varchar, updated_at: timestamp }}
    """


def test_pz0225_declared_in_yaml_and_sql(project_dir: Path) -> None:
    result = validate(
        project_dir,
        one_pipeline(f"o.updated_at > {WM}"),
        **{"sources/files.yml": _sources_with("{ mode: incremental, cursor: updated_at }")},
    )
    found = [e for e in errors(result) if e[0] == "PZ0225"]
    assert len(found) == 1, result.output
    _, place, message = found[0]
    assert place == "pipelines/p.sql:3:22"
    assert (
        "source 'files' dataset 'orders' is declared incremental twice: in YAML (sync: mode: incremental at "
        in message
    )
    assert "sources/files.yml:8:13" in message and "pipeline 'p'" in message
    assert "pick one route" in next_steps(result)[[e[0] for e in errors(result)].index("PZ0225")]


def test_pz0225_watermark_on_a_windowed_dataset(project_dir: Path) -> None:
    result = validate(
        project_dir,
        one_pipeline(f"o.updated_at > {WM}"),
        **{"sources/files.yml": _sources_with("{ mode: incremental, cursor: updated_at, window: 1d }")},
    )
    found = [e for e in errors(result) if e[0] == "PZ0225"]
    assert len(found) == 1, result.output
    assert "targets a windowed dataset" in found[0][2] and "windowed backfill is YAML-only" in found[0][2]


def test_pz0225_two_pipelines_two_cursors(project_dir: Path) -> None:
    pipelines = {
        "a": one_pipeline(f"o.updated_at > {WM}")["p"].replace("'p'", "'a'"),
        "b": one_pipeline(f"o.created_at > {WM}")["p"].replace("'p'", "'b'"),
    }
    result = validate(project_dir, pipelines)
    found = errors(result)
    assert [c for c, _, _ in found] == ["PZ0225"], result.output
    _, place, message = found[0]
    assert place == "pipelines/b.sql:3:22"
    assert "pipeline 'b' compares cursor 'created_at'" in message
    assert "pipeline 'a' (pipelines/a.sql:3:22) compares 'updated_at'" in message


# -- PZ0226 --------------------------------------------------------------------------------------------------


def test_pz0226_another_pipeline_reads_the_dataset_unfiltered(project_dir: Path) -> None:
    pipelines = {
        **one_pipeline(f"o.updated_at > {WM}"),
        "q": "INSERT INTO {{ sink('lake', 'q') }}\n"
        "SELECT count(*) AS n FROM {{ source('files', 'orders') }}\n",
    }
    result = validate(project_dir, pipelines)
    found = errors(result)
    assert [(c, p) for c, p, _ in found] == [("PZ0226", "pipelines/q.sql:2:27")], result.output
    assert (
        "declared incremental in SQL by pipeline 'p', but pipeline 'q' reads it with no watermark() filter"
        in found[0][2]
    )
    assert "would silently read only the rows after the watermark" in found[0][2]
    step = next_steps(result)[0]
    assert (
        "<alias>.updated_at > {{ watermark('files', 'orders') }}" in step
        and "sync: { mode: incremental" in step
    )


def test_pz0226_the_same_pipeline_reads_it_twice(project_dir: Path) -> None:
    sql = (
        "INSERT INTO {{ sink('lake', 'p') }}\n"
        f"SELECT o.id FROM {{{{ source('files', 'orders') }}}} AS o WHERE o.updated_at > {WM}\n"
        "UNION ALL\nSELECT x.id FROM {{ source('files', 'orders') }} AS x\n"
    )
    result = validate(project_dir, {"p": sql})
    found = errors(result)
    assert [c for c, _, _ in found] == ["PZ0226"], result.output
    assert "pipeline 'p' reads it in a place no recognised watermark() comparison filters" in found[0][2]


def test_pz0226_is_gated_behind_pz0225_and_pz0227(project_dir: Path) -> None:
    unfiltered = "INSERT INTO {{ sink('lake', 'q') }}\nSELECT * FROM {{ source('files', 'orders') }}\n"
    result = validate(project_dir, {**one_pipeline(f"o.amount > {WM}"), "q": unfiltered})
    assert [c for c, _, _ in errors(result)] == ["PZ0227"], result.output


# -- PZ0227 --------------------------------------------------------------------------------------------------


def test_pz0227_cursor_absent_from_the_contract(project_dir: Path) -> None:
    result = validate(project_dir, one_pipeline(f"o.note > {WM}"))
    found = errors(result)
    # the column is missing from the staging table too: tier 4 says so in its words
    assert [c for c, _, _ in found] == ["PZ0412", "PZ0227"], result.output
    _, place, message = found[1]
    assert place.startswith("sources/files.yml:7:")
    assert message == (
        "source 'files' dataset 'orders': the watermark cursor 'note' (inferred from pipeline 'p') is not in "
        "the dataset's columns: contract"
    )
    assert (
        "e.g. note: timestamp (allowed: int, bigint, decimal, date, timestamp, timestamptz)"
        in next_steps(result)[1]
    )


def test_pz0227_cursor_of_a_type_outside_the_allowed_set(project_dir: Path) -> None:
    result = validate(project_dir, one_pipeline(f"o.amount > {WM}"))
    found = errors(result)
    assert [c for c, _, _ in found] == ["PZ0227"], result.output
    assert (
        "is declared 'double', which is not a cursor type "
        "(int, bigint, decimal, date, timestamp, timestamptz)" in found[0][2]
    )


def test_pz0227_dataset_without_a_contract(project_dir: Path) -> None:
    sources = """
        connector: localfiles
        connection: { root: data }
        datasets:
          orders: { format: csv, path: orders.csv }
          customers: { format: csv, path: customers.csv }
    """
    result = validate(project_dir, one_pipeline(f"o.updated_at > {WM}"), **{"sources/files.yml": sources})
    found = [e for e in errors(result) if e[0] == "PZ0227"]
    assert len(found) == 1 and "has no columns: contract to declare it in" in found[0][2], result.output


@pytest.mark.parametrize("declared", ["int", "bigint", "'decimal(18,2)'", "date", "timestamp"])
def test_every_allowed_cursor_type_validates(project_dir: Path, declared: str) -> None:
    sources = BASE["sources/files.yml"].replace(
        "updated_at: timestamp, created_at", f"updated_at: {declared}, created_at"
    )
    result = validate(project_dir, one_pipeline(f"o.updated_at > {WM}"), **{"sources/files.yml": sources})
    assert errors(result) == [], result.output


# -- all at once -------------------------------------------------------------------------------------


def test_one_project_gets_every_code_at_once(project_dir: Path) -> None:
    pipelines = {
        "upper": one_pipeline(
            "c.updated_at < {{ watermark('files', 'customers') }}", "{{ source('files', 'customers') }} AS c"
        )["p"].replace("'p'", "'upper'"),
        "yaml_too": one_pipeline(f"o.updated_at > {WM}")["p"].replace("'p'", "'yaml_too'"),
        "events": "INSERT INTO {{ sink('lake', 'events') }}\n"
        "SELECT * FROM {{ source('files', 'events') }} AS e\n"
        "WHERE e.at > {{ watermark('files', 'events') }}\n",
        "audit": "INSERT INTO {{ sink('lake', 'audit') }}\n"
        "SELECT * FROM {{ source('files', 'audit') }} AS a\n"
        "WHERE a.seq > {{ watermark('files', 'audit') }}\n",
        "audit_all": "INSERT INTO {{ sink('lake', 'audit_all') }}\n"
        "SELECT * FROM {{ source('files', 'audit') }}\n",
    }
    sources = f"""
        connector: localfiles
        connection: {{ root: data }}
        datasets:
          orders:
            format: csv
            path: orders.csv
            columns: {ORDERS_COLUMNS}
            sync: {{ mode: incremental, cursor: updated_at }}
          customers:
            format: csv
            path: customers.csv
            columns: {{ id: bigint, name: varchar, updated_at: timestamp }}
          events:
            format: csv
            path: events.csv
            columns: {{ id: bigint, at: varchar }}
          audit:
            format: csv
            path: audit.csv
            columns: {{ id: bigint, seq: bigint }}
    """
    sinks = f"{LAKE}  audit: {{ strategy: append }}\n"
    result = validate(project_dir, pipelines, **{"sources/files.yml": sources, "sinks/lake.yml": sinks})
    codes = sorted(c for c, _, _ in errors(result))
    assert codes == ["PZ0214", "PZ0224", "PZ0225", "PZ0226", "PZ0227"], result.output
    assert result.exit_code == 2
    assert len(next_steps(result)) == len(codes)
    places = {c: p for c, p, _ in errors(result)}
    assert places["PZ0224"].startswith("pipelines/upper.sql:3:")
    assert places["PZ0225"].startswith("pipelines/yaml_too.sql:3:")
    assert places["PZ0226"] == "pipelines/audit_all.sql:2:15"
    assert places["PZ0227"].startswith("sources/files.yml:")
    assert places["PZ0214"].startswith(f"sinks/lake.yml:{len(OUTPUTS) + 4}:")


# -- PZ0214 --------------------------------------------------------------------------------------------------

APPEND = "connector: localfiles\nconnection: { root: out }\noutputs:\n  final: { strategy: append }\n"


def _chain(where: str) -> dict[str, str]:
    return {
        "stage": f"SELECT o.* FROM {{{{ source('files', 'orders') }}}} AS o {where}\n",
        "enrich": "SELECT * FROM {{ ref('stage') }}\n",
        "final": "INSERT INTO {{ sink('lake', 'final') }}\nSELECT * FROM {{ ref('enrich') }}\n",
    }


def test_pz0214_sql_declared_dataset_through_a_chain_into_append(project_dir: Path) -> None:
    result = validate(project_dir, _chain(f"WHERE o.updated_at > {WM}"), **{"sinks/lake.yml": APPEND})
    found = errors(result)
    assert [(c, p) for c, p, _ in found] == [("PZ0214", "sinks/lake.yml:4:12")], result.output
    assert found[0][2] == (
        "sink 'lake' output 'final' appends what pipeline 'final' computes from incremental source 'files' "
        "dataset 'orders' (source('files', 'orders') -> stage -> enrich -> final): a retried write or a "
        "re-read overlap would append the same rows again"
    )
    assert next_steps(result)[0].startswith("add duplicates: accept to output 'final' in sinks/lake.yml")


def test_pz0214_yaml_declared_dataset_into_append(project_dir: Path) -> None:
    result = validate(
        project_dir,
        _chain(""),
        **{
            "sinks/lake.yml": APPEND,
            "sources/files.yml": _sources_with("{ mode: incremental, cursor: updated_at }"),
        },
    )
    assert [c for c, _, _ in errors(result)] == ["PZ0214"], result.output


@pytest.mark.parametrize(
    "output",
    ["{ strategy: append, duplicates: accept }", "{ strategy: merge, keys: [id] }", "{ strategy: replace }"],
)
def test_pz0214_not_for_accepted_duplicates_merge_or_replace(project_dir: Path, output: str) -> None:
    sinks = f"connector: localfiles\nconnection: {{ root: out }}\noutputs:\n  final: {output}\n"
    result = validate(project_dir, _chain(f"WHERE o.updated_at > {WM}"), **{"sinks/lake.yml": sinks})
    assert [c for c, _, _ in errors(result) if c == "PZ0214"] == [], result.output


def test_non_incremental_append_is_untouched(project_dir: Path) -> None:
    result = validate(project_dir, _chain(""), **{"sinks/lake.yml": APPEND})
    assert result.exit_code == 0, result.output
    assert result.lines[-1].startswith("ok: project is valid")


# -- templates around the call ------------------------------------------------------------------


def test_an_ephemeral_pipeline_declares_and_its_consumer_binds_the_literal(project_dir: Path) -> None:
    pipelines = {
        "recent": f"SELECT o.* FROM {{{{ source('files', 'orders') }}}} AS o WHERE o.updated_at >= {WM}\n",
        "p": "INSERT INTO {{ sink('lake', 'p') }}\nSELECT id, updated_at FROM {{ ref('recent') }}\n",
    }
    result = validate(project_dir, pipelines, **{"pipelines/recent.yml": "materialized: ephemeral\n"})
    assert errors(result) == [], result.output


def test_calls_made_by_jinja_and_a_secret_env_render_alike(project_dir: Path) -> None:
    sql = (
        "INSERT INTO {{ sink('lake', 'p') }}\n"
        "SELECT * FROM {{ source('files', 'orders') }} AS o\n"
        "WHERE o.customer_id::VARCHAR <> {{ env('TOKEN') }}\n"
        "{% for ds in ['orders'] %}  AND o.updated_at > {{ watermark('files', ds) }}\n{% endfor %}"
    )
    project_yml = "name: shop\nenv:\n  TOKEN: { default: s3cr3t-value, secret: true }\n"
    result = validate(project_dir, {"p": sql}, **{"project.yml": project_yml})
    assert errors(result) == [], result.output
    assert "s3cr3t-value" not in result.output
