"""The native-tier transient classifier: a closed list, matched on a DuckDB error's summary.

When DuckDB itself reaches an external system (httpfs, the postgres extension, COPY … TO), a failure
arrives as a DuckDB error message, not as a connector's `PzConnectorError`. `is_transient_native` decides
whether the engine may retry it. It says yes only for the enumerated shapes below; anything unmatched is
not transient, by construction.

How a message is reduced before matching (`summarize`): pz classifies its own summary of the failure, never
data the message echoes.

0. **Data and SQL errors are never transient.** A message of DuckDB's kinds ``Conversion Error``,
   ``Binder Error``, ``Parser Error``, ``Constraint Error``, ``Out of Range Error``, ``Mismatch Type Error``,
   ``Syntax Error`` or ``Invalid Type Error`` is about the data or the query: another attempt reads the same
   data and fails the same way, whatever words the values hold (a CSV row holding ``timeout``).
1. **Summary only.** DuckDB appends the statement's position after the summary::

       IO Error: No files found that match the pattern "x.csv"\\n\\nLINE 1: select * from read_csv('x.csv')

   The message is cut at the first LINE context: a line starting with ``LINE `` (after optional
   indentation), or an inline ``LINE <n>:``. Everything from there on is ignored, so a SQL text that
   mentions `timeout` never makes a terminal error look transient. So are the lines that echo data: the input
   row of a CSV error (``Original Line: …``) and the CSV reader's option list (``  file = …``,
   ``  delimiter = …``: indented ``name = value`` lines).
2. **Quoted segments removed.** DuckDB quotes file names, URLs, globs and identifiers in single or double
   quotes (``HTTP GET error on 'https://h/timeout/x.csv' (HTTP 404 Not Found)``,
   ``No files found that match the pattern "s3://b/503/*.parquet"``). Every quoted segment is replaced by
   a neutral placeholder. A quote only opens a segment when it does not follow a letter or digit, so an
   apostrophe inside a word (``can't``) does not swallow text.
3. **Bare names removed.** Unquoted tokens that look like a location are replaced too: any token holding
   ``://``, ``/`` or ``\\``, and any token with a dot between two word characters (``timeout.csv``,
   ``host.example.com``). The protocol-version token ``HTTP/<version>`` (``HTTP/1.1``) is kept as ``HTTP``.

What is then matched, case-insensitively (`TRANSIENT_PHRASES`, `HTTP_STATUS_CODES`):

- the phrases ``connection refused``, ``connection reset``, ``connection error``,
  ``could not establish connection``, ``timed out``, ``timeout`` -- each as whole words (not preceded or
  followed by a letter, digit or underscore; words separated by any whitespace). So ``Timeout was
  reached`` and ``Connection reset by peer`` match; ``timeouts``, ``http_timeout`` and
  ``connection_refused`` do not.
- an HTTP status 500, 502, 503, 504, 408 or 429 **immediately adjacent to an HTTP token**. The HTTP token
  is the word ``HTTP`` (optionally with a protocol version, ``HTTP/1.1``), not preceded by a letter, digit
  or underscore. The status is a whole number (no digit, letter or underscore on either side, so ``5030``
  and ``503x`` never count). *Adjacent* means one of exactly two orders, with nothing else in between:

  - token then status: ``HTTP``, then optionally one of the words ``status``, ``error``, ``code``,
    ``status code``, then only whitespace and at most one of ``:`` ``=`` ``#`` ``(`` ``[``, then the status.
    ``Request returned HTTP 503 for HTTP HEAD to '…'`` (httpfs 1.5), ``HTTP GET error on '…' (HTTP 503
    Service Unavailable)``, ``HTTP/1.1 503``, ``HTTP error 503``, ``HTTP status: 429``.
  - status then token: the status, then only whitespace and at most one ``(`` or ``[``, then ``HTTP``:
    ``503 (HTTP``, ``504 HTTP``.

  Not adjacent, so not transient: ``status 503`` with no HTTP token, ``HTTP HEAD 503`` (a method between),
  the legacy ``Unable to connect to URL "…": 503 (Service Unavailable)`` (the URL sits between the
  ``HTTP Error:`` type prefix and the status), ``HTTP 200``, ``HTTP 404``.

Known gap, kept on purpose because the list is closed: httpfs 1.5's curl client reports a refused TCP
connection as ``Could not connect to server error for HTTP HEAD to '…'``, which no listed phrase matches.
A message whose transient phrase is itself inside quotes (``last attempt failed with: "Connection reset"``)
is not matched either. Both err on the side of not retrying here; a connector that ran the statement itself
may still report it transient (the object stores do for their reads: `connectors.files.netfail`).
"""

from __future__ import annotations

import re

HTTP_STATUS_CODES: tuple[int, ...] = (500, 502, 503, 504, 408, 429)
TRANSIENT_PHRASES: tuple[str, ...] = (
    "connection refused",
    "connection reset",
    "connection error",
    "could not establish connection",
    "timed out",
    "timeout",
)

_PLACEHOLDER = " \u00abq\u00bb "

# 0. DuckDB's error kinds about the data or the query (never a transient condition of an external system)
DATA_ERROR_KINDS: tuple[str, ...] = (
    "Conversion Error",
    "Binder Error",
    "Parser Error",
    "Constraint Error",
    "Out of Range Error",
    "Mismatch Type Error",
    "Syntax Error",
    "Invalid Type Error",
)
_DATA_KIND = re.compile("|".join(re.escape(kind) + ":" for kind in DATA_ERROR_KINDS), re.IGNORECASE)
_ECHOED_DATA = re.compile(r"^(?:[ \t]*Original Line:.*|[ \t]+[a-z_]+ = .*)$", re.MULTILINE)

# 1. LINE context: a line that starts with "LINE ", or an inline "LINE <n>:".
_LINE_CONTEXT = re.compile(r"\n[ \t]*LINE |LINE \d+:")

# 2. Quoted segments: an opening quote not right after a letter/digit, up to the same quote on that line.
_QUOTED = re.compile(r"(?<![A-Za-z0-9])(?:'[^'\n]*'|\"[^\"\n]*\")")

# 3. Protocol-version tokens kept as a bare HTTP token; then location-like bare tokens removed.
_HTTP_VERSION = re.compile(r"(?<![\w/.\\-])HTTP/\d+(?:\.\d+)?(?![\w/.\\])", re.IGNORECASE)
_BARE_LOCATION = re.compile(r"[^\s\"'()\[\]{},;]*(?:://|/|\\|\w\.\w)[^\s\"'()\[\]{},;]*")

_WORD_EDGE_BEFORE = r"(?<![A-Za-z0-9_])"
_WORD_EDGE_AFTER = r"(?![A-Za-z0-9_])"

_PHRASES = re.compile(
    _WORD_EDGE_BEFORE
    + "(?:"
    + "|".join(r"\s+".join(re.escape(word) for word in phrase.split()) for phrase in TRANSIENT_PHRASES)
    + ")"
    + _WORD_EDGE_AFTER,
    re.IGNORECASE,
)

_CODES = "|".join(str(code) for code in HTTP_STATUS_CODES)
_HTTP_TOKEN = _WORD_EDGE_BEFORE + r"HTTP" + _WORD_EDGE_AFTER
_TOKEN_THEN_STATUS = (
    _HTTP_TOKEN
    + r"(?:[ \t]+(?:status[ \t]+code|status|error|code))?"
    + r"[ \t]*[:=#(\[]?[ \t]*"
    + _WORD_EDGE_BEFORE
    + f"(?:{_CODES})"
    + _WORD_EDGE_AFTER
)
_STATUS_THEN_TOKEN = _WORD_EDGE_BEFORE + f"(?:{_CODES})" + r"[ \t]*[(\[]?[ \t]*" + _HTTP_TOKEN
_HTTP_STATUS = re.compile(f"{_TOKEN_THEN_STATUS}|{_STATUS_THEN_TOKEN}", re.IGNORECASE)


def summarize(message: str) -> str:
    """The part of a DuckDB error message that is matched: before any LINE context, with quoted segments
    and bare location-like tokens replaced by a neutral placeholder (see the module docstring)."""
    cut = _LINE_CONTEXT.search(message)
    summary = message[: cut.start()] if cut else message
    summary = _ECHOED_DATA.sub("", summary)
    summary = _QUOTED.sub(_PLACEHOLDER, summary)
    summary = _HTTP_VERSION.sub("HTTP", summary)
    return _BARE_LOCATION.sub(_PLACEHOLDER, summary)


def transient_match(message: str) -> str | None:
    """The text that makes `message` transient (for notes and tests), or None when nothing on the list
    matches."""
    if _DATA_KIND.match(message.lstrip()):
        return None
    summary = summarize(message)
    for pattern in (_HTTP_STATUS, _PHRASES):
        found = pattern.search(summary)
        if found:
            return found.group(0)
    return None


def is_transient_native(message: str) -> bool:
    """True only when a native-tier (DuckDB) error message matches the closed list of transient shapes.

    Matching is case-insensitive and runs on `summarize(message)`, never the raw message. Anything
    unmatched is not transient."""
    return transient_match(message) is not None
