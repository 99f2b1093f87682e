"""Object-store lease benchmark: what each step of the lease and of an atomic state document costs against a
moto S3 server and Azurite on 127.0.0.1 (loopback: the request count matters, the network does not). Each
step is timed `--rounds` times; the table gives the median and the slowest, in milliseconds, and how many
requests the step makes.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_objstore_lease.py --rounds 50
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipelinez.connectors.files.conditional import ConditionalObjects
from pipelinez.connectors.sdk_document import JsonDocument
from pipelinez.connectors.sdk_lease import ObjectLease
from pipelinez.connectors.sdk_objstore import store_of
from tests.objstores import S3_KEY_ID, S3_SECRET, azurite_server, moto_server


def _timed(rounds: int, setup: Callable[[], Any], step: Callable[[Any], None]) -> list[float]:
    times = []
    for _ in range(rounds):
        state = setup()
        start = time.perf_counter()
        step(state)
        times.append((time.perf_counter() - start) * 1000)
    return times


def _steps(objects: ConditionalObjects, rounds: int) -> list[tuple[str, int, list[float]]]:
    def fresh() -> ObjectLease:
        return ObjectLease(objects, f"lease-{secrets.token_hex(4)}", "bench", seconds=60)

    def held() -> ObjectLease:
        lease = fresh()
        lease.acquire()
        return lease

    def expired() -> ObjectLease:
        old = ObjectLease(objects, f"lease-{secrets.token_hex(4)}", "dead", seconds=60, clock=lambda: 0.0)
        old.acquire()  # written at the epoch: long expired
        return ObjectLease(objects, old.key, "taker", seconds=60)

    doc = JsonDocument(objects, "watermarks.json")
    doc.update(lambda _: {"n": 0})
    return [
        ("acquire (free)", 1, _timed(rounds, fresh, lambda lease: lease.acquire())),
        ("acquire (held: PZ0590)", 2, _timed(rounds, held, lambda lease: _refused(objects, lease.key))),
        ("take over (expired)", 3, _timed(rounds, expired, lambda lease: lease.acquire())),
        ("renew", 1, _timed(rounds, held, lambda lease: lease.renew())),
        ("release", 1, _timed(rounds, held, lambda lease: lease.release())),
        ("document update", 2, _timed(rounds, lambda: None, lambda _: doc.update(_bump))),
    ]


def _refused(objects: ConditionalObjects, key: str) -> None:
    try:
        ObjectLease(objects, key, "other", seconds=60).acquire()
    except Exception:
        return
    raise AssertionError("a held lease was acquired twice")


def _bump(doc: dict[str, Any] | None) -> dict[str, Any]:
    return {"n": int((doc or {}).get("n", 0)) + 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    rows: list[tuple[str, str, int, list[float]]] = []
    with moto_server() as s3:
        bucket = s3.bucket(f"pz-bench-{secrets.token_hex(4)}")
        connection = {
            "bucket": bucket,
            "endpoint": s3.endpoint,
            "region": "us-east-1",
            "access_key_id": S3_KEY_ID,
            "secret_access_key": S3_SECRET,
        }
        for name, requests, times in _steps(store_of("s3", connection).conditional(), args.rounds):
            rows.append(("s3 (moto)", name, requests, times))
    with azurite_server() as azure:
        container = azure.container(f"pz-bench-{secrets.token_hex(4)}")
        connection = {"container": container, "connection_string": azure.connection_string}
        for name, requests, times in _steps(store_of("azureblob", connection).conditional(), args.rounds):
            rows.append(("azureblob (Azurite)", name, requests, times))
    print(f"| store | step | requests | median ms | max ms |  ({args.rounds} rounds)")
    print("| --- | --- | --- | --- | --- |")
    for store, name, requests, times in rows:
        print(f"| {store} | {name} | {requests} | {statistics.median(times):.1f} | {max(times):.1f} |")


if __name__ == "__main__":
    main()
