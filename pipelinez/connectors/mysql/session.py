"""Opening a PyMySQL session of the mysql connector: connected, session statements run (time zone, SQL
mode), then unbounded read/write timeouts (a big LOAD DATA or MERGE takes as long as it takes)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipelinez.connectors.mysql.settings import Settings, connector_error

if TYPE_CHECKING:
    import pymysql


def connect(
    settings: Settings, what: str, code: str, *, local_infile: bool = False
) -> pymysql.connections.Connection[Any]:
    """A PyMySQL connection to the server of `settings`; a failure is a PzConnectorError `code` naming
    `what`."""
    import pymysql

    try:
        con = pymysql.connect(**settings.pymysql_kwargs(local_infile=local_infile))
    except pymysql.MySQLError as exc:
        raise connector_error(
            settings, f"{what}: cannot connect to {settings.describe()}", exc, code=code
        ) from None
    try:
        with con.cursor() as cur:
            for statement in settings.session_statements():
                cur.execute(statement)
    except pymysql.MySQLError as exc:
        con.close()
        raise connector_error(settings, f"{what}: session setup failed", exc, code=code) from None
    # connected and answering: from here a query may take as long as it takes (a big LOAD DATA, MERGE)
    con._read_timeout = con._write_timeout = None  # type: ignore[attr-defined]
    return con
