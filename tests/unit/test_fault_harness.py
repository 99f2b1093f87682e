"""The fault-injection harness itself (tests/faults): the TCP proxy's faults against the live PostgreSQL, the
HTTP server's 503 + Retry-After, and what DuckDB's httpfs does with a 503 (the native tier's closed list
matches it; httpfs retries on its own unless `http_retries` is 0)."""

from __future__ import annotations

import glob
import os
import socket
import time
import urllib.error
import urllib.request

import psycopg
import pytest

from pipelinez.core.transient import transient_match
from tests.faults.http_server import FaultyHttpServer, Reply, first
from tests.faults.tcp_proxy import Fault, FaultProxy, always, fraction, schedule


def _connect(port: int) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres", connect_timeout=5)


@pytest.mark.postgres
def test_proxy_forwards_resets_refuses_and_goes_down_on_schedule() -> None:
    policy = schedule([Fault.ok(), Fault.refuse(), Fault.reset(after_bytes=20_000)])
    with FaultProxy(5432, policy) as proxy:
        with _connect(proxy.port) as con:
            assert con.execute("SELECT 1").fetchone() == (1,)
        with pytest.raises(psycopg.OperationalError):
            _connect(proxy.port)
        with _connect(proxy.port) as con, pytest.raises(psycopg.OperationalError):  # reset mid-result
            con.execute("SELECT g FROM generate_series(1, 100000) g").fetchall()
        proxy.listening = False
        with pytest.raises(psycopg.OperationalError, match="Connection refused"):
            _connect(proxy.port)
        proxy.listening = True
        with _connect(proxy.port) as con:
            assert con.execute("SELECT 2").fetchone() == (2,)
        assert proxy.kinds() == ["ok", "refuse", "reset", "ok"]


@pytest.mark.postgres
def test_a_stalled_connection_holds_then_resets() -> None:
    with FaultProxy(5432, always(Fault.stall(0.5))) as proxy:
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", proxy.port)) as sock:
            sock.settimeout(5)
            try:
                data = sock.recv(10)
            except ConnectionResetError:
                data = b""
        assert data == b"" and 0.4 < time.monotonic() - started < 4


def test_fraction_is_reproducible_and_near_its_share() -> None:
    policy = fraction(0.2, [Fault.reset(0), Fault.reset(300)], seed=3)
    kinds = [policy(i).kind for i in range(2000)]
    assert kinds == [fraction(0.2, [Fault.reset(0), Fault.reset(300)], seed=3)(i).kind for i in range(2000)]
    assert 0.15 < kinds.count("reset") / 2000 < 0.25


def test_http_server_answers_503_with_retry_after_then_serves_ranges() -> None:
    with FaultyHttpServer({"/x.csv": b"id\n1\n2\n"}, first(1, Reply.unavailable(retry_after=7))) as srv:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(srv.url("/x.csv"), timeout=5)
        assert refused.value.code == 503 and refused.value.headers["Retry-After"] == "7"
        request = urllib.request.Request(srv.url("/x.csv"), headers={"Range": "bytes=3-4"})
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 206 and response.read() == b"1\n"
        assert srv.statuses() == [503, 206]


def _httpfs() -> str:
    import duckdb_extension_httpfs

    folder = os.path.dirname(duckdb_extension_httpfs.__file__)
    return glob.glob(os.path.join(folder, "**", "httpfs.duckdb_extension"), recursive=True)[0]


@pytest.mark.parametrize(("retries", "requests"), [(None, 4), (0, 1)], ids=["default", "http_retries=0"])
def test_duckdb_httpfs_503_matches_the_closed_list_and_is_retried_inside_unless_told_not_to(
    retries: int | None, requests: int
) -> None:
    """A native-tier connector reading over http must `SET http_retries = 0`: by default httpfs retries a
    503 three times on its own (and ignores Retry-After), a double retry under the engine's policy."""
    import duckdb

    with FaultyHttpServer({"/x.csv": b"id\n1\n"}, first(100, Reply.unavailable(retry_after=1))) as srv:
        con = duckdb.connect()
        con.execute(f"LOAD '{_httpfs()}'")
        if retries is not None:
            con.execute(f"SET http_retries = {retries}")
        with pytest.raises(duckdb.Error) as failed:
            con.execute(f"SELECT * FROM read_csv('{srv.url('/x.csv')}')")
        con.close()
        assert transient_match(str(failed.value)) == "HTTP 503"
        assert srv.statuses() == [503] * requests
