"""The long crash sweep behind tests/functional/test_retry_crash.py: `kill -9` at every run_results.json write
of a run and at every named seam, for replace and merge, on PostgreSQL, MariaDB, DuckDB and parquet sinks at
once; after each kill `pz retry` must refuse (PZ0503) and change nothing, and `pz run` must leave every target
exactly as one clean run would. Prints one line per case and a summary; exits 1 when any case fails.

    .venv/bin/python benchmarks/retry_crash_sweep.py             # every case (several minutes)
    .venv/bin/python benchmarks/retry_crash_sweep.py --writes 12 --strategies replace
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import fresh_pg_database  # noqa: E402
from tests.functional.test_retry_crash import SINKS, _crash_then_rerun, _mariadb  # noqa: E402

SEAMS = [
    "source.landed@src_files__names:kill",
    "source.landed@src_files__amounts:kill",
    "pipeline.start:kill",
    *[f"sink.write@{s}.out:kill" for s in SINKS],
    *[f"sink.before_swap@{s}.out:kill" for s in SINKS],
    *[f"sink.committed@{s}.out:kill" for s in SINKS],
]
MERGE_SEAMS = [f"sink.before_merge@{s}.out:kill" for s in ("dk", "my", "pg")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # this project's run writes run_results.json 9 times: at its start, after each of 7 nodes, at its end
    parser.add_argument("--writes", type=int, default=9, help="kill at run_results.json writes 1..N")
    parser.add_argument("--strategies", default="replace,merge")
    args = parser.parse_args()
    cases: list[tuple[str, str]] = []
    for strategy in args.strategies.split(","):
        seams = [s for s in SEAMS if strategy == "replace" or "before_swap" not in s]
        seams += MERGE_SEAMS if strategy == "merge" else []
        seams += [f"results.before_rename@{n}:kill" for n in range(1, args.writes + 1)]
        cases += [(strategy, seam) for seam in seams]
    failed = 0
    start = time.perf_counter()
    for strategy, seam in cases:
        with tempfile.TemporaryDirectory() as tmp, fresh_pg_database() as pg_db, _mariadb() as my_db:
            t = time.perf_counter()
            try:
                _crash_then_rerun(Path(tmp) / "proj", pg_db, my_db, strategy, seam)
                verdict = "ok"
            except AssertionError as exc:
                verdict = "FAIL " + (str(exc).splitlines() or ["assertion"])[0][:160]
                failed += 1
            except Exception:
                verdict = "ERROR " + traceback.format_exc().splitlines()[-1][:160]
                failed += 1
            print(f"{strategy:<8} {seam:<44} {time.perf_counter() - t:5.1f}s  {verdict}", flush=True)
    print(f"{len(cases)} case(s), {failed} failed, {time.perf_counter() - start:.0f}s")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
