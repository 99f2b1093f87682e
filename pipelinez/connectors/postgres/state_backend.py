"""The PostgreSQL state backend (`state: {backend: postgres, connection: {...}, schema: pz_state}`).

Control statements only, through psycopg: a schema of pz's own (created on first use, under an advisory
lock so two first runs do not race) with one table per kind of state, every row keyed by the project name
(several projects can share one schema):
- `watermarks`: one transaction per commit (all of a run's watermarks or none), fenced by the lease: while
  this backend holds the project lock, the commit first locks the lease row (SELECT ... FOR UPDATE) and
  commits nothing unless the row still carries this holder's token and has not expired (a holder cut off
  long enough to be taken over never overwrites the new holder's watermarks);
- `run_files`: each run's run_results.json and events.jsonl, replaced by one upsert;
- `lease`: the project lock, one row per project with its holder (host, pid, run id, token) and
  `lease_until`; acquiring is one INSERT ... ON CONFLICT ... WHERE the lease expired, so two processes never
  both hold it; the holder renews it while its run lives, and a holder that died stops renewing: its lease
  expires and the next acquirer takes it over;
- `blobs`: small named files (the `--connect` schema cache).
Every failure is a `StateBackendError` naming the backend (never the password) with a next step.

The one connection (shared by the run and the lease heartbeat) cannot hang forever on a dead socket: TCP
keepalives (`_LIBPQ`: first probe after 10 s idle, then every 5 s, dead after 3 unanswered: ~25 s), a TCP
user timeout of 30 s for data sent but never acknowledged, and `statement_timeout` 30 s for a statement the
server does not finish (a lock held by hand). Keys set in `state.connection` win over these.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from pipelinez.connectors.postgres.settings import Settings, summary
from pipelinez.core import failpoints
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.run_state import Watermark
from pipelinez.core.sqlnames import quote_ident
from pipelinez.core.state.backend import (
    Holder,
    LeaseInfo,
    StateBackend,
    StateBackendError,
    backend_error,
    fenced_commit_error,
)

if TYPE_CHECKING:
    import psycopg

DEFAULT_SCHEMA = "pz_state"
STATEMENT_TIMEOUT_MS = 30_000
_LIBPQ = {  # libpq keyword parameters: a hung socket is declared dead instead of blocking the heartbeat
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",
}
T = TypeVar("T")

_TABLES = (
    "CREATE TABLE IF NOT EXISTS {s}.watermarks (project text NOT NULL, source text NOT NULL, "
    "dataset text NOT NULL, column_name text NOT NULL, value text NOT NULL, run_id text NOT NULL, "
    "updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (project, source, dataset))",
    "CREATE TABLE IF NOT EXISTS {s}.run_files (project text NOT NULL, run_id text NOT NULL, "
    "name text NOT NULL, body text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(), "
    "PRIMARY KEY (project, run_id, name))",
    "CREATE TABLE IF NOT EXISTS {s}.lease (project text PRIMARY KEY, host text NOT NULL, pid integer NOT "
    "NULL, run_id text NOT NULL, token text NOT NULL, lease_until timestamptz NOT NULL, "
    "acquired_at timestamptz NOT NULL DEFAULT now())",
    "CREATE TABLE IF NOT EXISTS {s}.blobs (project text NOT NULL, name text NOT NULL, data bytea NOT NULL, "
    "updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (project, name))",
)
_LEASE_COLUMNS = (
    "host, pid, run_id, token, to_char(lease_until AT TIME ZONE 'UTC', "
    '\'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"\'), lease_until < now()'
)


class PostgresBackend(StateBackend):
    name = "postgres"

    def __init__(self, project: str, settings: Mapping[str, Any]):
        super().__init__(project, settings)
        try:
            self.pg = Settings.from_connection(dict(settings.get("connection") or {}))
        except PzConnectorError as exc:
            raise backend_error(
                "PZ0133", self.name, str(exc), "fix state.connection in project.yml (the postgres keys)"
            ) from None
        for key, value in _LIBPQ.items():
            self.pg.params.setdefault(key, value)
        self.schema = str(settings.get("schema") or DEFAULT_SCHEMA)
        self.s = quote_ident(self.schema)
        self._ready = False
        self._lock = threading.Lock()
        self._held: psycopg.Connection[Any] | None = None
        self._token: str | None = None  # the lease token while this backend holds the project lock

    def describe(self) -> str:
        return f"postgres {self.pg.describe()}, schema {self.schema}"

    # -- connections ---------------------------------------------------------------------------------
    def _connect(self) -> psycopg.Connection[Any]:
        try:
            conn = self.pg.psycopg(autocommit=True, code="PZ0580")
        except PzConnectorError as exc:
            raise backend_error(
                "PZ0580",
                self.name,
                f"cannot be reached: {exc}",
                "check that the PostgreSQL server in state.connection is up and the credentials are right, "
                "then run the command again (nothing was recorded)",
            ) from None
        try:
            if "statement_timeout" not in self.pg.params.get("options", ""):
                conn.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
            if not self._ready:
                self._create(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _create(self, conn: psycopg.Connection[Any]) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('pipelinez.state_backend'))")
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.s}")
            for statement in _TABLES:
                conn.execute(statement.format(s=self.s))
        self._ready = True

    def _run(self, what: str, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """`work` on the backend's one connection (opened on first use, shared by the run and its lease
        heartbeat under a lock); a connection found broken is opened again once."""
        import psycopg

        with self._lock:
            for attempt in (1, 2):
                fresh = self._held is None
                try:
                    if self._held is None:
                        self._held = self._connect()
                    return work(self._held)
                except psycopg.OperationalError as exc:
                    self._drop()
                    if fresh or attempt == 2:
                        raise self._failed(what, exc) from None
                except psycopg.Error as exc:
                    raise self._failed(what, exc) from None
        raise AssertionError("unreachable")

    def _failed(self, what: str, exc: BaseException) -> StateBackendError:
        return backend_error(
            "PZ0581",
            self.name,
            f"{what} failed: {self.pg.scrub(summary(str(exc)))}",
            f"check that the role in state.connection may create and write schema {self.schema}, "
            "then run the command again",
        )

    def _drop(self) -> None:
        if self._held is not None:
            with contextlib.suppress(Exception):
                self._held.close()
            self._held = None

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _sql(self, text: str) -> Any:
        from psycopg import sql

        return sql.SQL(text.replace("{s}", self.s))

    # -- watermarks ----------------------------------------------------------------------------------
    def watermarks(self) -> dict[tuple[str, str], Watermark]:
        def read(conn: psycopg.Connection[Any]) -> dict[tuple[str, str], Watermark]:
            rows = conn.execute(
                self._sql(
                    "SELECT source, dataset, column_name, value, run_id FROM {s}.watermarks "
                    "WHERE project = %s ORDER BY source, dataset"
                ),
                [self.project],
            ).fetchall()
            return {(r[0], r[1]): Watermark(*(str(v) for v in r)) for r in rows}

        return self._run("reading the watermarks", read)

    def commit_watermarks(self, marks: Iterable[Watermark]) -> None:
        marks = list(marks)
        if not marks:
            return

        def commit(conn: psycopg.Connection[Any]) -> None:
            failpoints.hit("state.commit_watermarks")
            with conn.transaction():
                self._fence(conn)
                for m in marks:
                    conn.execute(
                        self._sql(
                            "INSERT INTO {s}.watermarks "
                            "(project, source, dataset, column_name, value, run_id) "
                            "VALUES (%s, %s, %s, %s, %s, %s) "
                            "ON CONFLICT (project, source, dataset) DO UPDATE "
                            "SET column_name = EXCLUDED.column_name, value = EXCLUDED.value, "
                            "run_id = EXCLUDED.run_id, updated_at = now()"
                        ),
                        [self.project, m.source, m.dataset, m.column, m.value, m.run_id],
                    )

        self._run("committing the watermarks", commit)

    def _fence(self, conn: psycopg.Connection[Any]) -> None:
        """Inside the commit's transaction: lock the lease row and refuse (PZ0581, the run's PZ0525) unless
        it still carries this holder's token and has not expired. Nothing to check outside a lock."""
        if self._token is None:
            return
        row = conn.execute(
            self._sql("SELECT token, lease_until > now() FROM {s}.lease WHERE project = %s FOR UPDATE"),
            [self.project],
        ).fetchone()
        if row is None or str(row[0]) != self._token or not row[1]:
            why = "expired" if row is not None and str(row[0]) == self._token else "was taken over"
            raise fenced_commit_error(self.name, why, "the database")

    # -- runs ------------------------------------------------------------------------------------------
    def put_run_file(self, run_id: str, name: str, text: str) -> None:
        self._run(
            f"recording {name} of run {run_id}",
            lambda conn: conn.execute(
                self._sql(
                    "INSERT INTO {s}.run_files (project, run_id, name, body) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT (project, run_id, name) DO UPDATE "
                    "SET body = EXCLUDED.body, updated_at = now()"
                ),
                [self.project, run_id, name, text],
            ),
        )

    def get_run_file(self, run_id: str, name: str) -> str | None:
        row = self._run(
            f"reading {name} of run {run_id}",
            lambda conn: conn.execute(
                self._sql("SELECT body FROM {s}.run_files WHERE project = %s AND run_id = %s AND name = %s"),
                [self.project, run_id, name],
            ).fetchone(),
        )
        return None if row is None else str(row[0])

    def run_ids(self) -> list[str]:
        rows = self._run(
            "listing the runs",
            lambda conn: conn.execute(
                self._sql(
                    "SELECT run_id FROM {s}.run_files WHERE project = %s AND name = 'run_results.json' "
                    "ORDER BY run_id"
                ),
                [self.project],
            ).fetchall(),
        )
        return [str(r[0]) for r in rows]

    def delete_run(self, run_id: str) -> None:
        self._run(
            f"deleting run {run_id}",
            lambda conn: conn.execute(
                self._sql("DELETE FROM {s}.run_files WHERE project = %s AND run_id = %s"),
                [self.project, run_id],
            ),
        )

    # -- the lease ---------------------------------------------------------------------------------------
    def acquire(self, holder: Holder) -> LeaseInfo | None:
        def take(conn: psycopg.Connection[Any]) -> Any:
            return conn.execute(
                self._sql(
                    "INSERT INTO {s}.lease AS l (project, host, pid, run_id, token, lease_until) "
                    "VALUES (%s, %s, %s, %s, %s, now() + make_interval(secs => %s)) "
                    "ON CONFLICT (project) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid, "
                    "run_id = EXCLUDED.run_id, token = EXCLUDED.token, lease_until = EXCLUDED.lease_until, "
                    "acquired_at = now() WHERE l.lease_until < now() RETURNING project"
                ),
                [self.project, holder.host, holder.pid, holder.run_id, holder.token, self.lease_seconds],
            ).fetchone()

        for _ in range(3):  # released between the two statements: take it again
            if self._run("taking the project lock", take) is not None:
                self._token = holder.token
                return None
            current = self.lease()
            if current is not None:
                return current
        raise backend_error("PZ0581", self.name, "the project lock changed hands too fast to be taken")

    def renew(self, holder: Holder) -> bool:
        row = self._run(
            "renewing the project lock",
            lambda conn: conn.execute(
                self._sql(
                    "UPDATE {s}.lease SET lease_until = now() + make_interval(secs => %s), run_id = %s "
                    "WHERE project = %s AND token = %s RETURNING project"
                ),
                [self.lease_seconds, holder.run_id, self.project, holder.token],
            ).fetchone(),
        )
        return row is not None

    def release(self, holder: Holder) -> None:
        self._token = None
        self._run(
            "releasing the project lock",
            lambda conn: conn.execute(
                self._sql("DELETE FROM {s}.lease WHERE project = %s AND token = %s"),
                [self.project, holder.token],
            ),
        )

    def lease(self) -> LeaseInfo | None:
        row = self._run(
            "reading the project lock",
            lambda conn: conn.execute(
                self._sql(f"SELECT {_LEASE_COLUMNS} FROM {{s}}.lease WHERE project = %s"), [self.project]
            ).fetchone(),
        )
        if row is None:
            return None
        return LeaseInfo(
            Holder(str(row[0]), int(row[1]), str(row[2]), str(row[3])), str(row[4]), bool(row[5])
        )

    # -- blobs -----------------------------------------------------------------------------------------------
    def put_blob(self, name: str, data: bytes) -> None:
        self._run(
            f"recording {name}",
            lambda conn: conn.execute(
                self._sql(
                    "INSERT INTO {s}.blobs (project, name, data) VALUES (%s, %s, %s) ON CONFLICT (project, "
                    "name) DO UPDATE SET data = EXCLUDED.data, updated_at = now()"
                ),
                [self.project, name, data],
            ),
        )

    def get_blob(self, name: str) -> bytes | None:
        row = self._run(
            f"reading {name}",
            lambda conn: conn.execute(
                self._sql("SELECT data FROM {s}.blobs WHERE project = %s AND name = %s"), [self.project, name]
            ).fetchone(),
        )
        return None if row is None else bytes(row[0])

    def check_writable(self) -> None:
        def probe(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction(force_rollback=True):
                conn.execute(
                    self._sql("INSERT INTO {s}.blobs (project, name, data) VALUES (%s, %s, %s)"),
                    [self.project, ".pz-write-probe", b""],
                )

        self._run("the write probe", probe)


__all__ = ["PostgresBackend", "StateBackendError"]
