"""The long crash sweep behind tests/functional/test_state_crash.py: `kill -9` at every state write of a run
(each run_results.json write, the watermark commit before and after, the background mirror of a shared
backend, the lease renewal), on the local `.pz/` backend and on the PostgreSQL backend; after each kill
`pz runs` and `pz state show` must read the state, and the next `pz run` must leave the sink with every
source row once and the watermark advanced. Prints one line per case and a summary; exits 1 when any fails.

    .venv/bin/python benchmarks/state_crash_sweep.py                 # every case (a few minutes)
    .venv/bin/python benchmarks/state_crash_sweep.py --backends local --writes 3
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
from tests.functional.test_state_crash import _kill_and_recover  # noqa: E402

# seam -> whether the run's new watermark is committed when the kill comes
COMMON = {"run.after_nodes": False, "state.commit_watermarks": False, "state.watermarks_committed": True}
SHARED = {"state.mirror": False, "state.lease_renew": False}
SETUP = "CREATE TABLE items (id integer PRIMARY KEY, v text)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # this project's run writes run_results.json 5 times: at its start, after each of 3 nodes, at its end
    parser.add_argument("--writes", type=int, default=5, help="kill at run_results.json writes 1..N")
    parser.add_argument("--backends", default="local,postgres")
    args = parser.parse_args()
    cases: list[tuple[str, str, bool]] = []
    for backend in args.backends.split(","):
        seams = {**COMMON, **(SHARED if backend == "postgres" else {})}
        # the last write is the final record, after the commit: the watermark is in
        seams |= {f"results.before_rename@{n}": n == args.writes for n in range(1, args.writes + 1)}
        cases += [(backend, seam, committed) for seam, committed in seams.items()]
    failed = 0
    start = time.perf_counter()
    for backend, seam, committed in cases:
        with tempfile.TemporaryDirectory() as tmp, fresh_pg_database(SETUP) as db:
            t = time.perf_counter()
            try:
                _kill_and_recover(Path(tmp), db, backend == "postgres", seam, committed)
                verdict = "ok"
            except AssertionError as exc:
                verdict = "FAIL " + (str(exc).splitlines() or ["assertion"])[0][:160]
                failed += 1
            except Exception:
                verdict = "ERROR " + traceback.format_exc().splitlines()[-1][:160]
                failed += 1
            print(f"{backend:<9} {seam:<28} {time.perf_counter() - t:5.1f}s  {verdict}", flush=True)
    print(f"{len(cases)} case(s), {failed} failed, {time.perf_counter() - start:.0f}s")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
