"""Staging on shared storage: each staged table of a run is Parquet under `<root>/<run-id>/<table>/` plus a
`_manifest.json` written last. A table is staged only when its manifest exists; the manifest lists the
table's files (in order), its rows (per partition for a partitioned load), its exact DuckDB column types and
a fingerprint, so nothing else in the folder counts (a crashed attempt's leftovers are ignored, then swept).

Publishing is atomic on a local or shared folder: every file is written under a temporary name in the
table's folder and renamed into place, the manifest last. Readers build their view from the manifest's file
list, so they see the whole table or nothing, never a half-written attempt and never two attempts' rows.

Parquet does not hold every DuckDB type exactly (HUGEINT becomes DOUBLE); such columns are written as text
and cast back when read, and the manifest records both types, so a table reads back with the types it had.

`SharedStagingStore` is the `StagingStore` of `pz retry` over this layout: reuse checks the manifest's row
count against the one the failed run recorded.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelinez.core.sqlnames import quote_ident, quote_literal
from pipelinez.engine.staging_store import ReuseUnavailable

if TYPE_CHECKING:
    import duckdb

MANIFEST = "_manifest.json"
MANIFEST_VERSION = 1
# types Parquet would not hold exactly: written as text, cast back on read
_LOSSY = ("HUGEINT", "UHUGEINT", "VARINT", "BIGNUM", "BIT")


@dataclass(frozen=True)
class StagedColumn:
    name: str
    type: str  # the DuckDB type of the staged table
    stored: str  # the type the Parquet file reads back as; a cast restores `type` when they differ


@dataclass(frozen=True)
class TableManifest:
    run_id: str
    table: str
    node: str
    node_id: str
    rows: int
    files: tuple[str, ...]  # file names in the table's folder, in row order
    columns: tuple[StagedColumn, ...]
    partitions: tuple[dict[str, Any], ...] = ()  # a partitioned load: {index, rows, fingerprint}
    fingerprint: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    written_at: str = ""
    union_by_name: bool = False  # files of several partitions whose types differ: unified, then cast

    def to_dict(self) -> dict[str, Any]:
        return {
            "manifest_version": MANIFEST_VERSION,
            "run_id": self.run_id,
            "table": self.table,
            "node": self.node,
            "node_id": self.node_id,
            "rows": self.rows,
            "files": list(self.files),
            "columns": [{"name": c.name, "type": c.type, "stored": c.stored} for c in self.columns],
            "partitions": [dict(p) for p in self.partitions],
            "fingerprint": self.fingerprint,
            "versions": dict(self.versions),
            "written_at": self.written_at,
            "union_by_name": self.union_by_name,
        }

    @staticmethod
    def from_dict(data: dict[str, Any]) -> TableManifest:
        if data.get("manifest_version") != MANIFEST_VERSION:
            raise ValueError(f"manifest_version {data.get('manifest_version')!r} is not {MANIFEST_VERSION}")
        return TableManifest(
            str(data["run_id"]),
            str(data["table"]),
            str(data["node"]),
            str(data["node_id"]),
            int(data["rows"]),
            tuple(str(f) for f in data["files"]),
            tuple(StagedColumn(str(c["name"]), str(c["type"]), str(c["stored"])) for c in data["columns"]),
            tuple(dict(p) for p in data.get("partitions") or ()),
            str(data.get("fingerprint", "")),
            {str(k): str(v) for k, v in (data.get("versions") or {}).items()},
            str(data.get("written_at", "")),
            bool(data.get("union_by_name", False)),
        )


@dataclass(frozen=True)
class StagingRoot:
    """The staging folder of distributed runs (local or a shared mount every node sees)."""

    path: Path

    def folder(self, run_id: str, table: str) -> Path:
        return self.path / run_id / table

    def manifest_path(self, run_id: str, table: str) -> Path:
        return self.folder(run_id, table) / MANIFEST

    def read_manifest(self, run_id: str, table: str) -> TableManifest:
        """The table's manifest; ReuseUnavailable (the reason in words) when it is missing or unreadable."""
        path = self.manifest_path(run_id, table)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ReuseUnavailable(f"its staged data has no {MANIFEST} in {path.parent}") from None
        except (OSError, ValueError) as exc:
            raise ReuseUnavailable(f"its {MANIFEST} cannot be read ({exc})") from None
        try:
            manifest = TableManifest.from_dict(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise ReuseUnavailable(f"its {MANIFEST} is malformed ({exc})") from None
        missing = [f for f in manifest.files if not (path.parent / f).is_file()]
        if missing:
            raise ReuseUnavailable(f"its staged file {missing[0]} is gone from {path.parent}")
        return manifest

    def select_sql(self, run_id: str, manifest: TableManifest) -> str:
        """A query reading the staged table back with its own column types."""
        files = ", ".join(quote_literal(str(self.folder(run_id, manifest.table) / f)) for f in manifest.files)
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
        `<table>__part<i>`): a manifest listing their files in partition order, written atomically. No row is
        copied. The types are the first partition's (as the local executor combines them): when partitions
        differ, the files are unified by name and cast."""
        folder = self.folder(run_id, table)
        folder.mkdir(parents=True, exist_ok=True)
        files = tuple(f"../{p.table}/{f}" for p in parts for f in p.files)
        first = parts[0].columns
        same = all([(c.name, c.type) for c in p.columns] == [(c.name, c.type) for c in first] for p in parts)
        rows = sum(p.rows for p in parts)
        partitions = tuple(q for p in parts for q in p.partitions)
        sizes = tuple((f, (folder / f).stat().st_size) for f in files)
        manifest = TableManifest(
            run_id,
            table,
            node,
            node_id,
            rows,
            files,
            first,
            partitions,
            _fingerprint(node_id, rows, first, sizes),
            dict(parts[0].versions),
            dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            union_by_name=not same,
        )
        write_atomically(folder / MANIFEST, json.dumps(manifest.to_dict(), indent=1))
        return manifest

    def publish(
        self,
        cur: duckdb.DuckDBPyConnection,
        run_id: str,
        table: str,
        *,
        node: str,
        node_id: str,
        partitions: tuple[dict[str, Any], ...] = (),
        versions: dict[str, str] | None = None,
    ) -> TableManifest:
        """Write `table` of `cur`'s database as this run's staged table: Parquet renamed into place, then the
        manifest, then the folder swept of anything the manifest does not list. OSError when the folder
        cannot be written."""
        folder = self.folder(run_id, table)
        folder.mkdir(parents=True, exist_ok=True)
        token = secrets.token_hex(6)
        columns = [(str(r[0]), str(r[1])) for r in cur.execute(f"DESCRIBE {quote_ident(table)}").fetchall()]
        select = ", ".join(
            f"CAST({quote_ident(n)} AS VARCHAR) AS {quote_ident(n)}" if _lossy(t) else quote_ident(n)
            for n, t in columns
        )
        name = f"part-{token}.parquet"
        temp = folder / f".{name}.tmp"
        try:
            cur.execute(
                f"COPY (SELECT {select or '*'} FROM {quote_ident(table)}) TO {quote_literal(str(temp))} "
                "(FORMAT parquet, COMPRESSION zstd)"
            )
            stored = [
                str(r[1])
                for r in cur.execute(
                    f"DESCRIBE SELECT * FROM read_parquet({quote_literal(str(temp))})"
                ).fetchall()
            ]
            row = cur.execute(f"SELECT count(*) FROM read_parquet({quote_literal(str(temp))})").fetchone()
            rows = int(row[0]) if row else 0
            os.replace(temp, folder / name)
        finally:
            with contextlib.suppress(OSError):
                temp.unlink()
        cols = tuple(StagedColumn(n, t, s) for (n, t), s in zip(columns, stored, strict=True))
        size = (folder / name).stat().st_size
        manifest = TableManifest(
            run_id,
            table,
            node,
            node_id,
            rows,
            (name,),
            cols,
            partitions,
            _fingerprint(node_id, rows, cols, ((name, size),)),
            dict(versions or {}),
            dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        )
        write_atomically(folder / MANIFEST, json.dumps(manifest.to_dict(), indent=1))
        for stale in folder.iterdir():  # an earlier attempt's files: never listed, so never read; removed
            if stale.name not in (MANIFEST, name):
                with contextlib.suppress(OSError):
                    stale.unlink()
        return manifest

    def unpublish(self, run_id: str, table: str) -> None:
        """Withdraw a staged table (its manifest first, so it stops counting at once)."""
        folder = self.folder(run_id, table)
        with contextlib.suppress(OSError):
            (folder / MANIFEST).unlink()


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


def _lossy(duck_type: str) -> bool:
    words = duck_type.upper().replace("(", " ").replace(")", " ").replace("[", " ").replace(",", " ").split()
    return any(w in _LOSSY for w in words)


def _fingerprint(node_id: str, rows: int, columns: tuple[StagedColumn, ...], files: Any) -> str:
    text = json.dumps(
        {"node_id": node_id, "rows": rows, "columns": [[c.name, c.type] for c in columns], "files": files},
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class SharedStagingStore:
    """`pz retry`'s store over shared staging: a reused table is read back from its manifest's Parquet."""

    root: StagingRoot

    def unusable(self, staged: Any) -> str | None:
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
