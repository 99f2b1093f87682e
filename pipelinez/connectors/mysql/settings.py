"""Connection settings of the mysql connector, error classification, and identifier quoting.

One `Settings` value is derived from the rendered `connection:` block and gives both drivers what they need:
ConnectorX (reads) gets a `mysql://` URL, PyMySQL (control statements and sink writes) gets keyword
arguments. The password never appears in any message: `Settings.redact` scrubs it (plain and URL-encoded)
from every driver message before it is put into a `PzConnectorError`.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from pipelinez.core.diagnostics import PzConnectorError

DEFAULT_PORT = 3306
CONNECT_SECONDS = 10  # TCP connect and the MySQL handshake each; queries themselves are not bounded
SCHEMES = ("mysql", "mariadb")

# MySQL/MariaDB error numbers that are worth retrying (the engine owns the retries).
TRANSIENT_CODES: dict[int, str] = {
    1040: "too many connections",
    1205: "lock wait timeout",
    1213: "deadlock",
    2002: "cannot connect (socket)",
    2003: "cannot connect",
    2006: "server has gone away",
    2013: "lost connection during query",
}

# ConnectorX reports I/O failures of its Rust driver without a MySQL error number. These shapes are the
# driver's wording of the client errors 2002/2003 (cannot connect) and 2006/2013 (connection lost);
# "timed out waiting for connection" is its connection pool (r2d2) giving up on connecting.
_DRIVER_IO = re.compile(
    r"connection refused|connection reset|broken pipe|could not connect|couldn't connect|"
    r"connection aborted|unexpected eof|os error 10[34]\b|os error 111\b|os error 32\b|"
    r"server has gone away|lost connection|timed out waiting for connection",
    re.IGNORECASE,
)
_ERROR_NUMBER = re.compile(r"\bERROR\s+(\d{4})\b|\((\d{4})\s*,|\bcode:\s*(\d{4})\b", re.IGNORECASE)


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    database: str | None = None
    user: str | None = None
    password: str = field(default="", repr=False)
    ssl: dict[str, Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    url_params: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def from_connection(connection: dict[str, Any]) -> Settings:
        """Settings from a rendered `connection:` block (`dsn`, or `host`/`port`/... keys)."""
        options = dict(connection.get("options") or {})
        for key in options:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(key)):
                raise PzConnectorError(
                    f"connection option '{key}' is not a session variable name", code="PZ0301"
                )
        ssl = _ssl(connection.get("ssl"))
        dsn = connection.get("dsn")
        if dsn:
            parts = urlsplit(str(dsn))
            if parts.scheme not in SCHEMES:
                raise PzConnectorError("connection dsn must start with mysql:// or mariadb://", code="PZ0301")
            try:
                port = parts.port or DEFAULT_PORT
            except ValueError as exc:
                raise PzConnectorError("connection dsn has an invalid port", code="PZ0301") from exc
            database = unquote(parts.path.lstrip("/")) or None
            return Settings(
                host=parts.hostname or "127.0.0.1",
                port=port,
                database=database,
                user=unquote(parts.username) if parts.username else None,
                password=unquote(parts.password) if parts.password else "",
                ssl=ssl,
                options=options,
                url_params=tuple(parse_qsl(parts.query)),
            )
        port = connection.get("port", DEFAULT_PORT)
        try:
            port = int(port)
        except (TypeError, ValueError) as exc:
            raise PzConnectorError(f"connection port must be a number, got {port!r}", code="PZ0301") from exc
        return Settings(
            host=str(connection.get("host") or "127.0.0.1"),
            port=port,
            database=str(connection["database"]) if connection.get("database") else None,
            user=str(connection["user"]) if connection.get("user") is not None else None,
            password=str(connection.get("password") or ""),
            ssl=ssl,
            options=options,
        )

    # -- drivers ---------------------------------------------------------------------------------
    def connectorx_url(self) -> str:
        auth = ""
        if self.user is not None:
            auth = quote(self.user, safe="")
            if self.password:
                auth += ":" + quote(self.password, safe="")
            auth += "@"
        host = f"[{self.host}]" if ":" in self.host else self.host
        url = f"mysql://{auth}{host}:{self.port}/{quote(self.database or '', safe='')}"
        params = list(self.url_params)
        if not any(key == "prefer_socket" for key, _ in params):
            # ConnectorX's Rust driver would otherwise ask a server reached at 127.0.0.1/localhost for its
            # @@socket and silently switch to that local Unix socket: through an SSH tunnel or a proxy on a
            # loopback port, that reads whatever server listens on the local socket, not the one configured.
            params.append(("prefer_socket", "false"))
        if self.ssl is not None:
            params.append(("require_ssl", "true"))
            if not self.ssl.get("verify", True):
                params += [("verify_ca", "false"), ("verify_identity", "false")]
        if params:
            url += "?" + "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in params)
        return url

    def pymysql_kwargs(self, *, local_infile: bool = False) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "database": self.database,
            "charset": "utf8mb4",
            "autocommit": False,
            "local_infile": local_infile,
            "connect_timeout": CONNECT_SECONDS,
            # the handshake is a read: a port that accepts but never speaks MySQL (another server, a
            # proxy) would block it forever. Bounded here; `open_session` lifts the bound once connected.
            "read_timeout": CONNECT_SECONDS,
            "write_timeout": CONNECT_SECONDS,
        }
        if self.ssl is not None:
            ssl: dict[str, Any] = {}
            for key in ("ca", "cert", "key"):
                if self.ssl.get(key):
                    ssl[key] = self.ssl[key]
            if not self.ssl.get("verify", True):
                ssl["check_hostname"] = False
                kwargs["ssl_verify_cert"] = False
            kwargs["ssl"] = ssl or {"ssl": True}
        return kwargs

    def session_statements(self) -> list[str]:
        """Statements every session runs first: UTC session time zone (TIMESTAMP values are read and
        written as UTC instants), then the user's `options` as session variables."""
        statements = ["SET time_zone = '+00:00'"]
        for key, value in self.options.items():
            statements.append(f"SET SESSION {key} = {sql_literal(value)}")
        return statements

    # -- messages ---------------------------------------------------------------------------------
    def redact(self, text: str) -> str:
        if self.password:
            for secret in {self.password, quote(self.password, safe=""), quote(self.password)}:
                if secret:
                    text = text.replace(secret, "***")
        return text

    def describe(self) -> str:
        """Where the connector connects, safe to print."""
        who = f"{self.user}@" if self.user else ""
        return f"{who}{self.host}:{self.port}" + (f"/{self.database}" if self.database else "")


def _ssl(value: Any) -> dict[str, Any] | None:
    if value is None or value is False:
        return None
    if value is True:
        return {}
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("false", "disabled", "disable", "off", "0"):
            return None
        return {}
    if isinstance(value, dict):
        return dict(value)
    raise PzConnectorError("connection ssl must be true/false or {ca, cert, key, verify}", code="PZ0301")


def sql_literal(value: Any) -> str:
    """A MySQL literal of a scalar from configuration (never pasted raw)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value)
    if "\x00" in text:
        raise ValueError("string literal contains a NUL byte")
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


# -- identifiers ------------------------------------------------------------------------------------
def quote_ident(name: str) -> str:
    """A backtick-quoted MySQL identifier; embedded backticks doubled, NUL refused."""
    if "\x00" in name:
        raise ValueError("identifier contains a NUL byte")
    if not name:
        raise ValueError("identifier is empty")
    return "`" + name.replace("`", "``") + "`"


def split_qualified(dotted: str) -> list[str]:
    """Split `db.table` on dots outside backtick or double quotes; quotes are removed, doubled quotes kept
    as one. ValueError when the name is malformed (an unterminated quote, a quote inside a bare part, text
    after a closing quote, an empty part, a NUL byte) or a part is no MySQL name (over 64 characters, or
    ending in a space): such a name is refused, never repaired."""
    parts: list[str] = []
    i, n = 0, len(dotted)
    while True:
        if i < n and dotted[i] in '`"':
            quote, part = dotted[i], ""
            i += 1
            while True:
                if i >= n:
                    raise ValueError(f"unterminated {quote} quote in {dotted!r}")
                if dotted[i] == quote:
                    if i + 1 < n and dotted[i + 1] == quote:
                        part, i = part + quote, i + 2
                        continue
                    i += 1
                    break
                part, i = part + dotted[i], i + 1
        else:
            start = i
            while i < n and dotted[i] != ".":
                if dotted[i] in '`"':
                    raise ValueError(f"a quote inside a bare name part in {dotted!r}; quote the whole part")
                i += 1
            part = dotted[start:i].strip()
        _check_part(part, dotted)
        parts.append(part)
        if i >= n:
            return parts
        if dotted[i] != ".":
            raise ValueError(f"unexpected {dotted[i]!r} after a quoted part in {dotted!r}")
        i += 1


def _check_part(part: str, dotted: str) -> None:
    if not part:
        raise ValueError(f"empty name part in {dotted!r}")
    if "\x00" in part:
        raise ValueError("a name holds a NUL byte")
    if len(part) > 64:
        raise ValueError(f"name part {part[:24]!r}... is longer than MySQL's 64 characters")
    if part.endswith(" "):
        raise ValueError(f"name part {part!r} ends with a space, which MySQL does not allow")


@dataclass(frozen=True)
class TableName:
    database: str | None
    table: str

    @staticmethod
    def parse(dotted: str) -> TableName:
        try:
            parts = split_qualified(dotted)
        except ValueError as exc:
            raise PzConnectorError(f"table: {exc}", code="PZ0302") from exc
        if len(parts) == 1 and parts[0]:
            return TableName(None, parts[0])
        if len(parts) == 2 and all(parts):
            return TableName(parts[0], parts[1])
        raise PzConnectorError(f"table '{dotted}' must be written `table` or `database.table`", code="PZ0302")

    def sql(self) -> str:
        return (quote_ident(self.database) + "." if self.database else "") + quote_ident(self.table)

    def sibling(self, suffix: str) -> TableName:
        """A table in the same database named `<table><suffix>`, cut to MySQL's 64-character limit (the
        suffix always survives)."""
        room = 64 - len(suffix)
        base = self.table[:room] if room > 0 else ""
        return TableName(self.database, (base + suffix)[-64:])

    def display(self) -> str:
        return f"{self.database}.{self.table}" if self.database else self.table

    def digest(self) -> str:
        """A short hash of the table name: the tail of every work table of this target."""
        return hashlib.sha1(self.table.encode("utf-8")).hexdigest()[:8]

    def work_table(self, kind: str, run_id: str) -> TableName:
        """`<table head>__pz_<kind>_<run>_<hash>`, within MySQL's 64-character limit. The hash (of the full
        table name) keeps apart two long names that share their head; the run id keeps apart two runs."""
        run = re.sub(r"[^A-Za-z0-9]", "_", run_id)[-24:] or secrets.token_hex(6)
        suffix = f"__pz_{kind}_{run}_{self.digest()}"
        return TableName(self.database, self.table[: 64 - len(suffix)] + suffix)

    def is_work_table(self, name: str) -> bool:
        """Whether `name` is a work table of this target (of any run)."""
        return bool(re.search(rf"__pz_(tmp|old)_[A-Za-z0-9_]+_{self.digest()}$", name))


# -- error classification ----------------------------------------------------------------------------
def error_number(exc: BaseException) -> int | None:
    """The MySQL/MariaDB error number of a driver exception (PyMySQL's args[0], or parsed from ConnectorX's
    message), or None."""
    args = getattr(exc, "args", ())
    if args and isinstance(args[0], int):
        return int(args[0])
    found = _ERROR_NUMBER.search(str(exc))
    if found:
        return int(next(group for group in found.groups() if group))
    return None


def is_transient(exc: BaseException) -> bool:
    """Connection refused or lost (2002, 2003, 2006, 2013), lock wait timeout (1205), deadlock (1213) and
    too many connections (1040) are transient; so are the ConnectorX driver's I/O failures that stand for
    2002/2003/2006/2013 (it reports no number for them). Everything else is terminal."""
    number = error_number(exc)
    if number is not None:
        return number in TRANSIENT_CODES
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    return bool(_DRIVER_IO.search(str(exc)))


def connector_error(
    settings: Settings, what: str, exc: BaseException, *, code: str | None = None
) -> PzConnectorError:
    """A PzConnectorError for a driver exception: classified, password-free, naming what failed."""
    number = error_number(exc)
    args: tuple[Any, ...] = tuple(getattr(exc, "args", ()))
    if len(args) >= 2 and isinstance(args[0], int):  # PyMySQL: (number, message)
        detail = f"MySQL error {args[0]}: {args[1]}"
    else:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if number is not None and str(number) not in detail:
            detail = f"MySQL error {number}: {detail}"
    message = settings.redact(f"{what}: {detail}")
    return PzConnectorError(message, is_transient=is_transient(exc), code=code)
