"""Write an N-pipeline pz project whose pipelines share upstream pipelines (diamonds), and the same models
as a dbt project (dbt-duckdb), so both tools parse the same DAG.

Pipeline i reads two earlier pipelines and one source dataset (a localfiles source with a declared
`columns:` contract). With `--spread 1` pipeline i reads i-1 and i-2: every pipeline is the apex of a
diamond over everything before it, the worst case for tools that re-expand views. A larger spread picks the
second input at random (seeded) among the `spread` pipelines before i-1. Leaves write to a sink, every
pipeline uses a var, and with `--checks-every K` every K-th pipeline has two checks (a pz sidecar; dbt tests
in one schema.yml).

    .venv/bin/python benchmarks/gen_diamond_project.py --pipelines 2000 --out benchmarks/.data/diamond_2000
"""

from __future__ import annotations

import argparse
import random
import shutil
from pathlib import Path

DATASETS = 20
COLUMNS = {
    "id": "bigint",
    "grp": "integer",
    "amount": "decimal(12,2)",
    "name": "varchar",
    "updated_at": "timestamp",
}


def inputs(n: int, spread: int, seed: int = 7) -> list[tuple[int, ...]]:
    """The pipelines each pipeline reads: () for the first two, else (i-1, an earlier one)."""
    rng = random.Random(seed)
    out: list[tuple[int, ...]] = []
    for i in range(n):
        if i < 2:
            out.append(())
        elif spread <= 1:
            out.append((i - 1, i - 2))
        else:
            out.append((i - 1, rng.randrange(max(0, i - 1 - spread), i - 1)))
    return out


def model_sql(i: int, refs: tuple[int, ...], ref: str, source: str, var: str) -> str:
    """One pipeline's query; `ref`, `source` and `var` format the calls in the tool's own Jinja."""
    src = source.format(dataset=f"raw_{i % DATASETS}")
    if not refs:
        return (
            f"SELECT s.id, s.grp, s.amount, s.name, s.updated_at\nFROM {src} AS s\nWHERE s.amount >= {var}\n"
        )
    a, b = (ref.format(name=f"p_{r:05d}") for r in refs)
    return (
        "SELECT a.id, a.grp, a.amount + b.amount AS amount, coalesce(a.name, s.name) AS name,\n"
        "       greatest(a.updated_at, s.updated_at) AS updated_at\n"
        f"FROM {a} AS a\n"
        f"JOIN {b} AS b ON b.id = a.id\n"
        f"JOIN {src} AS s ON s.id = a.id AND s.grp = b.grp\n"
        f"WHERE a.amount >= {var}\n"
    )


def leaves(graph: list[tuple[int, ...]]) -> list[int]:
    consumed = {r for refs in graph for r in refs}
    return [i for i in range(len(graph)) if i not in consumed]


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def pz_project(root: Path, graph: list[tuple[int, ...]], checks_every: int) -> None:
    cols = ", ".join(f"{c}: {t!r}" if "(" in t else f"{c}: {t}" for c, t in COLUMNS.items())
    datasets = "".join(
        f"  raw_{d}:\n    format: parquet\n    path: raw_{d}.parquet\n    columns: {{ {cols} }}\n"
        for d in range(DATASETS)
    )
    sinks = leaves(graph)
    files = {
        "project.yml": 'name: diamond\nvars:\n  min_amount: { type: decimal, default: "0" }\n',
        "sources/files.yml": f"connector: localfiles\nconnection: {{ root: data }}\ndatasets:\n{datasets}",
        "sinks/lake.yml": "connector: localfiles\nconnection: { root: out }\noutputs:\n"
        + "".join(f"  p_{i:05d}: {{ format: parquet }}\n" for i in sinks),
    }
    sink_set = set(sinks)
    for i, refs in enumerate(graph):
        sql = model_sql(
            i,
            refs,
            "{{{{ ref('{name}') }}}}",
            "{{{{ source('files', '{dataset}') }}}}",
            "{{ var('min_amount') }}",
        )
        if i in sink_set:
            sql = f"INSERT INTO {{{{ sink('lake', 'p_{i:05d}') }}}}\n" + sql
        files[f"pipelines/p_{i:05d}.sql"] = sql
        if checks_every and i % checks_every == 0:
            files[f"pipelines/p_{i:05d}.yml"] = (
                "checks:\n  - not_null: { columns: [id, amount] }\n  - unique: { columns: [id] }\n"
            )
    write(root, files)


def dbt_project(root: Path, graph: list[tuple[int, ...]], checks_every: int) -> None:
    columns = "".join(f"          - name: {c}\n            data_type: {t}\n" for c, t in COLUMNS.items())
    tables = "".join(f"      - name: raw_{d}\n        columns:\n{columns}" for d in range(DATASETS))
    files = {
        "dbt_project.yml": (
            "name: diamond\nversion: '1.0'\nconfig-version: 2\nprofile: diamond\nmodel-paths: [models]\n"
            "vars:\n  min_amount: 0\nmodels:\n  diamond:\n    +materialized: table\n"
        ),
        "profiles.yml": (
            "diamond:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n      path: diamond.duckdb\n"
            "      threads: 1\n"
        ),
        "models/sources.yml": f"version: 2\nsources:\n  - name: files\n    tables:\n{tables}",
    }
    tested = []
    for i, refs in enumerate(graph):
        files[f"models/p_{i:05d}.sql"] = model_sql(
            i,
            refs,
            "{{{{ ref('{name}') }}}}",
            "{{{{ source('files', '{dataset}') }}}}",
            "{{ var('min_amount') }}",
        )
        if checks_every and i % checks_every == 0:
            tested.append(
                f"  - name: p_{i:05d}\n    columns:\n"
                "      - name: id\n        data_tests: [not_null, unique]\n"
                "      - name: amount\n        data_tests: [not_null]\n"
            )
    if tested:
        files["models/schema.yml"] = "version: 2\nmodels:\n" + "".join(tested)
    write(root, files)


def generate(out: Path, pipelines: int, spread: int = 10, checks_every: int = 0, dbt: bool = True) -> None:
    """`out`/pz is the pz project, `out`/dbt the dbt project (when `dbt`)."""
    if out.exists():
        shutil.rmtree(out)
    graph = inputs(pipelines, spread)
    pz_project(out / "pz", graph, checks_every)
    if dbt:
        dbt_project(out / "dbt", graph, checks_every)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipelines", type=int, default=2000)
    parser.add_argument("--spread", type=int, default=10, help="1: read i-1 and i-2 (densest diamonds)")
    parser.add_argument("--checks-every", type=int, default=0, help="K: every K-th pipeline has checks")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--no-dbt", action="store_true", help="write only the pz project")
    args = parser.parse_args()
    generate(args.out, args.pipelines, args.spread, args.checks_every, dbt=not args.no_dbt)
    print(
        f"wrote {args.pipelines} pipelines to {args.out}/pz" + ("" if args.no_dbt else f" and {args.out}/dbt")
    )


if __name__ == "__main__":
    main()
