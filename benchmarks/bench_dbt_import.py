"""`pz import dbt` on a generated dbt project of N models (default 2,000), against `dbt parse` of the same
project when a dbt executable is given. Whole processes, alternating, wall and CPU (user + sys of the child).

    .venv/bin/python benchmarks/bench_dbt_import.py --models 2000 --rounds 3 --dbt /tmp/dbtvenv/bin/dbt

The project (under benchmarks/.data/dbt_<N>/) has 5 seeds, a source, staging models in 20 folders, marts that
join two models each, a config() block in every tenth model, a properties file per folder with a description
and two tests per model, a macro called from every staging model, and an incremental model per folder.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import time
from pathlib import Path

from pz_command import pz_command

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _model(index: int, folder: int) -> tuple[str, str]:
    name = f"m_{folder:02d}_{index:04d}"
    tag = f"t{index % 3}"
    config = "{{ config(materialized='table', tags=['" + tag + "']) }}\n" if index % 10 == 0 else ""
    if index % 100 == 5:
        source = "{{ source('app', 'events_" + f"{folder:02d}" + "') }}"
        body = (
            "{{ config(materialized='incremental', unique_key='id') }}\n"
            f"select id, name, updated_at from {source}\n"
            "{% if is_incremental() %}\nwhere updated_at > (select max(updated_at) from {{ this }})\n"
            "{% endif %}\n"
        )
        return name, body
    if index < 5:
        body = (
            f"select id, name, {{{{ cents_to_dollars('amount') }}}} as amount, updated_at\n"
            f"from {{{{ ref('seed_{index}') }}}}\n"
        )
    else:
        left, right = f"m_{folder:02d}_{index - 1:04d}", f"m_{folder:02d}_{index // 2:04d}"
        if index // 2 >= 5 and (index // 2) % 100 == 5:
            right = f"m_{folder:02d}_0004"
        body = (
            f"with a as (select * from {{{{ ref('{left}') }}}}),\n"
            f"b as (select * from {{{{ ref('{right}') }}}})\n"
            "select a.id, a.name, a.amount + coalesce(b.amount, 0) as amount, a.updated_at\n"
            "from a left join b on a.id = b.id\n"
        )
    return name, config + body


def generate(models: int) -> Path:
    root = HERE / ".data" / f"dbt_{models}"
    if (root / "dbt_project.yml").exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    folders = 20
    _write(
        root / "dbt_project.yml",
        "name: big\nconfig-version: 2\nprofile: big\nmodels:\n  big:\n    +materialized: view\n"
        + "".join(f"    f{f:02d}:\n      +materialized: table\n" for f in range(0, folders, 2)),
    )
    _write(
        root / "profiles.yml",
        "big:\n  target: dev\n  outputs:\n    dev: { type: duckdb, path: big.duckdb }\n",
    )
    for seed in range(5):
        rows = "".join(f"{i},name {i},{i * 7},2024-01-0{1 + i % 9} 10:00:00\n" for i in range(200))
        _write(root / "seeds" / f"seed_{seed}.csv", "id,name,amount,updated_at\n" + rows)
    tables = "".join(
        f"      - name: events_{f:02d}\n        columns:\n          - {{ name: id, data_type: integer }}\n"
        "          - { name: name, data_type: varchar }\n"
        "          - { name: updated_at, data_type: timestamp }\n"
        for f in range(folders)
    )
    _write(root / "models" / "sources.yml", f"version: 2\nsources:\n  - name: app\n    tables:\n{tables}")
    _write(
        root / "macros" / "money.sql",
        "{% macro cents_to_dollars(c) -%}\n    ({{ c }} / 100)::numeric(16, 2)\n{%- endmacro %}\n",
    )
    per_folder = models // folders
    for folder in range(folders):
        props = ["version: 2", "models:"]
        for index in range(per_folder):
            name, sql = _model(index, folder)
            _write(root / "models" / f"f{folder:02d}" / f"{name}.sql", sql)
            props += [
                f"  - name: {name}",
                f"    description: model {index} of folder {folder}",
                "    columns:",
                "      - name: id",
                "        data_tests: [not_null, unique]",
            ]
        _write(root / "models" / f"f{folder:02d}" / "schema.yml", "\n".join(props) + "\n")
    return root


def _timed(command: list[str], cwd: Path) -> tuple[float, float, int]:
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if proc.stderr:
        proc.stderr.close()
    return wall, usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--dbt", default=None, help="a dbt executable (dbt-core with dbt-duckdb) for dbt parse"
    )
    args = parser.parse_args()
    project = generate(args.models)
    out = project.parent / f"{project.name}-pz"
    env_path = f"PYTHONPATH={ROOT}"
    pz = [*pz_command(), "import", "dbt", str(project), "--out", str(out)]
    os.environ["PYTHONPATH"] = str(ROOT)
    rows: dict[str, list[tuple[float, float]]] = {"pz import dbt": []}
    if args.dbt:
        rows["dbt parse"] = []
    for _ in range(args.rounds):
        wall, cpu, code = _timed(pz, project)
        assert code == 0, f"pz import dbt failed ({env_path})"
        rows["pz import dbt"].append((wall, cpu))
        if args.dbt:
            shutil.rmtree(project / "target", ignore_errors=True)
            wall, cpu, code = _timed(
                [args.dbt, "parse", "--no-partial-parse", "--profiles-dir", "."], project
            )
            assert code == 0, "dbt parse failed"
            rows["dbt parse"].append((wall, cpu))
    files = sum(1 for p in out.rglob("*") if p.is_file())
    print(f"{args.models} models, {args.rounds} rounds (alternating); the import wrote {files} files")
    print(f"{'command':<16} {'wall median s':>14} {'wall min s':>11} {'CPU median s':>13}")
    for name, values in rows.items():
        walls = sorted(v[0] for v in values)
        cpus = sorted(v[1] for v in values)
        print(f"{name:<16} {walls[len(walls) // 2]:>14.2f} {walls[0]:>11.2f} {cpus[len(cpus) // 2]:>13.2f}")


if __name__ == "__main__":
    main()
