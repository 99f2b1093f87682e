"""The object-store primitives of a shared state backend, against a real moto S3 server and Azurite:
conditional writes (`files.conditional`), the lease (`sdk_lease`) and the atomic JSON document
(`sdk_document`). Stores are built the way the engine would, from a connection block (`store_of`)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from pipelinez.connectors.files.conditional import ConditionalObjects, Conflict, Written
from pipelinez.connectors.sdk_document import JsonDocument
from pipelinez.connectors.sdk_lease import LeaseError, ObjectLease
from pipelinez.connectors.sdk_objstore import store_of
from pipelinez.core.diagnostics import PzConnectorError
from tests.objstores import (
    AZURITE_KEY,
    REPO,
    S3_KEY_ID,
    S3_SECRET,
    AzureServer,
    S3Server,
    azurite_server,
    moto_server,
)


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with moto_server() as server:
        yield server


@pytest.fixture(scope="module")
def azure() -> Iterator[AzureServer]:
    with azurite_server() as server:
        yield server


@pytest.fixture(params=["s3", "azureblob"])
def spec(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    """(connector, connection block) of a fresh bucket or container."""
    root = f"pz-{secrets.token_hex(4)}"
    if request.param == "s3":
        server: S3Server = request.getfixturevalue("s3")
        server.bucket(root)
        connection = {
            "bucket": root,
            "endpoint": server.endpoint,
            "region": "us-east-1",
            "access_key_id": S3_KEY_ID,
            "secret_access_key": S3_SECRET,
        }
        return "s3", connection
    az: AzureServer = request.getfixturevalue("azure")
    az.container(root)
    return "azureblob", {"container": root, "connection_string": az.connection_string}


@pytest.fixture
def objects(spec: tuple[str, dict[str, Any]]) -> ConditionalObjects:
    return store_of(*spec).conditional()


# -- conditional writes ----------------------------------------------------------------------------
def test_conditional_put_and_delete(objects: ConditionalObjects) -> None:
    assert objects.read("state/doc") is None
    first = objects.put_if_absent("state/doc", b"one")
    assert isinstance(first, Written) and first.etag
    assert objects.put_if_absent("state/doc", b"two") == Conflict("state/doc", "exists")
    read = objects.read("state/doc")
    assert read is not None and read.data == b"one" and read.etag == first.etag

    assert isinstance(objects.put_if_match("state/doc", b"x", '"not-its-etag"'), Conflict)
    second = objects.put_if_match("state/doc", b"three", first.etag)
    assert isinstance(second, Written) and second.etag != first.etag
    assert isinstance(objects.put_if_match("state/doc", b"stale", first.etag), Conflict)
    assert isinstance(objects.put_if_match("state/none", b"x", first.etag), Conflict)

    assert isinstance(objects.delete_if_match("state/doc", first.etag), Conflict)
    assert objects.read("state/doc") == read.__class__(b"three", second.etag)
    assert objects.delete_if_match("state/doc", second.etag) == Written()
    assert objects.read("state/doc") is None
    assert isinstance(objects.delete_if_match("state/doc", second.etag), Conflict)


def test_racing_creates_exactly_one_wins(objects: ConditionalObjects) -> None:
    results = _race(8, lambda i: objects.put_if_absent("race/one", f"writer {i}".encode()))
    winners = [r for r in results if isinstance(r, Written)]
    assert len(winners) == 1
    assert all(r == Conflict("race/one", "exists") for r in results if not isinstance(r, Written))


def test_store_errors_are_typed_and_keep_secrets_out(spec: tuple[str, dict[str, Any]]) -> None:
    connector, connection = spec
    gone = {**connection, ("bucket" if connector == "s3" else "container"): "pz-no-such-root"}
    objects = store_of(connector, gone).conditional()
    with pytest.raises(OSError) as caught:
        objects.put_if_absent("k", b"data")
    text = str(caught.value)
    assert getattr(caught.value, "transient", None) is False
    for secret in (S3_SECRET, AZURITE_KEY):
        assert secret not in text


def test_conditional_calls_under_a_sas_and_its_signature_never_in_errors(azure: AzureServer) -> None:
    from tests.functional.test_connector_azureblob import account_sas, sas_connection

    root = azure.container(f"pz-{secrets.token_hex(4)}")
    writer = store_of(
        "azureblob", {"container": root, "connection_string": sas_connection(azure, account_sas())}
    )
    lease = ObjectLease(writer.conditional(), "lock", "sas-run", seconds=30)
    lease.acquire()
    assert lease.release()
    sas = account_sas("rl")  # may read and list, not write
    reader = store_of("azureblob", {"container": root, "connection_string": sas_connection(azure, sas)})
    with pytest.raises(OSError) as caught:
        ObjectLease(reader.conditional(), "lock", "reader", seconds=30).acquire()
    sig = sas.rsplit("sig=", 1)[1]
    assert "403" in str(caught.value)
    assert sig not in str(caught.value) and unquote(sig) not in str(caught.value)


def test_a_store_without_conditional_writes_is_pz0593(tmp_path: Path) -> None:
    from pipelinez.connectors.files.objects import ObjectStore

    class Plain(ObjectStore):
        def identity(self) -> tuple[str, ...]:
            return ("plain",)

        def secret_options(self) -> str:
            return ""

        def make_filesystem(self):  # type: ignore[no-untyped-def]
            raise NotImplementedError

    with pytest.raises(PzConnectorError) as caught:
        Plain("root").conditional()
    assert caught.value.code == "PZ0593"


# -- the lease -------------------------------------------------------------------------------------
def test_racing_leases_have_exactly_one_holder(objects: ConditionalObjects) -> None:
    leases = [ObjectLease(objects, "lock", f"run-{i}", seconds=30) for i in range(6)]
    results = _race(len(leases), lambda i: leases[i].acquire())
    winners = [i for i, r in enumerate(results) if not isinstance(r, BaseException)]
    assert len(winners) == 1
    winner = leases[winners[0]]
    for r in results:
        if isinstance(r, BaseException):
            assert isinstance(r, LeaseError) and r.code == "PZ0590"
            assert r.holder is not None and r.holder.run_id == winner.run_id
            assert winner.run_id in r.message
    assert winner.held and winner.holder().token == winner.token  # type: ignore[union-attr]
    assert winner.release()
    assert objects.read("lock") is None


def test_renewal_keeps_the_lease_past_its_length(objects: ConditionalObjects) -> None:
    with ObjectLease(objects, "lock", "holder", seconds=3) as lease:
        time.sleep(7)  # more than two lease lengths: only renewals keep it
        lease.check()
        other = ObjectLease(objects, "lock", "other", seconds=3)
        with pytest.raises(LeaseError) as caught:
            other.acquire()
        assert caught.value.code == "PZ0590"
        assert "holder" in caught.value.message
    assert objects.read("lock") is None  # released on exit


def test_an_expired_lease_is_taken_over_and_its_old_holder_knows(objects: ConditionalObjects) -> None:
    old = ObjectLease(objects, "lock", "old", seconds=1)
    old.acquire()  # no heartbeat: it expires
    new = ObjectLease(objects, "lock", "new", seconds=30)
    with pytest.raises(LeaseError):
        new.acquire()
    _wait_until_expired(objects, "lock")
    new.acquire()
    assert new.held and not old.held
    with pytest.raises(LeaseError) as caught:
        old.renew()
    assert caught.value.code == "PZ0591"
    with pytest.raises(LeaseError):
        old.check()
    assert old.release() is False  # not ours any more: left to its new holder
    assert new.holder().run_id == "new"  # type: ignore[union-attr]
    assert new.release()


def test_racing_takeovers_of_an_expired_lease_have_one_winner(objects: ConditionalObjects) -> None:
    ObjectLease(objects, "lock", "dead", seconds=0.5).acquire()
    _wait_until_expired(objects, "lock")
    takers = [ObjectLease(objects, "lock", f"taker-{i}", seconds=30) for i in range(6)]
    results = _race(len(takers), lambda i: takers[i].acquire())
    winners = [i for i, r in enumerate(results) if not isinstance(r, BaseException)]
    assert len(winners) == 1
    assert all(isinstance(r, LeaseError) and r.code == "PZ0590" for r in results if r is not None)
    assert objects.read("lock") is not None
    assert takers[winners[0]].holder().run_id == f"taker-{winners[0]}"  # type: ignore[union-attr]


def test_a_lease_object_pz_did_not_write_is_pz0594(objects: ConditionalObjects) -> None:
    objects.put_if_absent("lock", b"not a lease")
    with pytest.raises(LeaseError) as caught:
        ObjectLease(objects, "lock", "run", seconds=5).acquire()
    assert caught.value.code == "PZ0594"


_HOLDER = textwrap.dedent(
    """
    import json, sys, time
    from pipelinez.connectors.sdk_lease import ObjectLease
    from pipelinez.connectors.sdk_objstore import store_of

    connector, connection = json.loads(sys.argv[1])
    lease = ObjectLease(store_of(connector, connection).conditional(), "lock", "killed-run", seconds=3)
    lease.acquire()
    lease.start_heartbeat()
    print("held", flush=True)
    time.sleep(600)
    """
)


def test_a_killed_holder_is_taken_over_after_expiry_never_two_holders(
    spec: tuple[str, dict[str, Any]], objects: ConditionalObjects, tmp_path: Path
) -> None:
    script = tmp_path / "holder.py"
    script.write_text(_HOLDER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, str(script), json.dumps(spec)], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        taker = ObjectLease(objects, "lock", "taker", seconds=30)
        alive_until = time.monotonic() + 7  # over two lease lengths: the heartbeat keeps it
        while time.monotonic() < alive_until:
            with pytest.raises(LeaseError) as caught:
                taker.acquire()
            holder = caught.value.holder
            assert holder is not None and (holder.run_id, holder.pid) == ("killed-run", proc.pid)
            time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    seen_dead_holder = False
    while True:  # the dead holder's lease stands until it expires, then one taker gets it
        try:
            taker.acquire()
            break
        except LeaseError as exc:
            assert exc.code == "PZ0590" and exc.holder is not None
            assert exc.holder.run_id == "killed-run"
            seen_dead_holder = True
            time.sleep(0.2)
    assert seen_dead_holder
    assert taker.held and taker.holder().run_id == "taker"  # type: ignore[union-attr]
    taker.release()


# -- the atomic JSON document ----------------------------------------------------------------------
def test_racing_document_updates_lose_nothing(objects: ConditionalObjects) -> None:
    def add(name: str) -> Any:
        def change(doc: dict[str, Any] | None) -> dict[str, Any]:
            doc = dict(doc or {})
            doc[name] = doc.get(name, 0) + 1
            doc["total"] = doc.get("total", 0) + 1
            return doc

        return change

    def writer(i: int) -> None:
        doc = JsonDocument(objects, "watermarks.json", attempts=200)
        for _ in range(5):
            doc.update(add(f"w{i}"))

    results = _race(4, writer)
    assert results == [None] * 4
    final = JsonDocument(objects, "watermarks.json").read()
    assert final == {"total": 20, "w0": 5, "w1": 5, "w2": 5, "w3": 5}


def test_a_document_that_keeps_changing_is_pz0592_and_nothing_is_written(
    objects: ConditionalObjects,
) -> None:
    doc = JsonDocument(objects, "watermarks.json", attempts=3)
    doc.update(lambda _: {"orders": 1})
    rival = {"n": 0}

    def interfered(current: dict[str, Any] | None) -> dict[str, Any]:
        rival["n"] += 1  # another writer replaces the document after each read
        JsonDocument(objects, "watermarks.json").update(lambda d: {**(d or {}), "rival": rival["n"]})
        return {**(current or {}), "orders": 2}

    with pytest.raises(PzConnectorError) as caught:
        doc.update(interfered)
    assert caught.value.code == "PZ0592"
    assert doc.read() == {"orders": 1, "rival": 3}


def test_a_document_that_is_not_json_is_pz0594(objects: ConditionalObjects) -> None:
    objects.put_if_absent("watermarks.json", b"[1, 2")
    with pytest.raises(PzConnectorError) as caught:
        JsonDocument(objects, "watermarks.json").update(lambda d: {"x": 1})
    assert caught.value.code == "PZ0594"


# -- helpers ---------------------------------------------------------------------------------------
def _race(n: int, call: Any) -> list[Any]:
    """`call(i)` from `n` threads released together: each one's result or exception."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = call(i)
        except BaseException as exc:  # the test inspects it
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _wait_until_expired(objects: ConditionalObjects, key: str) -> None:
    probe = ObjectLease(objects, key, "probe", seconds=1)
    holder = probe.holder()
    assert holder is not None
    while not holder.expired(time.time()):
        time.sleep(0.1)


def test_a_document_guarded_by_a_lost_lease_is_not_written(objects: ConditionalObjects) -> None:
    old = ObjectLease(objects, "lock", "old", seconds=0.5)
    old.acquire()
    doc = JsonDocument(objects, "watermarks.json")
    doc.update(lambda _: {"orders": 1}, guard=old.check)
    _wait_until_expired(objects, "lock")
    ObjectLease(objects, "lock", "new", seconds=30).acquire()
    with pytest.raises(LeaseError) as caught:
        doc.update(lambda _: {"orders": 2}, guard=old.check)
    assert caught.value.code == "PZ0591"
    assert doc.read() == {"orders": 1}


def test_a_holder_that_cannot_renew_stops_holding_after_its_length() -> None:
    with moto_server() as server:  # a server of its own, stopped under the holder
        bucket = server.bucket(f"pz-{secrets.token_hex(4)}")
        connection = {
            "bucket": bucket,
            "endpoint": server.endpoint,
            "region": "us-east-1",
            "access_key_id": S3_KEY_ID,
            "secret_access_key": S3_SECRET,
        }
        objects = store_of("s3", connection).conditional()
        lease = ObjectLease(objects, "lock", "cut-off", seconds=2)
        lease.acquire()
        lease.start_heartbeat(every=0.3)
    with pytest.raises(OSError) as caught:  # the store is gone: a transient store error, not a conflict
        objects.read("lock")
    assert getattr(caught.value, "transient", None) is True
    assert S3_SECRET not in str(caught.value)
    while lease.held:
        time.sleep(0.1)
    with pytest.raises(LeaseError) as lost:
        lease.check()
    assert lost.value.code == "PZ0591" and "not renewed within its length" in lost.value.message
    assert "the last renewal failed: S3 writing s3://" in lost.value.message
    assert S3_SECRET not in lost.value.message
    lease.stop_heartbeat()


def test_clock_skew_under_two_thirds_of_the_length_never_takes_a_live_lease(
    objects: ConditionalObjects,
) -> None:
    with ObjectLease(objects, "lock", "live", seconds=3) as live:
        ahead = ObjectLease(objects, "lock", "ahead", seconds=3, clock=lambda: time.time() + 1.5)
        until = time.monotonic() + 5
        while time.monotonic() < until:
            with pytest.raises(LeaseError):
                ahead.acquire()
            time.sleep(0.25)
        far_ahead = ObjectLease(objects, "lock", "far-ahead", seconds=3, clock=lambda: time.time() + 10)
        far_ahead.acquire()  # skew beyond the assumption: taken over early ...
        with pytest.raises(LeaseError) as caught:
            live.renew()  # ... and the live holder learns it at its next renewal
        assert caught.value.code == "PZ0591" and not live.held
        assert far_ahead.release()
