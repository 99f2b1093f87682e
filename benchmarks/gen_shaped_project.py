"""Write an N-pipeline pz project of one of several shapes, and the same models as a dbt project (dbt-duckdb,
offline), so that `pz validate` and `dbt parse` read the same DAG. Deterministic (seeded).

Every shape is a diamond DAG: pipeline i (i >= 2) reads pipeline i-1 and one more among the `spread`
pipelines before it (seeded); the first two read a source dataset (20 localfiles datasets with a declared
`columns:` contract). Every 10th pipeline writes to a sink (pz only: dbt has none); all filter on a var.

- `joins`: every pipeline joins its two inputs (5 columns), the issue's shape.
- `wide`: 40-120 columns per pipeline (seeded), each combined from the two inputs or the source it also joins.
- `cte`: five CTEs per pipeline (filter, rename, join, window, final), their column lists written as Jinja
  loops over 12 metric columns.
- `checks`: `joins` with a sidecar of four checks on every pipeline (not_null, unique, accepted_values, an
  expression; dbt: the first three as data_tests in one schema.yml) and one singular test per pipeline.

    .venv/bin/python benchmarks/gen_shaped_project.py --shape wide --pipelines 2000 --out /tmp/wide_2000
"""

from __future__ import annotations

import argparse
import random
import shutil
from pathlib import Path

from gen_diamond_project import DATASETS, inputs, write

SHAPES = ("joins", "wide", "cte", "checks")
SINK_EVERY = 10
JOINS_COLUMNS = {
    "id": "bigint",
    "grp": "integer",
    "amount": "decimal(12,2)",
    "name": "varchar",
    "updated_at": "timestamp",
}
WIDE_TYPES = ("bigint", "double", "varchar", "date", "boolean")
WIDE_MAX = 120
METRICS = [f"m{k}" for k in range(12)]
CTE_COLUMNS = {"id": "bigint", "grp": "integer", "name": "varchar", "updated_at": "timestamp"} | {
    m: "double" for m in METRICS
}
REF = "{{{{ ref('{name}') }}}}"
VAR = "{{ var('min_amount') }}"


def source_columns(shape: str) -> dict[str, str]:
    if shape == "wide":
        return {"id": "bigint"} | {f"c{j:03d}": WIDE_TYPES[j % len(WIDE_TYPES)] for j in range(1, WIDE_MAX)}
    return CTE_COLUMNS if shape == "cte" else JOINS_COLUMNS


def _source(i: int) -> str:
    return f"{{{{ source('files', 'raw_{i % DATASETS}') }}}}"


def _ref(r: int) -> str:
    return REF.format(name=f"p_{r:05d}")


def joins_sql(i: int, refs: tuple[int, ...]) -> str:
    if not refs:
        columns = "s.id, s.grp, s.amount, s.name, s.updated_at"
        return f"SELECT {columns}\nFROM {_source(i)} AS s\nWHERE s.amount >= {VAR}\n"
    return (
        "SELECT a.id, a.grp, a.amount + b.amount AS amount, coalesce(a.name, b.name) AS name,\n"
        "       greatest(a.updated_at, b.updated_at) AS updated_at\n"
        f"FROM {_ref(refs[0])} AS a\nJOIN {_ref(refs[1])} AS b ON b.id = a.id AND b.grp = a.grp\n"
        f"WHERE a.amount >= {VAR}\n"
    )


def _combined(column: str, kind: str) -> str:
    a, b = f"a.{column}", f"b.{column}"
    return {
        "bigint": f"{a} + {b}",
        "double": f"{a} * 0.5 + {b}",
        "varchar": f"coalesce({a}, {b})",
        "date": f"greatest({a}, {b})",
        "boolean": f"{a} OR {b}",
    }[kind]


def wide_sql(i: int, refs: tuple[int, ...], widths: list[int]) -> str:
    kinds = source_columns("wide")
    names = list(kinds)[: widths[i]]
    if not refs:
        return f"SELECT {', '.join(f's.{c}' for c in names)}\nFROM {_source(i)} AS s\nWHERE s.c001 >= {VAR}\n"
    wa, wb = widths[refs[0]], widths[refs[1]]
    items = ["a.id"]
    for j, column in enumerate(names[1:], start=1):
        if j < wa and j < wb:
            items.append(f"{_combined(column, kinds[column])} AS {column}")
        else:
            items.append(f"{'a' if j < wa else 'b' if j < wb else 's'}.{column}")
    return (
        "SELECT " + ",\n       ".join(items) + f"\nFROM {_ref(refs[0])} AS a\n"
        f"JOIN {_ref(refs[1])} AS b ON b.id = a.id\nJOIN {_source(i)} AS s ON s.id = a.id\n"
        f"WHERE a.c001 >= {VAR}\n"
    )


def _loop(body: str, sep: str = ", ") -> str:
    return f"{{% for m in metrics %}}{body}{{{{ '{sep}' if not loop.last }}}}{{% endfor %}}"


def cte_sql(i: int, refs: tuple[int, ...]) -> str:
    head = "{% set metrics = [" + ", ".join(f"'{m}'" for m in METRICS) + "] %}\n"
    if not refs:
        return head + (
            f"WITH s AS (\n  SELECT * FROM {_source(i)}\n)\nSELECT id, grp, name, updated_at, "
            + _loop("{{ m }}")
            + f"\nFROM s\nWHERE m0 >= {VAR}\n"
        )
    return head + (
        f"WITH a AS (\n  SELECT * FROM {_ref(refs[0])} WHERE m0 >= {VAR}\n), b AS (\n  SELECT id, "
        + _loop("{{ m }} AS b_{{ m }}")
        + f" FROM {_ref(refs[1])}\n), s AS (\n  SELECT id, grp, name, updated_at FROM {_source(i)}\n"
        "), joined AS (\n  SELECT a.id, s.grp, coalesce(a.name, s.name) AS name,\n"
        "         greatest(a.updated_at, s.updated_at) AS updated_at,\n         "
        + _loop("a.{{ m }} + b.b_{{ m }} AS {{ m }}", ",\n         ")
        + "\n  FROM a JOIN b ON b.id = a.id JOIN s ON s.id = a.id\n), ranked AS (\n"
        "  SELECT *, row_number() OVER (PARTITION BY grp ORDER BY updated_at DESC) AS rn FROM joined\n)\n"
        "SELECT id, grp, name, updated_at, " + _loop("{{ m }}") + "\nFROM ranked\nWHERE rn <= 100\n"
    )


def model_sql(shape: str, i: int, refs: tuple[int, ...], widths: list[int]) -> str:
    if shape == "wide":
        return wide_sql(i, refs, widths)
    if shape == "cte":
        return cte_sql(i, refs)
    return joins_sql(i, refs)


def _type_yaml(kind: str) -> str:
    return repr(kind) if "(" in kind else kind


PZ_CHECKS = (
    "checks:\n  - not_null: { columns: [id, amount] }\n  - unique: { columns: [id] }\n"
    "  - accepted_values: { column: grp, values: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] }\n"
    '  - expression: { sql: "amount >= 0", name: non_negative_amount }\n'
)


def singular_sql(i: int) -> str:
    return f"SELECT id, amount\nFROM {_ref(i)}\nWHERE amount < 0 AND name IS NULL\n"


def pz_project(root: Path, shape: str, graph: list[tuple[int, ...]], widths: list[int]) -> None:
    columns = source_columns(shape)
    cols = ", ".join(f"{c}: {_type_yaml(t)}" for c, t in columns.items())
    datasets = "".join(
        f"  raw_{d}:\n    format: parquet\n    path: raw_{d}.parquet\n    columns: {{ {cols} }}\n"
        for d in range(DATASETS)
    )
    sinks = [i for i in range(len(graph)) if i % SINK_EVERY == 0]
    files = {
        "project.yml": f'name: {shape}\nvars:\n  min_amount: {{ type: decimal, default: "0" }}\n',
        "sources/files.yml": f"connector: localfiles\nconnection: {{ root: data }}\ndatasets:\n{datasets}",
        "sinks/lake.yml": "connector: localfiles\nconnection: { root: out }\noutputs:\n"
        + "".join(f"  p_{i:05d}: {{ format: parquet }}\n" for i in sinks),
    }
    for i, refs in enumerate(graph):
        sql = model_sql(shape, i, refs, widths)
        if i % SINK_EVERY == 0:
            sql = f"INSERT INTO {{{{ sink('lake', 'p_{i:05d}') }}}}\n" + sql
        files[f"pipelines/p_{i:05d}.sql"] = sql
        if shape == "checks":
            files[f"pipelines/p_{i:05d}.yml"] = PZ_CHECKS
            files[f"tests/t_{i:05d}.sql"] = singular_sql(i)
    write(root, files)


def dbt_project(root: Path, shape: str, graph: list[tuple[int, ...]], widths: list[int]) -> None:
    columns = "".join(
        f"          - name: {c}\n            data_type: {t}\n" for c, t in source_columns(shape).items()
    )
    tables = "".join(f"      - name: raw_{d}\n        columns:\n{columns}" for d in range(DATASETS))
    files = {
        "dbt_project.yml": (
            f"name: {shape}\nversion: '1.0'\nconfig-version: 2\nprofile: {shape}\nmodel-paths: [models]\n"
            f"test-paths: [tests]\nvars:\n  min_amount: 0\nmodels:\n  {shape}:\n    +materialized: table\n"
        ),
        "profiles.yml": (
            f"{shape}:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n      path: {shape}.duckdb\n"
            "      threads: 1\n"
        ),
        "models/sources.yml": f"version: 2\nsources:\n  - name: files\n    tables:\n{tables}",
    }
    tested = []
    for i, refs in enumerate(graph):
        files[f"models/p_{i:05d}.sql"] = model_sql(shape, i, refs, widths)
        if shape == "checks":
            tested.append(
                f"  - name: p_{i:05d}\n    columns:\n"
                "      - name: id\n        data_tests: [not_null, unique]\n"
                "      - name: amount\n        data_tests: [not_null]\n"
                "      - name: grp\n        data_tests:\n          - accepted_values:\n"
                "              arguments:\n"
                "                values: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n                quote: false\n"
            )
            files[f"tests/t_{i:05d}.sql"] = singular_sql(i)
    if tested:
        files["models/schema.yml"] = "version: 2\nmodels:\n" + "".join(tested)
    write(root, files)


def generate(
    out: Path, shape: str, pipelines: int, spread: int = 10, dbt: bool = True, seed: int = 11
) -> None:
    """`out`/pz is the pz project, `out`/dbt the dbt project (when `dbt`)."""
    if shape not in SHAPES:
        raise SystemExit(f"unknown shape {shape!r}: one of {', '.join(SHAPES)}")
    if out.exists():
        shutil.rmtree(out)
    graph = inputs(pipelines, spread)
    rng = random.Random(seed)
    widths = [rng.randint(40, WIDE_MAX) for _ in range(pipelines)]
    pz_project(out / "pz", shape, graph, widths)
    if dbt:
        dbt_project(out / "dbt", shape, graph, widths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=SHAPES, required=True)
    parser.add_argument("--pipelines", type=int, default=2000)
    parser.add_argument("--spread", type=int, default=10, help="the second input among the K before i-1")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--no-dbt", action="store_true", help="write only the pz project")
    args = parser.parse_args()
    generate(args.out, args.shape, args.pipelines, args.spread, dbt=not args.no_dbt)
    print(f"wrote {args.shape} x {args.pipelines} to {args.out}/pz" + ("" if args.no_dbt else " and dbt"))


if __name__ == "__main__":
    main()
