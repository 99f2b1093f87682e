"""The postgres connector's native tier: the postgres extension LOADed from the file the PyPI package
ships (no network), the database ATTACHed under a unique alias with the password in a temporary DuckDB
secret, rows landed in staging with CREATE TABLE ... AS / INSERT INTO ... BY NAME. The sink's native
writes attach the same way (`attached`)."""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.postgres.nan_guard import nan_guard, range_guard
from pipelinez.connectors.postgres.settings import Settings
from pipelinez.connectors.postgres.source import Relation, read_where
from pipelinez.connectors.sdk import Partition, ReadBounds
from pipelinez.connectors.sdk_sql import create_staging_table
from pipelinez.core import duck_catalog
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident, quote_literal

if TYPE_CHECKING:
    import duckdb
    import psycopg


def extension_path() -> str:
    """The postgres_scanner extension file shipped by the `duckdb-extension-postgres-scanner` package."""
    import duckdb
    import duckdb_extension_postgres_scanner as package

    folder = os.path.join(os.path.dirname(package.__file__), "extensions")
    wanted = os.path.join(folder, f"v{duckdb.__version__}", "postgres_scanner.duckdb_extension")
    if os.path.isfile(wanted):
        return wanted
    found = sorted(glob.glob(os.path.join(folder, "*", "postgres_scanner.duckdb_extension")))
    if not found:
        raise PzConnectorError(
            "the duckdb-extension-postgres-scanner package ships no extension file; reinstall pipelinez",
            code="PZ0505",
        )
    return found[-1]


def preload_extension(con: duckdb.DuckDBPyConnection) -> None:
    """LOAD the extension into `con`'s instance ahead of an ATTACH, whose own LOAD is then a no-op. Quiet:
    the ATTACH's LOAD reports whatever failed here."""
    with contextlib.suppress(Exception):
        cur = con.cursor()
        try:
            cur.execute(f"LOAD {quote_literal(extension_path())}")
        finally:
            cur.close()


@contextlib.contextmanager
def attached(con: duckdb.DuckDBPyConnection, settings: Settings, *, read_only: bool) -> Iterator[str]:
    """ATTACH the database to `con`'s DuckDB instance under a fresh alias for the block.

    ATTACH/DETACH and the secret run on a sibling cursor (they belong to the database instance; a DETACH on
    the caller's connection would fail inside its transaction). The password goes through a temporary
    secret: the ATTACH string, which DuckDB quotes in its errors, never holds it."""
    attachment = Attachment(settings, read_only=read_only)
    try:
        yield attachment.alias_in(con)
    finally:
        attachment.drop()


class Attachment:
    """The database ATTACHed to one staging DuckDB instance under a unique alias, kept across reads.

    A connector keeps one for its source reads (one connector per partition worker): the ATTACH and the
    extension's catalog load are paid once per worker, not once per partition. After a read through it
    failed, `drop()` it: the next read ATTACHes afresh, so a connection the failure may have broken is
    never reused. `alias_in` re-ATTACHes when the alias is gone from `con`'s instance (another staging
    database, or DETACHed meanwhile)."""

    def __init__(self, settings: Settings, *, read_only: bool):
        self._settings = settings
        self._read_only = read_only
        self._aux: duckdb.DuckDBPyConnection | None = None
        self._alias: str | None = None
        self._secret: str | None = None
        self._home: duckdb.DuckDBPyConnection | None = None  # the connection alias_in last answered
        self.attaches = 0  # how many ATTACHes this attachment made (tests, benchmarks)

    def alias_in(self, con: duckdb.DuckDBPyConnection) -> str:
        """The alias of the database in `con`'s instance, ATTACHing it first when needed. Asked again with
        the connection it last answered (a partition worker's cursor), it answers without a query."""
        if self._alias is not None and con is self._home:
            return self._alias
        if self._alias is not None:
            found = con.execute(
                "SELECT count(*) FROM duckdb_databases() WHERE database_name = ?", [self._alias]
            ).fetchone()
            if found and found[0]:
                self._home = con
                return self._alias
            self.drop()
        self._attach(con)
        assert self._alias is not None
        self._home = con
        return self._alias

    def _attach(self, con: duckdb.DuckDBPyConnection) -> None:
        settings = self._settings
        token = secrets.token_hex(6)
        alias, secret = f"__pz_pg_{token}", f"__pz_pg_secret_{token}"
        aux = con.cursor()
        try:
            aux.execute(f"LOAD {quote_literal(extension_path())}")
            options = f"TYPE postgres{', READ_ONLY' if self._read_only else ''}"
            if settings.password:
                aux.execute(
                    f"CREATE TEMPORARY SECRET {quote_ident(secret)} "
                    f"(TYPE postgres, PASSWORD {quote_literal(settings.password)})"
                )
                self._secret = secret
                options += f", SECRET {quote_ident(secret)}"
            self._aux = aux
            aux.execute(
                f"ATTACH {quote_literal(settings.libpq(with_password=False))} AS {quote_ident(alias)} "
                f"({options})"
            )
        except BaseException:
            self._aux = aux
            self.drop()
            raise
        self._alias = alias
        self.attaches += 1

    def drop(self) -> None:
        """DETACH (closing the extension's connections to the server) and forget the secret; quiet."""
        aux, alias, secret = self._aux, self._alias, self._secret
        self._aux = self._alias = self._secret = self._home = None
        if aux is None:
            return
        try:
            if alias is not None:
                with contextlib.suppress(Exception):
                    aux.execute(f"DETACH {quote_ident(alias)}")
            if secret is not None:
                with contextlib.suppress(Exception):
                    aux.execute(f"DROP TEMPORARY SECRET IF EXISTS {quote_ident(secret)}")
        finally:
            with contextlib.suppress(Exception):
                aux.close()


def extract_native(
    con: duckdb.DuckDBPyConnection,
    control: Callable[[], psycopg.Connection[Any]],
    settings: Settings,
    relation: Relation,
    partition: Partition,
    target: str,
    where: str,
    bounds: ReadBounds | None = None,
    attachment: Attachment | None = None,
    compression: str = "auto",
) -> None:
    """Land the partition's rows in `target` through `attachment` (kept by the caller across reads, and
    dropped here when the read fails), or through an ATTACH of its own for this read. `control`: the
    psycopg connection, asked for only when the NaN guard has a question for the server."""
    import duckdb

    bounds = bounds or ReadBounds()
    own = attachment is None
    through = attachment or Attachment(settings, read_only=True)
    try:
        alias = through.alias_in(con)
        if relation.attach_scan_ok(partition, bounds):
            assert relation.schema is not None and relation.table is not None
            source = f"{quote_ident(alias)}.{quote_ident(relation.schema)}.{quote_ident(relation.table)}"
        else:
            pg_sql = relation.select_sql(False, read_where(relation, partition, bounds))
            source = f"postgres_query({quote_literal(alias)}, {quote_literal(pg_sql)})"
        land(con, target, f"SELECT {relation.duck_projection() or '*'} FROM {source}", compression)
    except duckdb.Error as exc:
        through.drop()
        raise settings.error(exc, where, "PZ0505") from exc
    except BaseException:
        through.drop()
        raise
    finally:
        if own:
            through.drop()
    range_guard(con, relation, target)
    if relation.attach_scan_ok(partition, bounds) and any(plan.nan_guard for plan in relation.plans):
        nan_guard(con, control(), settings, relation, target, where)


def land(con: duckdb.DuckDBPyConnection, target: str, select: str, compression: str = "auto") -> None:
    """Create `target` from `select` (compressed as `create_staging_table` says), or insert into it by
    column name when it exists already."""
    if table_exists(con, target):
        con.execute(f"INSERT INTO {target} BY NAME {select}")
    elif create_staging_table(con, target, select, compression):
        con.execute(f"INSERT INTO {target} {select}")
    else:
        con.execute(f"CREATE TABLE {target} AS {select}")


def table_exists(con: duckdb.DuckDBPyConnection, quoted: str) -> bool:
    """Whether the staging table `quoted` (quoted, maybe qualified) exists: one lookup, never an enumeration
    of the instance's catalogs (see `pipelinez.core.duck_catalog`)."""
    return duck_catalog.table_exists(con, quoted)
