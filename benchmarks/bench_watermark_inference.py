"""SQL-route inference cost: `pz validate` on generated projects where every pipeline declares its dataset
incremental with watermark() (through a CTE, a subquery and a join), against the same projects with the
watermark() comparison replaced by a constant. Prints, per size, the time of the inference pass alone
(parse every calling pipeline once in one DuckDB call, analyse, check) and of the whole compile, to show both
stay linear in the number of pipelines.

    .venv/bin/python benchmarks/bench_watermark_inference.py --sizes 100,500,2000 --repeat 3
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from pipelinez.compile.compiler import compile_project
from pipelinez.compile.semantic import analyse_pipelines
from pipelinez.compile.templating import Templater
from pipelinez.compile.values import resolve_values
from pipelinez.compile.watermark_rules import check_sql_incremental
from pipelinez.config.loader import load_project

QUERY = """INSERT INTO {{{{ sink('lake', 'p{i}') }}}}
WITH recent AS (SELECT * FROM {{{{ source('files', 'd{i}') }}}})
SELECT r.id, c.name
FROM (SELECT id, customer_id, updated_at FROM recent) AS r
JOIN {{{{ source('files', 'customers') }}}} AS c ON c.id = r.customer_id
WHERE r.updated_at > {value}
"""


def generate(root: Path, size: int, with_watermark: bool) -> None:
    (root / "pipelines").mkdir(parents=True)
    (root / "sources").mkdir()
    (root / "sinks").mkdir()
    (root / "project.yml").write_text("name: bench\n")
    # an incremental dataset feeds an append that accepts repeats (a replace would be PZ0231)
    outputs = "".join(f"  p{i}: {{ strategy: append, duplicates: accept }}\n" for i in range(size))
    (root / "sinks/lake.yml").write_text(
        f"connector: localfiles\nconnection: {{ root: out }}\noutputs:\n{outputs}"
    )
    datasets = ["  customers: { format: csv, path: c.csv, columns: { id: bigint, name: varchar } }"]
    for i in range(size):
        datasets.append(
            f"  d{i}: {{ format: csv, path: d{i}.csv, columns: "
            "{ id: bigint, customer_id: bigint, updated_at: timestamp } }"
        )
        value = f"{{{{ watermark('files', 'd{i}') }}}}" if with_watermark else "TIMESTAMP '2024-01-01'"
        (root / f"pipelines/p{i}.sql").write_text(QUERY.format(i=i, value=value))
    (root / "sources/files.yml").write_text(
        "connector: localfiles\nconnection: { root: data }\ndatasets:\n" + "\n".join(datasets) + "\n"
    )


def measure(root: Path) -> tuple[float, float]:
    """(seconds of the inference pass alone, seconds of the whole compile)."""
    project, _ = load_project(root, partial=True)
    assert project is not None
    values, _ = resolve_values(project, {}, None)
    infos, _, _ = analyse_pipelines(project, Templater(values))
    start = time.perf_counter()
    check_sql_incremental(project, infos)
    inference = time.perf_counter() - start
    start = time.perf_counter()
    compile_project(project)
    return inference, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,500,2000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    heads = ("pipelines", "inference s", "per pipeline ms", "compile s", "no watermark s")
    print(" | ".join(heads))
    print("-" * 71)
    for size in (int(s) for s in args.sizes.split(",")):
        base = Path(tempfile.mkdtemp(prefix="pz-wm-bench-"))
        try:
            generate(base / "wm", size, True)
            generate(base / "plain", size, False)
            runs = [measure(base / "wm") for _ in range(args.repeat)]
            plain = [measure(base / "plain")[1] for _ in range(args.repeat)]
            inference = statistics.median(r[0] for r in runs)
            total = statistics.median(r[1] for r in runs)
            cells = (size, f"{inference:.3f}", f"{inference / size * 1000:.2f}", f"{total:.2f}")
            cells += (f"{statistics.median(plain):.2f}",)
            print(" | ".join(str(c).rjust(len(h)) for c, h in zip(cells, heads, strict=True)))
        finally:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
