"""The floor of a delta run (issue 22): what any tool pays before and while it moves the delta, without pz.

`connect`: start Python, import DuckDB, open a staging file, LOAD the postgres extension (no signature check,
as pz does for the file pip installed), ATTACH PostgreSQL, leave with `os._exit` (as the `pz` console script).
`work`: the same, then the delta's work in plain DuckDB: the newest `--delta` rows of the table (by its
`updated_at` cursor, one row a second as `bench_incremental.py` writes them) into a staging table through
`postgres_query`, appended to a copy of the sink file in one transaction, then `CHECKPOINT`.

    .venv/bin/python benchmarks/delta_floor.py --table events_10000000 --delta 100000 \\
        --sink benchmarks/.data/incremental/pz-incremental/wh.duckdb --runs 7

prints the median wall and CPU (user + system) of each mode over `--runs` fresh processes, alternating. The
sink file is copied once into a temporary folder (its `events` table gains the delta on every `work` run).
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LIBPQ = "host=127.0.0.1 port=5432 dbname=pz_bench_incr user=postgres"


def extension_file() -> str:
    import duckdb_extension_postgres_scanner as shipped

    folder = os.path.dirname(shipped.__file__)
    return glob.glob(f"{folder}/**/*.duckdb_extension", recursive=True)[0]


def child(mode: str, table: str, delta: int, work: Path, extension: str) -> None:
    import duckdb

    staging = work / "staging.duckdb"
    for leftover in (staging, work / "staging.duckdb.wal"):
        leftover.unlink(missing_ok=True)
    con = duckdb.connect(str(staging), config={"allow_unsigned_extensions": True})
    con.execute("SET enable_progress_bar = false")
    con.execute(f"LOAD '{extension}'")
    con.execute(f"ATTACH '{LIBPQ}' AS pg (TYPE postgres, READ_ONLY)")
    if mode == "work":
        window = (
            f"SELECT * FROM {table} WHERE updated_at > "
            f"(SELECT max(updated_at) - interval ''{delta} seconds'' FROM {table})"
        )
        con.execute(f"CREATE TABLE landed AS SELECT * FROM postgres_query('pg', '{window}')")
        con.execute(f"ATTACH '{work / 'wh.duckdb'}' AS wh")
        con.execute("BEGIN TRANSACTION")
        con.execute("INSERT INTO wh.events BY NAME SELECT * FROM landed")
        con.execute("COMMIT")
        con.execute("CHECKPOINT wh")
        con.execute("DETACH wh")
    con.close()
    os._exit(0)


def timed(args: list[str]) -> tuple[float, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(args)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(args)} failed")
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--table", default="events_10000000")
    parser.add_argument("--delta", type=int, default=100_000)
    parser.add_argument("--sink", type=Path, help="a DuckDB file with an `events` table (for `work`)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--child", choices=["connect", "work"], help=argparse.SUPPRESS)
    parser.add_argument("--work-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.table, args.delta, args.work_dir, extension_file())
    modes = ["connect", *(["work"] if args.sink else [])]
    found: dict[str, list[tuple[float, float]]] = {mode: [] for mode in modes}
    with tempfile.TemporaryDirectory(prefix="pz-floor-") as tmp:
        work = Path(tmp)
        if args.sink:
            shutil.copyfile(args.sink, work / "wh.duckdb")
        for run in range(args.runs):
            for mode in modes if run % 2 == 0 else modes[::-1]:
                command = [sys.executable, __file__, "--child", mode, "--table", args.table]
                found[mode].append(timed([*command, "--delta", str(args.delta), "--work-dir", str(work)]))
    for mode, runs in found.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"floor {mode:<8} median of {len(runs)}: wall {wall:.3f} s, cpu {cpu:.3f} s")


if __name__ == "__main__":
    main()
