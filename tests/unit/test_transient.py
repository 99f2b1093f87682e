"""The native-tier transient classifier: every listed shape, and the near-misses that must not count."""

from __future__ import annotations

import duckdb
import pytest

from pipelinez.core.transient import (
    HTTP_STATUS_CODES,
    TRANSIENT_PHRASES,
    is_transient_native,
    summarize,
    transient_match,
)

LINE = "\n\nLINE 1: select * from read_csv('x.csv')\n                      ^"

# Shapes captured from DuckDB 1.5.5 + httpfs 1.5.5 against a loopback server, then generalised.
POSITIVE = [
    # httpfs 1.5 HEAD failure: "Request returned HTTP <code> for HTTP HEAD to '<url>'"
    *[
        (
            f"http-returned-{code}",
            f"HTTP Error: Request returned HTTP {code} for HTTP HEAD to 'http://h/x.csv'{LINE}",
        )
        for code in HTTP_STATUS_CODES
    ],
    # httpfs GET failure: "HTTP GET error on '<url>' (HTTP <code>[ <reason>])"
    *[
        (f"http-get-{code}", f"HTTP Error: HTTP GET error on 'https://h/x.parquet' (HTTP {code})")
        for code in HTTP_STATUS_CODES
    ],
    (
        "http-get-503-reason",
        "HTTP Error: HTTP GET error on 'https://h/x' (HTTP 503 Service Unavailable)" + LINE,
    ),
    ("http-lowercase", "io error: http 502 bad gateway"),
    ("http-version", "IO Error: upstream said HTTP/1.1 503 Service Unavailable"),
    ("http-version-2", "IO Error: upstream said HTTP/2 504"),
    ("http-colon", "IO Error: HTTP: 429"),
    ("http-error-word", "Catalog Error: http error 500 thrown"),
    ("http-status-word", "IO Error: HTTP status 408 while reading"),
    ("http-status-code-words", "IO Error: HTTP status code 429"),
    ("http-code-word", "IO Error: HTTP code=503"),
    ("http-bracket", "IO Error: failed [HTTP 504]"),
    ("status-then-token-paren", "IO Error: got 503 (HTTP HEAD)"),
    ("status-then-token", "IO Error: got 429 HTTP response"),
    ("status-then-token-bracket", "IO Error: 500 [HTTP]"),
    # phrases
    ("refused", "IO Error: Connection refused"),
    ("refused-upper", "IO ERROR: CONNECTION REFUSED"),
    ("refused-whitespace", "IO Error: connection\trefused"),
    ("reset", "IO Error: Connection reset by peer"),
    ("connection-error", "IO Error: Connection error for HTTP GET to 'https://h/x'"),
    ("could-not-establish", "IO Error: Could not establish connection" + LINE),
    ("timed-out", "IO Error: Connection timed out"),
    (
        "timeout-curl",
        "IO Error: Timeout was reached error for HTTP HEAD to 'http://127.0.0.1:9/x.csv'" + LINE,
    ),
    ("timeout-lower", "Invalid Input Error: read timeout"),
    ("timeout-colon", "IO Error: timeout: no answer"),
    (
        "postgres-refused",
        'IO Error: Unable to connect to Postgres at "host=h": connection to server failed: '
        "Connection refused\n\tIs the server running?",
    ),
    ("multiline-summary", "IO Error: first line\nsecond line: connection reset"),
]

NEGATIVE = [
    ("empty", ""),
    ("unrelated", "Catalog Error: Table with name nosuch does not exist!"),
    ("http-404", "HTTP Error: HTTP GET error on 'http://h/x.csv' (HTTP 404 Not Found)" + LINE),
    ("http-200", "IO Error: HTTP 200 but body was empty"),
    ("http-403", "HTTP Error: Request returned HTTP 403 for HTTP HEAD to 'http://h/x'"),
    ("http-5030", "IO Error: HTTP 5030"),
    ("http-1503", "IO Error: HTTP 1503"),
    ("http-503x", "IO Error: HTTP 503x"),
    ("http-503-decimal-ish", "IO Error: HTTP 50.3"),
    ("status-without-token", "IO Error: status 503"),
    ("status-without-token-2", "IO Error: server answered 503 (Service Unavailable)"),
    ("method-between", "IO Error: HTTP HEAD 503"),
    (
        "legacy-url-between",
        'HTTP Error: Unable to connect to URL "https://h/x.csv": 503 (Service Unavailable).',
    ),
    ("https-token", "IO Error: HTTPS 503"),
    ("xhttp-token", "IO Error: XHTTP 503"),
    ("http-underscore", "IO Error: http_503"),
    # URLs and file names that collide with the list
    (
        "quoted-url-timeout",
        "HTTP Error: HTTP GET error on 's3://bucket/timeout/data.parquet' (HTTP 404 Not Found)",
    ),
    ("quoted-url-503", "HTTP Error: HTTP GET error on 'http://host/503/x' (HTTP 404)"),
    ("quoted-url-http-503", 'IO Error: No files found that match the pattern "http://h/HTTP 503/x.csv"'),
    ("quoted-file-refused", 'IO Error: No files found that match the pattern "connection refused.csv"'),
    ("quoted-file-underscore", "IO Error: No files found that match the pattern 'connection_refused.csv'"),
    ("quoted-timeouts", "IO Error: Cannot open file 'data/timeouts/x.csv': No such file or directory"),
    ("quoted-timed-out", 'IO Error: Cannot open file "timed out.csv": No such file or directory'),
    ("quoted-reset-dir", "IO Error: Cannot open file '/data/connection reset/x.csv': Permission denied"),
    ("bare-url-timeout", "IO Error: No files found at s3://bucket/timeout/data.parquet"),
    ("bare-url-503", "IO Error: bad file http://host/503/x"),
    ("bare-path-refused", "IO Error: cannot read /var/connection/refused"),
    ("bare-windows-path", "IO Error: cannot read C:\\data\\timeout\\x.csv"),
    ("bare-file-timeout", "IO Error: cannot read timeout.csv"),
    ("bare-host-timeout", "IO Error: unknown host timeout.example.com"),
    ("bare-http-version-in-path", "IO Error: cannot read data/HTTP/1.1/503"),
    ("word-timeouts", "Invalid Input Error: too many timeouts configured"),
    ("word-http-timeout", "Invalid Input Error: SET http_timeout expects an integer"),
    ("word-timeout-suffix", "Binder Error: column timeout_ms not found"),
    ("word-resettable", "IO Error: connection resetting is disabled"),
    # LINE context after a terminal summary
    ("line-timeout", 'Parser Error: syntax error at or near "FROM"\n\nLINE 1: select timeout FROM FROM t'),
    (
        "line-refused",
        "Binder Error: Referenced column \"x\" not found\n\nLINE 1: select 'connection refused', x",
    ),
    ("line-http-503", "Parser Error: syntax error\n\nLINE 3: select 'HTTP 503' ,, 1"),
    ("line-inline", "Parser Error: syntax error LINE 1: select timeout"),
    ("line-indented", "Parser Error: syntax error\n   LINE 12: select connection error"),
    # closed list is closed: curl's refused-connection wording is not on it (documented gap)
    (
        "curl-could-not-connect",
        "IO Error: Could not connect to server error for HTTP HEAD to 'http://127.0.0.1:1/x'",
    ),
    ("phrase-inside-quotes", 'IO Error: last attempt failed with: "Connection reset by peer"'),
    # data the message echoes: a CSV row, a value, the reader's options (DuckDB 1.5.5's own texts)
    (
        "csv-row-echoed",
        "Conversion Error: CSV Error on Line: 3\nOriginal Line: timeout,b\nError when converting column "
        '"id". Could not convert string "timeout" to \'BIGINT\'\n\nColumn id is being converted as type '
        "BIGINT\n\n  file = t.csv\n  delimiter = , (Auto-Detected)\n",
    ),
    ("csv-row-echoed-invalid-input", "Invalid Input Error: CSV Error on Line: 2\nOriginal Line: 1,timeout,x"),
    ("csv-options-file", 'Invalid Input Error: CSV Error on Line: 2\n\n  file = timeout\n  quote = "'),
    ("conversion-apostrophe", "Conversion Error: Could not convert string 'it's a timeout' to INT32"),
    ("binder-kind", "Binder Error: column connection_refused timeout not found"),
]


@pytest.mark.parametrize(("name", "message"), POSITIVE, ids=[name for name, _ in POSITIVE])
def test_transient_shapes(name: str, message: str) -> None:
    assert is_transient_native(message), (name, summarize(message))


@pytest.mark.parametrize(("name", "message"), NEGATIVE, ids=[name for name, _ in NEGATIVE])
def test_near_misses_are_not_transient(name: str, message: str) -> None:
    assert not is_transient_native(message), (name, summarize(message), transient_match(message))


def test_every_listed_phrase_and_status_is_covered() -> None:
    for phrase in TRANSIENT_PHRASES:
        assert is_transient_native(f"IO Error: {phrase}")
        assert is_transient_native(f"IO Error: {phrase.upper()}")
        assert not is_transient_native(f"IO Error: '{phrase}'")
        assert not is_transient_native(f"Parser Error: x\nLINE 1: {phrase}")
    for code in HTTP_STATUS_CODES:
        assert is_transient_native(f"HTTP Error: HTTP {code}")
        assert not is_transient_native(f"HTTP Error: HTTP {code}0")
        assert not is_transient_native(f"HTTP Error: '/x/HTTP {code}'")


def test_other_http_codes_are_terminal() -> None:
    listed = set(HTTP_STATUS_CODES)
    for code in range(100, 600):
        assert is_transient_native(f"HTTP Error: Request returned HTTP {code} for HTTP HEAD to 'u'") == (
            code in listed
        )


def test_summarize_cuts_line_context_and_strips_locations() -> None:
    summary = summarize("IO Error: x 'a/timeout' s3://b/timeout HTTP/1.1 503\n\nLINE 1: timeout")
    assert "timeout" not in summary.lower()
    assert "HTTP 503" in summary
    assert "LINE" not in summary


def test_apostrophe_inside_word_does_not_open_a_quote() -> None:
    assert is_transient_native("IO Error: can't read: connection reset by 'peer'")


def test_transient_match_names_the_hit() -> None:
    assert transient_match("HTTP Error: HTTP GET error on 'u' (HTTP 503 Service Unavailable)") == "HTTP 503"
    assert transient_match("IO Error: Connection reset by peer") == "Connection reset"
    assert transient_match("Catalog Error: nope") is None


def _httpfs_connection() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with httpfs loaded, or skip (the extension is not a pz dependency)."""
    con = duckdb.connect()
    try:
        con.execute("LOAD httpfs")
        return con
    except duckdb.Error:
        pass
    from pathlib import Path

    import duckdb_extension_httpfs  # type: ignore[import-untyped,import-not-found,unused-ignore]  # dev extra

    found = sorted(Path(duckdb_extension_httpfs.__file__).parent.glob("extensions/*/httpfs.duckdb_extension"))
    assert found, "the duckdb-extension-httpfs package holds no extension file"
    con.execute(f"LOAD '{found[0]}'")
    return con


def test_real_duckdb_httpfs_messages() -> None:
    import http.server
    import threading

    statuses = {"/a": 503, "/b": 429, "/c": 404, "/d": 403}

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.send_response(statuses.get(self.path[:2], 404))
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_HEAD = _answer
        do_GET = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        con = _httpfs_connection()
        con.execute("SET http_retries = 0")
        base = f"http://127.0.0.1:{server.server_port}"
        expected = {"a/timeout": True, "b/x": True, "c/timeout": False, "d/503": False}
        for path, transient in expected.items():
            with pytest.raises(Exception) as info:
                con.execute(f"SELECT * FROM read_csv('{base}/{path}/data.csv')")
            assert is_transient_native(str(info.value)) is transient, str(info.value)
    finally:
        server.shutdown()


def test_the_summary_keeps_what_follows_a_quoted_statement_with_blank_lines() -> None:
    """The postgres extension quotes the statement it ran, blank lines included; libpq's words after it are
    pz's summary too (the postgres connector matches them), only echoed data lines are dropped."""
    message = (
        'IO Error: Failed to execute query "BEGIN;\n\nSELECT oid FROM pg_namespace;\n": server closed the '
        "connection unexpectedly\n\tThis probably means the server terminated abnormally\n"
        "Original Line: 1,timeout\n  file = timeout\n"
    )
    summary = summarize(message)
    assert "server closed the connection unexpectedly" in summary
    assert "timeout" not in summary
