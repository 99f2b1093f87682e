"""Staging on shared storage: each staged table of a run is Parquet under `<root>/<run-id>/<table>/` plus a
`_manifest.json` written last. A table is staged only when its manifest exists; the manifest lists the
table's files (in order), its rows (per partition for a partitioned load), its exact DuckDB column types and
a fingerprint, so nothing else in the folder counts (a crashed attempt's leftovers are ignored, then swept).

The root is a folder (`LocalStagingRoot`: local, or a shared mount every node sees) or an S3 prefix
(`object_staging.ObjectStagingRoot`: `s3://bucket/prefix`, for a cluster with no shared file system).
Publishing is all-or-nothing either way: a Parquet file gets a name no attempt used (renamed into place on
a folder; an S3 object appears only once its upload completed), and the manifest is written in one step
after it (a rename, or one PUT). Readers build their view from the manifest's file list, so they see the
whole table or nothing, never a half-written attempt and never two attempts' rows.

Parquet does not hold every DuckDB type exactly (HUGEINT becomes DOUBLE); such columns are written as text
and cast back when read, and the manifest records both types, so a table reads back with the types it had.

`SharedStagingStore` is the `StagingStore` of `pz retry` over this layout: reuse checks the manifest's row
count against the one the failed run recorded.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import secrets
import shutil
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.sdk_errors import is_transient_store_error
from pipelinez.connectors.sdk_objstore import io_error
from pipelinez.core.diagnostics import PzConfigError, error
from pipelinez.core.sqlnames import quote_ident, quote_literal
from pipelinez.engine.run.executor_choice import is_object_store
from pipelinez.engine.staging.manifest import (
    MANIFEST,
    ManifestPartition,
    StagedColumn,
    TableManifest,
    fingerprint,
    lossy,
)
from pipelinez.engine.staging.staging_store import ReuseUnavailable, StagedLoad, first_line

if TYPE_CHECKING:
    import duckdb

ZSTD = "zstd"  # a Ray task's staged tables: the smallest files, read by other tasks
ZSTD_FAST = "zstd-fast"  # a local run's published copy: written on the node's path, read only by a retry
CODECS = {ZSTD: "COMPRESSION zstd", ZSTD_FAST: "COMPRESSION zstd, COMPRESSION_LEVEL 1"}


class StagingRoot(ABC):
    """Where distributed runs (and local runs given a shared staging) stage their tables:
    `<location>/<run-id>/<table>/<file>`. The manifest logic is here; a subclass provides the storage:
    `LocalStagingRoot` (a folder, local or a shared mount) or `ObjectStagingRoot` (s3://bucket/prefix, in
    `object_staging`). Names in a manifest are relative to the table's folder (a combined load's files are
    `../<table>__part<i>/<file>`)."""

    # -- storage, per kind -----------------------------------------------------------------------------
    @property
    @abstractmethod
    def location(self) -> str:
        """The staging as a run records it (run_results.json `args.staging`): a folder or s3://bucket/prefix."""

    @abstractmethod
    def folder_uri(self, run_id: str, table: str) -> str:
        """The table's folder, as messages show it."""

    @abstractmethod
    def file_uri(self, run_id: str, table: str, name: str) -> str:
        """A file of the table's folder as DuckDB reads it (a path, or an s3:// URL)."""

    @abstractmethod
    def read_text(self, uri: str) -> str:
        """The file's text; FileNotFoundError when it does not exist, OSError when it cannot be read."""

    @abstractmethod
    def write_text(self, uri: str, text: str) -> None:
        """Write the whole file in one step: a reader sees the old file (or none) or all of the new one."""

    @abstractmethod
    def size(self, uri: str) -> int | None:
        """The file's size in bytes; None when it does not exist."""

    @abstractmethod
    def names(self, run_id: str, table: str) -> list[str]:
        """Every file in the table's folder (none when it does not exist)."""

    @abstractmethod
    def delete(self, uri: str) -> None:
        """Delete a file; gone already is fine."""

    @abstractmethod
    def parquet_target(self, run_id: str, table: str, name: str) -> str:
        """Where DuckDB's COPY writes the file that becomes `name` (its folder created)."""

    @abstractmethod
    def place(self, target: str, run_id: str, table: str, name: str) -> None:
        """Move a written `parquet_target` into place as `name` (a rename, or nothing: written in place)."""

    @abstractmethod
    def check(self, executor: str = "ray") -> None:
        """Before a run of `executor` (ray, local): the staging can be written. PzConfigError (PZ0711,
        PZ0531) naming what to fix."""

    @abstractmethod
    def remove_run(self, run_id: str) -> None:
        """Delete everything run `run_id` staged (retention, pz clean); what is gone already is fine."""

    def attach(self, cur: duckdb.DuckDBPyConnection) -> None:
        """Make `cur`'s database able to read and write this staging (nothing to do for a folder)."""
        return None

    # -- manifests ---------------------------------------------------------------------------------------
    def manifest_uri(self, run_id: str, table: str) -> str:
        return self.file_uri(run_id, table, MANIFEST)

    def read_manifest(self, run_id: str, table: str) -> TableManifest:
        """The table's manifest, its files checked to exist; ReuseUnavailable (the reason in words,
        `transient` for a store that could not be reached) when it is missing or unreadable."""
        folder = self.folder_uri(run_id, table)
        try:
            data = json.loads(self.read_text(self.manifest_uri(run_id, table)))
        except FileNotFoundError:
            raise ReuseUnavailable(f"its staged data has no {MANIFEST} in {folder}") from None
        except (OSError, ValueError) as exc:
            raise ReuseUnavailable(
                f"its {MANIFEST} cannot be read ({first_line(exc)})", transient_io(exc)
            ) from None
        try:
            manifest = TableManifest.from_dict(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise ReuseUnavailable(f"its {MANIFEST} is malformed ({exc})") from None
        for name in manifest.files:
            try:
                gone = self.size(self.file_uri(run_id, table, name)) is None
            except OSError as exc:
                raise ReuseUnavailable(
                    f"its staged file {name} cannot be checked ({first_line(exc)})", transient_io(exc)
                ) from None
            if gone:
                raise ReuseUnavailable(f"its staged file {name} is gone from {folder}")
        return manifest

    def select_sql(self, run_id: str, manifest: TableManifest) -> str:
        """A query reading the staged table back with its own column types."""
        files = ", ".join(quote_literal(self.file_uri(run_id, manifest.table, f)) for f in manifest.files)
        cols = ", ".join(
            quote_ident(c.name)
            if c.stored == c.type and not manifest.union_by_name
            else f"CAST({quote_ident(c.name)} AS {c.type}) AS {quote_ident(c.name)}"
            for c in manifest.columns
        )
        union = ", union_by_name = true" if manifest.union_by_name else ""
        return f"SELECT {cols or '*'} FROM read_parquet([{files}]{union})"

    def combine(
        self, run_id: str, table: str, parts: list[TableManifest], *, node: str, node_id: str
    ) -> TableManifest:
        """The staged table of a load whose partitions were published one by one (each its own table,
        `<table>__part<i>`): a manifest listing their files in partition order, written in one step. No row
        is copied. The types are the first partition's (as the local executor combines them): when
        partitions differ, the files are unified by name and cast."""
        files = tuple(f"../{p.table}/{f}" for p in parts for f in p.files)
        first = parts[0].columns
        same = all([(c.name, c.type) for c in p.columns] == [(c.name, c.type) for c in first] for p in parts)
        rows = sum(p.rows for p in parts)
        partitions = tuple(q for p in parts for q in p.partitions)
        sizes = tuple((f, self._existing_size(run_id, table, f)) for f in files)
        manifest = TableManifest(
            run_id,
            table,
            node,
            node_id,
            rows,
            files,
            first,
            partitions,
            fingerprint(node_id, rows, first, sizes),
            dict(parts[0].versions),
            _now(),
            union_by_name=not same,
        )
        self.write_text(self.manifest_uri(run_id, table), json.dumps(manifest.to_dict(), indent=1))
        return manifest

    def _existing_size(self, run_id: str, table: str, name: str) -> int:
        size = self.size(self.file_uri(run_id, table, name))
        if size is None:
            raise FileNotFoundError(f"staged file {name} of {table} is gone")
        return size

    def publish(
        self,
        cur: duckdb.DuckDBPyConnection,
        run_id: str,
        table: str,
        *,
        node: str,
        node_id: str,
        partitions: tuple[ManifestPartition, ...] = (),
        versions: dict[str, str] | None = None,
        compression: str = ZSTD,
    ) -> TableManifest:
        """Write `table` of `cur`'s database as this run's staged table: its Parquet in place under a name no
        attempt used, then the manifest (the table counts from then on), then the folder swept of anything
        the manifest does not list. OSError (or a DuckDB error) when the staging cannot be written.
        `compression`: the Parquet codec options (one of `CODECS`)."""
        token = secrets.token_hex(6)
        columns = [(str(r[0]), str(r[1])) for r in cur.execute(f"DESCRIBE {quote_ident(table)}").fetchall()]
        select = ", ".join(
            f"CAST({quote_ident(n)} AS VARCHAR) AS {quote_ident(n)}" if lossy(t) else quote_ident(n)
            for n, t in columns
        )
        name = f"part-{token}.parquet"
        target = self.parquet_target(run_id, table, name)
        try:
            cur.execute(
                f"COPY (SELECT {select or '*'} FROM {quote_ident(table)}) TO {quote_literal(target)} "
                f"(FORMAT parquet, {CODECS[compression]})"
            )
            described = cur.execute(f"DESCRIBE SELECT * FROM read_parquet({quote_literal(target)})")
            stored = [str(r[1]) for r in described.fetchall()]
            row = cur.execute(f"SELECT count(*) FROM read_parquet({quote_literal(target)})").fetchone()
            rows = int(row[0]) if row else 0
            self.place(target, run_id, table, name)
        except BaseException:
            with contextlib.suppress(Exception):  # never listed, so never read: removed when it can be
                self.delete(target)
            raise
        cols = tuple(StagedColumn(n, t, s) for (n, t), s in zip(columns, stored, strict=True))
        size = self._existing_size(run_id, table, name)
        manifest = TableManifest(
            run_id,
            table,
            node,
            node_id,
            rows,
            (name,),
            cols,
            partitions,
            fingerprint(node_id, rows, cols, ((name, size),)),
            dict(versions or {}),
            _now(),
        )
        self.write_text(self.manifest_uri(run_id, table), json.dumps(manifest.to_dict(), indent=1))
        for stale in self.names(run_id, table):  # an earlier attempt's files: never listed, never read
            if stale not in (MANIFEST, name):
                with contextlib.suppress(OSError):
                    self.delete(self.file_uri(run_id, table, stale))
        return manifest

    def unpublish(self, run_id: str, table: str) -> None:
        """Withdraw a staged table (its manifest first, so it stops counting at once)."""
        with contextlib.suppress(OSError):
            self.delete(self.manifest_uri(run_id, table))


@dataclass(frozen=True)
class LocalStagingRoot(StagingRoot):
    """A staging folder: local, or a shared mount (NFS, a shared volume) every Ray node sees at `path`.
    Files are written under a temporary name and renamed into place (atomic on a POSIX folder)."""

    path: Path

    @property
    def location(self) -> str:
        return str(self.path)

    def folder(self, run_id: str, table: str) -> Path:
        return self.path / run_id / table

    def folder_uri(self, run_id: str, table: str) -> str:
        return str(self.folder(run_id, table))

    def file_uri(self, run_id: str, table: str, name: str) -> str:
        return os.path.normpath(self.folder(run_id, table) / name)  # `../<part>/<file>` of a combined load

    def read_text(self, uri: str) -> str:
        return Path(uri).read_text(encoding="utf-8")

    def write_text(self, uri: str, text: str) -> None:
        Path(uri).parent.mkdir(parents=True, exist_ok=True)
        write_atomically(Path(uri), text)

    def size(self, uri: str) -> int | None:
        path = Path(uri)
        return path.stat().st_size if path.is_file() else None

    def names(self, run_id: str, table: str) -> list[str]:
        folder = self.folder(run_id, table)
        return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []

    def delete(self, uri: str) -> None:
        Path(uri).unlink(missing_ok=True)

    def parquet_target(self, run_id: str, table: str, name: str) -> str:
        folder = self.folder(run_id, table)
        folder.mkdir(parents=True, exist_ok=True)
        return str(folder / f".{name}.tmp")

    def place(self, target: str, run_id: str, table: str, name: str) -> None:
        os.replace(target, self.folder(run_id, table) / name)

    def check(self, executor: str = "ray") -> None:
        who = "every Ray node" if executor == "ray" else "every worker that may retry the run"
        probe_file = self.path / f".pz-write-probe-{os.getpid()}"
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            probe_file.write_text("ok", encoding="utf-8")
            probe_file.unlink()
        except OSError as exc:
            raise PzConfigError(
                [
                    error(
                        "PZ0711",
                        f"the staging folder {self.path} cannot be written: {exc.strerror or exc}",
                        file=f"executor {executor}",
                        next_step=f"use a folder this user can create and write (and {who} mounts)",
                    )
                ]
            ) from None

    def remove_run(self, run_id: str) -> None:
        shutil.rmtree(self.path / run_id, ignore_errors=True)


def staging_root(location: str, settings: Mapping[str, Any] | None = None) -> StagingRoot:
    """The staging at `location` (as `executor_choice.staging_location` returns it); `settings`: the
    engine.staging block (endpoint, region, credentials) of an s3:// location."""
    if is_object_store(location):
        from pipelinez.compile.staging import store_settings
        from pipelinez.engine.staging.object_staging import ObjectStagingRoot

        return ObjectStagingRoot.of(location, store_settings(dict(settings or {})))
    return LocalStagingRoot(Path(location))


def remove_staged(settings: Mapping[str, Any] | None) -> Callable[[str, str], None]:
    """What the retention sweep and pz clean call to delete a run's staged tables, wherever they are."""

    def remove(location: str, run_id: str) -> None:
        staging_root(location, settings).remove_run(run_id)

    return remove


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def transient_io(exc: BaseException) -> bool:
    """Whether another attempt may read what this error could not (an object store's network error)."""
    if isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError | PermissionError):
        return is_transient_store_error(exc) or io_error(exc, "PZ0712").is_transient
    return False


def write_atomically(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        with temp.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    finally:
        with contextlib.suppress(OSError):
            temp.unlink()


@dataclass(frozen=True)
class SharedStagingStore:
    """`pz retry`'s store over shared staging: a reused table is read back from its manifest's Parquet."""

    root: StagingRoot

    def unusable(self, staged: StagedLoad) -> str | None:
        try:
            manifest = self.root.read_manifest(staged.run_id, staged.table)
        except ReuseUnavailable as exc:
            return str(exc)
        if manifest.rows != staged.rows:
            return f"its {MANIFEST} records {manifest.rows} rows, the run recorded {staged.rows}"
        return None

    def seed(self, run_id: str, staging: Path) -> bool:
        return False

    def copy(self, cur: duckdb.DuckDBPyConnection, run_id: str, table: str, target: str) -> int:
        import duckdb

        manifest = self.root.read_manifest(run_id, table)
        try:
            self.root.attach(cur)
            cur.execute(f"DROP TABLE IF EXISTS {quote_ident(target)}")
            cur.execute(f"CREATE TABLE {quote_ident(target)} AS {self.root.select_sql(run_id, manifest)}")
            row = cur.execute(f"SELECT count(*) FROM {quote_ident(target)}").fetchone()
        except duckdb.Error as exc:
            with contextlib.suppress(duckdb.Error):
                cur.execute(f"DROP TABLE IF EXISTS {quote_ident(target)}")
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ReuseUnavailable(f"its staged Parquet cannot be read ({first})") from exc
        rows = int(row[0]) if row else 0
        if rows != manifest.rows:
            raise ReuseUnavailable(f"its Parquet holds {rows} rows, its {MANIFEST} records {manifest.rows}")
        return rows
