"""Connection settings of the postgres connector, error classification, table names.

One `Settings` value is derived from the rendered `connection:` block (`dsn`, or `host`/`port`/... keys) and
gives every driver what it needs:
- psycopg (catalog lookups, control statements, transactions) gets keyword arguments;
- ADBC (universal tier data) gets a libpq keyword/value string;
- DuckDB's postgres extension (native tier) gets a libpq string *without* the password, and the password
  through a temporary DuckDB secret, so the ATTACH string DuckDB echoes in its errors never holds it.

Every session runs with the same settings (`SESSION_OPTIONS`, sent as libpq `options`), so values that
PostgreSQL renders as text (composite types, ranges, money, ...) are rendered identically in both tiers.

Secrets: `Settings.scrub` removes the password (plain and URL-encoded), any `password=` pair and any
`user:password@` part of a URI from a message. Every message this package raises goes through it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import parse_parts, quote_ident
from pipelinez.core.transient import is_transient_native, summarize

if TYPE_CHECKING:
    import psycopg

APPLICATION_NAME = "pipelinez"
CONNECT_TIMEOUT = "10"
APPEND_BATCH_ROWS = 1_000_000  # rows per committed append batch of the sink (one COPY, its own transaction)
# Rendering settings of every session (both tiers, every driver): text renderings must not depend on the
# server's or the role's defaults.
SESSION_OPTIONS = (
    "-c DateStyle=ISO,MDY -c IntervalStyle=postgres -c TimeZone=UTC -c extra_float_digits=1 "
    "-c bytea_output=hex"
)
_KEYS = {"host", "port", "database", "user", "password", "sslmode", "options", "dsn"}
_SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")

# SQLSTATEs worth retrying (the engine owns retries): connection exceptions (class 08), serialization
# failure, deadlock, lock not available, statement/lock timeout or cancel, shutdowns, too many connections.
TRANSIENT_SQLSTATES: dict[str, float | None] = {
    "40001": None,  # serialization_failure
    "40P01": None,  # deadlock_detected
    "55P03": None,  # lock_not_available (lock_timeout)
    "57014": None,  # query_canceled (statement_timeout)
    "57P01": 1.0,  # admin_shutdown
    "57P02": 1.0,  # crash_shutdown
    "57P03": 2.0,  # cannot_connect_now (starting up / recovering)
    "53300": 5.0,  # too_many_connections
    "53400": 5.0,  # configuration_limit_exceeded (e.g. max connections per role)
}
# A failure to connect or a lost connection is transient (the server may be restarting), unless libpq says
# the cause is configuration: credentials, a missing database or role, pg_hba, SSL requirements, a bad
# parameter, an unknown host name.
_TERMINAL_CONNECT = re.compile(
    r"authentication failed|no password supplied|password is|does not exist|pg_hba\.conf|"
    r"permission denied|SSL is not enabled|does not support SSL|SSL connection is required|certificate|"
    r"invalid (?:connection option|sslmode|integer|port|value)|unsupported|not supported|"
    r"could not translate host name|Name or service not known|is not permitted to log in",
    re.IGNORECASE,
)
# The ADBC driver's Arrow stream reports a connection lost mid-read as a bare OSError carrying libpq's text
# (`[libpq] PQgetCopyData() failed: server closed the connection unexpectedly`): these libpq phrases say
# the connection itself failed, not the query.
_LIBPQ_CONNECTION_LOST = re.compile(
    r"server closed the connection unexpectedly|no connection to the server|connection reset|"
    r"could not (?:receive|send) data (?:from|to) server|SSL SYSCALL error|SSL connection has been closed",
    re.IGNORECASE,
)
# The server's own words for the transient SQLSTATEs, for the errors that lost their SQLSTATE on the way: the
# ADBC Arrow stream's bare OSError ("[libpq] Execution error [PGRES_FATAL_ERROR]: ERROR: could not serialize
# access ...") and the DuckDB postgres extension's messages ("Failed to fetch header for COPY: FATAL:
# terminating connection due to administrator command"). Matched on the summary (quoted names removed).
# "canceling statement due to user request" (57014 too) is left out: that is pz's own interrupt.
_SERVER_TRANSIENT: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), state)
    for pattern, state in (
        (r"could not serialize access due to", "40001"),
        (r"\bdeadlock detected\b", "40P01"),
        (r"could not obtain lock on|canceling statement due to lock timeout", "55P03"),
        (r"canceling statement due to statement timeout", "57014"),
        (r"terminating connection due to administrator command", "57P01"),
        (
            r"terminating connection due to (?:crash of another server process|unexpected postmaster exit)",
            "57P02",
        ),
        (
            r"the database system is "
            r"(?:starting up|shutting down|in recovery mode|not yet accepting connections)",
            "57P03",
        ),
        (r"sorry, too many clients already|too many connections for (?:role|database)", "53300"),
    )
)
_LINE_CONTEXT = re.compile(r"\n[ \t]*LINE |\bLINE \d+:")
_QUERY_WAS = re.compile(r"\n*\s*Query was:.*", re.DOTALL)
_PASSWORD_PAIR = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
_URI_USERINFO = re.compile(r"(postgres(?:ql)?://[^:@/\s]*:)([^@\s]*)(@)", re.IGNORECASE)
_GUARD = re.compile(r'pz-guard: ([^"\n]*)')


@dataclass(frozen=True)
class Settings:
    """libpq keyword parameters (without the password) and the password kept apart."""

    params: dict[str, str]
    password: str = field(default="", repr=False)

    @staticmethod
    def from_connection(connection: Mapping[str, Any]) -> Settings:
        unknown = sorted(set(connection) - _KEYS)
        if unknown:
            raise PzConnectorError(f"unknown connection key(s): {', '.join(unknown)}", code="PZ0301")
        params: dict[str, str] = {}
        password = ""
        dsn = connection.get("dsn")
        if dsn:
            from psycopg.conninfo import conninfo_to_dict

            try:
                parsed = conninfo_to_dict(str(dsn))
            except Exception as exc:  # psycopg.ProgrammingError; its text may quote the dsn
                raise PzConnectorError(
                    "connection dsn is not a valid libpq connection string or postgresql:// URI",
                    code="PZ0301",
                ) from exc
            for key, value in parsed.items():
                if value is None:
                    continue
                if key == "password":
                    password = str(value)
                else:
                    params[key] = str(value)
        for key, pg_key in (
            ("host", "host"),
            ("port", "port"),
            ("database", "dbname"),
            ("user", "user"),
            ("sslmode", "sslmode"),
        ):
            value = connection.get(key)
            if value is not None and value != "":
                params[pg_key] = str(value)
        if connection.get("password") is not None:
            password = str(connection["password"])
        if "port" in params and not params["port"].strip().isdigit():
            raise PzConnectorError(f"connection port must be a number, got {params['port']!r}", code="PZ0301")
        if "sslmode" in params and params["sslmode"] not in _SSLMODES:
            raise PzConnectorError(f"connection sslmode must be one of {', '.join(_SSLMODES)}", code="PZ0301")
        params.setdefault("host", "127.0.0.1")
        params.setdefault("application_name", APPLICATION_NAME)
        params.setdefault("connect_timeout", CONNECT_TIMEOUT)
        user_options = str(connection.get("options") or params.get("options") or "").strip()
        # the user's options come last: a later -c wins, and both tiers still get the same settings
        params["options"] = f"{SESSION_OPTIONS} {user_options}".strip()
        return Settings(params, password)

    # -- drivers -----------------------------------------------------------------------------------
    def libpq(self, *, with_password: bool) -> str:
        """A libpq keyword/value connection string, every value quoted."""
        items = dict(self.params)
        if with_password and self.password:
            items["password"] = self.password
        return " ".join(f"{key}={libpq_quote(value)}" for key, value in items.items())

    def psycopg(self, *, autocommit: bool = True, code: str = "PZ0601") -> psycopg.Connection[Any]:
        """A psycopg connection (autocommit unless asked); PzConnectorError when it cannot connect."""
        import psycopg

        kwargs: dict[str, Any] = dict(self.params)
        if self.password:
            kwargs["password"] = self.password
        try:
            return psycopg.connect(autocommit=autocommit, **kwargs)
        except Exception as exc:
            raise self.error(exc, f"cannot connect to PostgreSQL at {self.describe()}", code) from exc

    def adbc(self, code: str = "PZ0601", *, autocommit: bool = False) -> Any:
        """An ADBC DB-API connection (autocommit off unless asked); PzConnectorError when it can't connect."""
        import adbc_driver_postgresql.dbapi as pg_dbapi

        try:
            return pg_dbapi.connect(self.libpq(with_password=True), autocommit=autocommit)
        except Exception as exc:
            raise self.error(exc, f"cannot connect to PostgreSQL at {self.describe()}", code) from exc

    def describe(self) -> str:
        """Where the connector connects, safe to print."""
        user = self.params.get("user")
        who = f"{user}@" if user else ""
        port = self.params.get("port", "5432")
        db = self.params.get("dbname")
        return f"{who}{self.params.get('host')}:{port}" + (f"/{db}" if db else "")

    # -- messages ----------------------------------------------------------------------------------
    def scrub(self, text: str) -> str:
        """`text` without the password in any form."""
        if self.password:
            forms = {
                self.password,
                quote(self.password, safe=""),
                quote(self.password),
                libpq_quote(self.password),
                self.password.replace("'", "''"),
            }
            for form in sorted(forms, key=len, reverse=True):
                if form:
                    text = text.replace(form, "***")
        text = _PASSWORD_PAIR.sub(r"\1***", text)
        return _URI_USERINFO.sub(r"\1***\3", text)

    def error(
        self, exc: BaseException, where: str, code: str, message: str | None = None
    ) -> PzConnectorError:
        """Any driver's exception as a PzConnectorError: classified, summarized, scrubbed (`message`: the
        driver's words to say instead of `str(exc)`, still summarized and scrubbed)."""
        transient, retry_after = classify(exc)
        text = self.scrub(summary(str(exc) if message is None else message))
        return PzConnectorError(
            f"{lead(where)}{text}", is_transient=transient, retry_after=retry_after, code=code
        )


def lead(where: str) -> str:
    """`where: ` as a message prefix, or nothing. The engine names the node in front of every connector
    message, so connectors pass an empty `where` and name only what the node name does not say."""
    return f"{where}: " if where else ""


def libpq_quote(value: str) -> str:
    """A libpq connection-string value: single-quoted, backslashes and quotes escaped."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def summary(message: str) -> str:
    """A driver message without statement context (`LINE n:`, `Query was: ...`), trimmed. A failed
    pz guard (a deliberate cast error that carries a message) is reduced to that message."""
    guard = _GUARD.search(message)
    if guard:
        return guard.group(1).strip()
    message = _QUERY_WAS.sub("", message)
    cut = _LINE_CONTEXT.search(message)
    text = message[: cut.start()] if cut else message
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " ".join(lines)


def sqlstate_of(exc: BaseException) -> str | None:
    state = getattr(exc, "sqlstate", None)
    if isinstance(state, str) and len(state) == 5:
        return state
    match = re.search(r"SQLSTATE:? ([0-9A-Z]{5})", str(exc))
    return match.group(1) if match else None


def server_state(message: str) -> str | None:
    """The transient SQLSTATE a PostgreSQL error message names in the server's words, when the error lost
    its SQLSTATE (`_SERVER_TRANSIENT`)."""
    summary = summarize(message)
    return next((state for pattern, state in _SERVER_TRANSIENT if pattern.search(summary)), None)


def classify(exc: BaseException) -> tuple[bool, float | None]:
    """(is_transient, retry_after) of an exception from psycopg, ADBC or DuckDB.

    psycopg / ADBC: by SQLSTATE (`TRANSIENT_SQLSTATES`, class 08); without one, a failure to connect or a
    lost connection is transient unless the cause is configuration (credentials, missing database, ...).
    Syntax, permission, undefined object, data errors are terminal. DuckDB errors (native tier): the closed
    list of `pipelinez.core.transient`, matched on the summary; and, since these are the connector's own
    statements, libpq's words for a lost connection (`_LIBPQ_CONNECTION_LOST`) on that same summary. An error
    without its SQLSTATE (DuckDB's, the ADBC stream's) is transient when the server's words name a transient
    one (`server_state`: a serialization failure, a deadlock, an administrator's or crash shutdown, ...)."""
    import duckdb

    if isinstance(exc, PzConnectorError):
        return exc.is_transient, exc.retry_after
    if isinstance(exc, duckdb.Error):
        message = str(exc)
        if is_transient_native(message):
            return True, None
        named = server_state(message)
        if named:
            return True, TRANSIENT_SQLSTATES[named]
        # a statement of this connector's own (ATTACH, the scan, the sink's writes) that lost its PostgreSQL
        # connection: libpq's own words, outside any quoted SQL or connection string
        return bool(_LIBPQ_CONNECTION_LOST.search(summarize(message))), None
    state = sqlstate_of(exc) or server_state(str(exc))
    if state:
        if state in TRANSIENT_SQLSTATES:
            return True, TRANSIENT_SQLSTATES[state]
        return state.startswith("08"), None
    if _is_connection_error(exc):
        return not _TERMINAL_CONNECT.search(str(exc)), None
    return False, None


def _is_connection_error(exc: BaseException) -> bool:
    import psycopg

    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return True
    try:
        import adbc_driver_manager
    except ImportError:  # pragma: no cover - installed with the package
        return False
    if isinstance(exc, adbc_driver_manager.OperationalError):
        return True
    if type(exc) is OSError and "[libpq]" in str(exc):  # the ADBC Arrow stream, mid-read
        return bool(_LIBPQ_CONNECTION_LOST.search(str(exc)))
    status = getattr(exc, "status_code", None)
    # AdbcStatusCode: 10 IO, 11 CANCELLED, 12 TIMEOUT
    return isinstance(exc, adbc_driver_manager.Error) and int(status or 0) in (10, 11, 12)


# -- table names ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TableRef:
    """`table` or `schema.table` as users write it; `schema` None means the connection's current schema."""

    schema: str | None
    name: str

    @staticmethod
    def parse(text: str) -> TableRef:
        parts = parse_parts(text)
        if len(parts) == 1:
            return TableRef(None, parts[0])
        if len(parts) == 2:
            return TableRef(parts[0], parts[1])
        raise ValueError(f"{text!r} has {len(parts)} parts; write table or schema.table")

    def sql(self) -> str:
        if self.schema is None:
            return quote_ident(self.name)
        return f"{quote_ident(self.schema)}.{quote_ident(self.name)}"

    def __str__(self) -> str:
        return self.name if self.schema is None else f"{self.schema}.{self.name}"
