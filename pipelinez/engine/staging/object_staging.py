"""Staging on S3 (`--staging s3://bucket/prefix`): for a Ray cluster whose nodes share no file system.

The layout and the manifests are `shared_staging`'s: `<prefix>/<run-id>/<table>/part-<token>.parquet` and
`_manifest.json`. Where the bucket is and how to sign in is project.yml's `engine.staging` block, with the
keys of the `s3` connector's connection block; the store that connector builds (`connectors.sdk_objstore`,
found through the registry, never imported) does the rest, so the
endpoint, region, url_style, use_ssl and credentials mean exactly what they mean for an s3 source or sink:

- DuckDB (workers writing Parquet with COPY, every reader's views) goes through the httpfs extension LOADed
  from its PyPI package, with a temporary secret (in memory, never in a database file) scoped to the staging
  prefix. DuckDB picks the secret with the longest matching scope, so an s3 source or sink of the same bucket
  keeps its own credentials outside the prefix.
- Manifests, listings and deletes go through the store's pyarrow S3 file system.

All-or-nothing without renames: a Parquet object gets a name no attempt used and is listed by no manifest
until it is complete (an S3 object appears only when its upload completed); the manifest is written after
its objects, in one write that becomes one object when the stream closes. Credentials travel to workers
inside the pickled task (as connection values do), never in a repr, a task name, a message or a manifest.
"""

from __future__ import annotations

import contextlib
import hashlib
import posixpath
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.sdk_objstore import ObjectStore, io_error, store_of
from pipelinez.core import duck_connect
from pipelinez.core.diagnostics import PzConfigError, PzConnectorError, error
from pipelinez.core.sqlnames import quote_literal
from pipelinez.engine.run.executor_choice import S3
from pipelinez.engine.staging.shared_staging import StagingRoot

if TYPE_CHECKING:
    import duckdb

SETTINGS = "project.yml engine.staging"


@dataclass(frozen=True)
class ObjectStagingRoot(StagingRoot):
    bucket: str
    prefix: str  # no leading or trailing '/'; may be empty (the bucket's top)
    settings: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)  # may hold secrets

    @staticmethod
    def of(location: str, settings: Mapping[str, Any]) -> ObjectStagingRoot:
        rest = location[len(f"{S3}://") :]
        bucket, _, prefix = rest.partition("/")
        return ObjectStagingRoot(bucket, prefix.strip("/"), dict(settings))

    @property
    def store(self) -> ObjectStore:
        """The s3 connector's store of this bucket, through the SDK (built once per process, never
        pickled)."""
        cached: ObjectStore | None = self.__dict__.get("_store")
        if cached is None:
            cached = store_of(S3, {**self.settings, "bucket": self.bucket})
            object.__setattr__(self, "_store", cached)
        return cached

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_store"}

    # -- names ---------------------------------------------------------------------------------------
    @property
    def location(self) -> str:
        return "/".join(p for p in (f"{S3}://{self.bucket}", self.prefix) if p)

    def _key(self, *parts: str) -> str:
        return posixpath.normpath("/".join(p for p in (self.prefix, *parts) if p))

    def _uri(self, key: str) -> str:
        return f"{S3}://{self.bucket}/{key}"

    def _fs_path(self, uri: str) -> str:
        return uri[len(f"{S3}://") :]

    def folder_uri(self, run_id: str, table: str) -> str:
        return self._uri(self._key(run_id, table))

    def file_uri(self, run_id: str, table: str, name: str) -> str:
        return self._uri(self._key(run_id, table, name))

    def scope(self) -> str:
        """The DuckDB secret's scope: the staging prefix (longer than an s3 connector's bucket scope)."""
        return f"{self.location}/"

    # -- storage ---------------------------------------------------------------------------------------
    def _key_of(self, uri: str) -> str:
        return uri[len(self._uri("")) :]

    def read_text(self, uri: str) -> str:
        data = self.store.get(self._key_of(uri))
        if data is None:
            raise FileNotFoundError(uri)
        return data.decode("utf-8")

    def write_text(self, uri: str, text: str) -> None:
        self.store.put(self._key_of(uri), text.encode("utf-8"))  # one object, created when complete

    def size(self, uri: str) -> int | None:
        import pyarrow.fs as pafs

        info = self.store.fs.get_file_info(self._fs_path(uri))
        return int(info.size or 0) if info.type == pafs.FileType.File else None

    def names(self, run_id: str, table: str) -> list[str]:
        base = self._key(run_id, table)
        return sorted(key[len(base) + 1 :] for key, _ in self.store.objects(base))

    def delete(self, uri: str) -> None:
        self.store.discard(self._key_of(uri))

    def parquet_target(self, run_id: str, table: str, name: str) -> str:
        return self.file_uri(run_id, table, name)  # a name no attempt used: unread until a manifest lists it

    def place(self, target: str, run_id: str, table: str, name: str) -> None:
        return None  # written in place

    def remove_run(self, run_id: str) -> None:
        """The run's objects, and the incomplete uploads a killed worker's COPY may have left under it. An
        OSError (the store unreachable, access denied) when the objects could not be deleted: the sweep
        records the removal only when it happened, and tries again next time otherwise."""
        self.store.remove(self._key(run_id))
        with contextlib.suppress(OSError):  # a store without multipart listing must not fail the removal
            self.store.abort_uploads(f"{self._key(run_id)}/")

    def attach(self, cur: duckdb.DuckDBPyConnection) -> None:
        """httpfs and a temporary secret scoped to the staging prefix, in `cur`'s database (replaced when
        present, so attaching again is harmless). PzConnectorError (PZ0505, the credentials never echoed)."""
        digest = hashlib.sha256(self.scope().encode()).hexdigest()[:12]
        self.store.install(cur, f"__pz_staging_{digest}", self.scope(), replace=True)

    # -- the check before a run ----------------------------------------------------------------------------
    def check(self, executor: str = "ray") -> None:
        """The bucket exists (PZ0531) and the staging can be written and read back by DuckDB, as the workers
        will (PZ0711: unreachable, access denied, settings DuckDB refuses); before anything runs."""
        where = f"executor {executor}"
        try:
            exists = self.store.exists()
        except OSError as exc:
            raise self._refused("cannot be checked", exc, where) from None
        if not exists:
            raise PzConfigError(
                [
                    error(
                        "PZ0531",
                        f"the staging bucket '{self.bucket}' does not exist at {self.store.where()} "
                        f"(--staging {self.location})",
                        file=where,
                        next_step=f"create the bucket, or fix the bucket in --staging / PZ_STAGING_URL (and "
                        f"endpoint/region in {SETTINGS}); pz never creates one",
                    )
                ]
            )
        self._probe(where)

    def _probe(self, where: str) -> None:
        """Write a one-row Parquet object with DuckDB, read it back, delete it."""
        import duckdb

        probe = self._uri(self._key(f".pz-write-probe-{secrets.token_hex(6)}.parquet"))
        con = duck_connect.connect()
        try:
            self.attach(con)
            con.execute(f"COPY (SELECT 1 AS ok) TO {quote_literal(probe)} (FORMAT parquet)")
            row = con.execute(f"SELECT count(*) FROM read_parquet({quote_literal(probe)})").fetchone()
            if not row or row[0] != 1:
                raise OSError("the probe object read back differently")
        except PzConnectorError as exc:
            raise self._refused("cannot be used", exc, where) from None
        except (duckdb.Error, OSError) as exc:
            raise self._refused("cannot be written", exc, where) from None
        finally:
            con.close()
            with contextlib.suppress(Exception):
                self.delete(probe)

    def _refused(self, what: str, exc: BaseException, where: str) -> PzConfigError:
        message = exc.message if isinstance(exc, PzConnectorError) else str(exc)
        lines = [line for line in message.strip().splitlines() if line.strip()]
        reason = lines[0] if lines else type(exc).__name__
        unreachable = isinstance(exc, OSError) and io_error(exc, "PZ0711").is_transient
        if unreachable:
            what = "cannot be reached"
            hint = f"check the endpoint in {SETTINGS} (and region, use_ssl) and the network path to it"
        else:
            hint = (
                f"check the credentials in {SETTINGS} (access_key_id, secret_access_key from secret env "
                "vars) and url_style/region: they must allow listing, reading, writing and deleting objects "
                "under the prefix"
            )
        return PzConfigError(
            [
                error(
                    "PZ0711",
                    f"the staging {self.location} at {self.store.where()} {what}: {reason}",
                    file=where,
                    next_step=hint,
                )
            ]
        )
