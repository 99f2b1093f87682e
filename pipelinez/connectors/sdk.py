"""The one interface every connector implements.

A connector package exposes a class through the entry-point group `pipelinez.connectors` and ships a
`manifest.json` beside its module. The manifest is data: tier 3 validation reads it without importing the
connector's code (see `registry.py`).

Data-plane tiers:
- native: DuckDB reads/writes the external system itself. The engine hands the connector a DuckDB
  connection of the run's staging database; the connector runs SQL in it (read_csv, COPY TO, ...).
- universal: the connector yields Arrow record batches (`extract_batches`) that the engine ingests into
  staging, or consumes a stream of record batches the engine reads from staging (`write_batches`).

Errors: raise `PzConnectorError(message, is_transient=..., retry_after=...)`, or its typed subclass
`ConnectorError` when batches or rows were committed before the failure (fields `batches_committed`,
`rows_committed`, `checkpoint`; see `sdk_errors.py`). An object store's failed call is an `ObjectStoreError`
(an OSError with `transient`). Connectors never retry internally; the engine owns retries. Any other
exception counts as terminal (never retried).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pipelinez.connectors.sdk_delivery import DeliveryCheckpoint
from pipelinez.connectors.sdk_errors import ConnectorError as ConnectorError
from pipelinez.connectors.sdk_errors import ObjectStoreError as ObjectStoreError
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.vocabulary import Strategy, Tier

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

NATIVE = Tier.NATIVE
UNIVERSAL = Tier.UNIVERSAL


@dataclass(frozen=True)
class Capabilities:
    """What a connector can do: read, write, its tiers and strategies, and how safely."""

    source: bool = False
    sink: bool = False
    source_tiers: tuple[Tier, ...] = ()  # tiers the source supports at all
    sink_tiers: tuple[Tier, ...] = ()
    strategies: tuple[Strategy, ...] = ()  # replace, merge, append
    atomic_replace: bool = False  # replace never leaves a half-replaced target
    atomic_append: bool = False  # an append is one transaction: a write failing half way leaves no row
    transactional_merge: bool = False  # merge runs in one transaction
    checkpointed_delivery: bool = False
    partitions: bool = False  # source reads can be split into resumable partitions
    windowed_reads: bool = False
    native_only_formats: tuple[str, ...] = ()  # formats of a dual-tier connector with no universal route
    single_writer: bool = False  # one process at a time may open the instance for writing (a database file)

    @property
    def native_only_source(self) -> bool:
        return self.source and self.source_tiers == (NATIVE,)

    @property
    def native_only_sink(self) -> bool:
        return self.sink and self.sink_tiers == (NATIVE,)


def choose_tier(tiers: tuple[Tier, ...], force_universal: bool) -> Tier:
    """The one tier rule: native when the connector has it, universal when forced (and available)."""
    if force_universal and UNIVERSAL in tiers:
        return UNIVERSAL
    return NATIVE if NATIVE in tiers else UNIVERSAL


@dataclass(frozen=True)
class Manifest:
    """A connector's declaration: name, version, the schemas of its blocks and its capabilities."""

    name: str
    version: str
    connection_schema: dict[str, Any]
    dataset_schema: dict[str, Any]
    output_schema: dict[str, Any]
    capabilities: Capabilities
    formats: dict[str, tuple[Tier, ...]] = field(default_factory=dict)  # format -> tiers
    description: str = ""

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Manifest:
        """The manifest of JSON `data`: tiers and strategies become `Tier`/`Strategy` (StrEnums, so they still
        compare equal to their strings); an unknown one is a ValueError (the registry's PZ0702)."""
        caps = dict(data.get("capabilities", {}))
        for key in ("source_tiers", "sink_tiers"):
            if key in caps:
                caps[key] = tuple(Tier(t) for t in caps[key])
        if "strategies" in caps:
            caps["strategies"] = tuple(Strategy(s) for s in caps["strategies"])
        if "native_only_formats" in caps:
            caps["native_only_formats"] = tuple(caps["native_only_formats"])
        return Manifest(
            name=data["name"],
            version=data["version"],
            connection_schema=data.get("connection_schema", {"type": "object"}),
            dataset_schema=data.get("dataset_schema", {"type": "object"}),
            output_schema=data.get("output_schema", {"type": "object"}),
            capabilities=Capabilities(**caps),
            formats={k: tuple(Tier(t) for t in v) for k, v in data.get("formats", {}).items()},
            description=data.get("description", ""),
        )

    @staticmethod
    def load(path: Path) -> Manifest:
        return Manifest.from_dict(json.loads(path.read_text(encoding="utf-8")))


@dataclass(frozen=True)
class ConnectorIssue:
    """A cross-field rule the connector's own `validate` refuses. `path` names the offending key."""

    message: str
    path: tuple[str, ...] = ()
    block: str = "connection"  # connection | dataset | output
    name: str | None = None  # dataset/output name when block is dataset/output


@dataclass(frozen=True)
class ReadBounds:
    """Which slice of a dataset one load reads. Empty bounds read everything.

    An incremental read fills `cursor` and the range `(lower, upper]` (`[lower, upper]` when
    `lower_inclusive`): a connector pushes `cursor > lower` (or `>=`) and `cursor <= upper` down to the
    source, each literal typed as the cursor column's type, and also reads the rows whose cursor is NULL
    (they cannot be placed against a watermark, so every incremental run reads them; see
    docs/incremental.md). `lower` is None
    before the first commit when no `start` is declared; `upper` is set only for windowed reads. Literals are
    the text of the value (`2024-01-31 10:00:00.123456`, `42`, `12.50`), never SQL. `committed` is the
    watermark the bounds were computed from: the new watermark never goes below it. `partitions` restricts the
    read to those partition indexes (None: every partition); bounds and partitions compose (AND)."""

    cursor: str | None = None
    cursor_type: str | None = None  # the contract's DuckDB type of the cursor, when declared
    lower: str | None = None
    lower_inclusive: bool = False
    upper: str | None = None  # inclusive
    committed: str | None = None
    partitions: tuple[int, ...] | None = None

    @property
    def unbounded(self) -> bool:
        return self == ReadBounds()

    @property
    def incremental(self) -> bool:
        return self.cursor is not None

    def describe(self) -> str:
        """`(lower, upper]` as a reader sees it: `updated_at > '2024-01-01' AND <= '2024-01-02'`."""
        if self.cursor is None:
            return "all rows"
        parts = []
        if self.lower is not None:
            parts.append(f"{self.cursor} {'>=' if self.lower_inclusive else '>'} {self.lower}")
        if self.upper is not None:
            parts.append(f"{self.cursor} <= {self.upper}")
        return " AND ".join(parts) if parts else f"every row ({self.cursor} unbounded)"


@dataclass(frozen=True)
class OutputTarget:
    """Where an output physically writes, normalized so that two spellings of one target compare equal
    (the server's case rules applied, defaults filled in, paths made absolute)."""

    system: tuple[str, ...]  # connector and connection identity: host/port/database, a database file...
    parts: tuple[str, ...]  # the target inside that system: (schema, table), or a path's parts
    display: str  # for messages (never a secret): "table analytics.orders in out/wh.duckdb"
    nested: bool = False  # a path: a target inside another (a sub-folder) overlaps it
    # where the output lives on the local file system (absolute real path parts), whatever the connector:
    # lets outputs of different connectors clash (a DuckDB sink file inside a localfiles output folder)
    local_path: tuple[str, ...] | None = None
    owns_local_path: bool = False  # the output owns everything under local_path (a folder it swaps whole)
    # why the system cannot hold the target as named (a name past the server's identifier limit, which
    # PostgreSQL would cut and MySQL refuse at run time): validation reports it as PZ0304. `parts` are what
    # the server would make of the names (PostgreSQL's cut), so two names it would cut alike clash (PZ0228)
    issue: str = ""

    def overlaps(self, other: OutputTarget) -> bool:
        if self.system != other.system:
            return self._shares_local_path(other)
        if self.nested and other.nested:
            n = min(len(self.parts), len(other.parts))
            return self.parts[:n] == other.parts[:n]
        return self.parts == other.parts

    def _shares_local_path(self, other: OutputTarget) -> bool:
        """Different connectors clash on disk when one path holds the other and the holder owns all of it
        (an output folder that a replace swaps whole), or when both are the very same path."""
        mine, theirs = self.local_path, other.local_path
        if mine is None or theirs is None:
            return False
        n = min(len(mine), len(theirs))
        if mine[:n] != theirs[:n]:
            return False
        if len(mine) == len(theirs):
            return True
        holder = self if len(mine) < len(theirs) else other
        return holder.owns_local_path


@dataclass(frozen=True)
class DataLocation:
    """Where a source dataset's data lives, in the terms of `OutputTarget` (the same `system` for the same
    store, path parts normalized alike), so validate can refuse an output that would write over it."""

    system: tuple[str, ...]
    parts: tuple[str, ...]  # the file, the folder, or a glob's fixed leading folders
    display: str  # for messages (never a secret): "path data/raw/*.csv", "path s3://bucket/raw"
    glob: tuple[str, ...] = ()  # a glob's segments after `parts` (`*`, `?`, `[..]`, `**` for any depth)
    local_path: tuple[str, ...] | None = None  # `parts` as absolute real path parts on the local disk


@dataclass(frozen=True)
class DatasetRequest:
    """What the engine asks a source to extract."""

    name: str  # dataset name
    options: dict[str, Any]  # the dataset's connector keys, templates rendered
    columns: dict[str, str] | None  # the declared contract (name -> DuckDB type), if any
    force_universal: bool = False
    bounds: ReadBounds = field(default_factory=ReadBounds)
    # how the staging table is compressed (engine.staging_compression; `land` applies it): fast, zstd, auto
    # or uncompressed. Not part of the node's id: it changes the staging file's size, never the staged rows.
    staging_compression: str = field(default="auto", metadata={"id": "exclude"})


@dataclass(frozen=True)
class Partition:
    """One independently loadable, resumable slice of a dataset."""

    index: int
    description: str
    spec: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OutputRequest:
    """One write a connector is asked for: the output, its options, strategy and keys."""

    name: str
    options: dict[str, Any]  # the output's connector keys, templates rendered
    strategy: Strategy
    keys: tuple[str, ...] = ()
    on_delete: str | None = None
    allow_empty: bool = False
    run_id: str = ""
    # checkpointed delivery: what an earlier attempt (or the run `pz retry` finishes) had acknowledged;
    # filled in when the write runs, never at compile (so it is not part of the node's id)
    resume_from: DeliveryCheckpoint | None = field(default=None, metadata={"id": "exclude"})


@dataclass(frozen=True)
class TargetColumn:
    """A column of an existing target, as a connector reports it for the engine's narrowing rule.

    `type` is normalized: DuckDB's type names (`INTEGER`, `UBIGINT`, `DECIMAL(12,2)`, `DOUBLE`, `BOOLEAN`,
    `DATE`, `TIMESTAMP WITH TIME ZONE`, `BLOB`), plus the bounds DuckDB itself does not carry:
    `VARCHAR(n)` holds at most n characters, `DECIMAL` without precision is an unbounded numeric,
    `TIMESTAMP(p)`, `TIMESTAMPTZ(p)`, `TIME(p)` keep p fractional-second digits (6 when absent), `MEDIUMINT`
    / `UMEDIUMINT` are 24-bit integers. A type the connector cannot express may be passed through as the
    system spells it: the rule leaves types it does not model to the target system.
    """

    name: str
    type: str
    native: str = ""  # the type as the target system spells it (for messages)
    max_bytes: int | None = None  # a byte bound on text or binary values (MySQL TEXT, VARBINARY(n))
    utc: bool = False  # a naive timestamp column the connector fills with UTC wall time from zoned values
    folds: tuple[str, ...] = ()  # what the target ignores when it compares values of this text column
    # (its collation or type): "case", "accents", "trailing_spaces"; merge keys are checked for duplicates
    # the way the target compares them (PZ0516)
    required: bool = False  # NOT NULL without a default (nor identity, auto-increment, generated): an
    # insert must give it a value, so a result without this column is refused (PZ0517)


@dataclass(frozen=True)
class WriteResult:
    """What a write did: rows written, batches committed and where it may resume."""

    rows: int
    batches_committed: int | None = None
    checkpoint: DeliveryCheckpoint | None = None  # checkpointed delivery: every acknowledged batch


@dataclass
class ConnectorContext:
    """What the engine gives a connector instance."""

    instance: str  # instance name (file stem)
    project_dir: Path
    connection: dict[str, Any]  # rendered connection block (may hold secrets: never print it)
    note: Callable[[str], None] = lambda _msg: None
    run_id: str = ""  # the run this instance works for ("" outside a run: validate --connect)


class Connector:
    """Base class of connectors. Override what the manifest's capabilities promise."""

    manifest_file: ClassVar[str] = "manifest.json"

    def __init__(self, context: ConnectorContext):
        self.context = context

    def unsupported(self, what: str) -> PzConnectorError:
        return PzConnectorError(f"connector '{self.manifest().name}' {what}", code="PZ0306")

    # -- static ------------------------------------------------------------------------------
    @classmethod
    def manifest(cls) -> Manifest:
        import inspect

        return Manifest.load(Path(inspect.getfile(cls)).parent / cls.manifest_file)

    @classmethod
    def validate(
        cls,
        connection: dict[str, Any],
        datasets: dict[str, dict[str, Any]],
        outputs: dict[str, dict[str, Any]],
    ) -> list[ConnectorIssue]:
        """Cross-field rules beyond the manifest JSON Schemas (tier 3); values rendered, secrets as ***."""
        return []

    @classmethod
    def output_target(
        cls, project_dir: Path, connection: dict[str, Any], output: str, options: dict[str, Any]
    ) -> OutputTarget | None:
        """The physical target of an output (rendered connection and output block; real values, so never
        put the connection in `display`), or None when it can't be told statically. Validation refuses two
        outputs whose targets overlap (PZ0228)."""
        return None

    @classmethod
    def dataset_location(
        cls, project_dir: Path, connection: dict[str, Any], dataset: str, options: dict[str, Any]
    ) -> DataLocation | None:
        """Where a dataset's data lives when it is a path (rendered connection and dataset block), or None
        (a table, or not told statically). Validate refuses an output that overlaps it (PZ0236)."""
        return None

    def source_tier(self, dataset: DatasetRequest) -> str:
        """The tier this dataset's extraction takes (the plan's choice, `choose_tier`, unless overridden).
        Raise PzConnectorError(code='PZ0312') when the request needs the universal tier on a native-only
        format."""
        return choose_tier(self.manifest().capabilities.source_tiers, dataset.force_universal)

    def sink_tier(self, output: OutputRequest, force_universal: bool) -> str:
        return choose_tier(self.manifest().capabilities.sink_tiers, force_universal)

    def static_schema(self, dataset: DatasetRequest) -> list[tuple[str, str]] | None:
        """A schema the connector can tell without a network round trip (e.g. a local file's header).
        Used by tier 4 when the dataset declares no columns. None when it can't tell cheaply."""
        return None

    # -- source ------------------------------------------------------------------------------
    def partitions(self, dataset: DatasetRequest) -> list[Partition]:
        return [Partition(0, "all")]

    def extract_native(
        self, con: duckdb.DuckDBPyConnection, dataset: DatasetRequest, partition: Partition, target: str
    ) -> None:
        """Run SQL in the staging connection that inserts the partition's rows into `target`
        (a quoted, already-created-or-not table name; create it with CREATE TABLE … AS when absent)."""
        raise self.unsupported("has no native source tier")

    def extract_batches(self, dataset: DatasetRequest, partition: Partition) -> Iterator[pa.RecordBatch]:
        """Yield Arrow record batches of the partition (universal tier)."""
        raise self.unsupported("has no universal source tier")

    @classmethod
    def staging_extensions(cls) -> tuple[str, ...]:
        """DuckDB extension files the native tier LOADs into the run's staging database, each shipped by a
        package pz pins (never a path a project names). A run loads them when it opens staging, before any
        query, without DuckDB's signature check when pz finds each file as pip installed it, and then
        locks the instance to signed extensions (`core.duck_extensions`); the connector's own LOAD is
        then a no-op. () when it loads none."""
        return ()

    # -- sink --------------------------------------------------------------------------------
    def write_native(self, con: duckdb.DuckDBPyConnection, output: OutputRequest, source: str) -> WriteResult:
        """Write the staging table `source` (quoted name) to the output with its strategy."""
        raise self.unsupported("has no native sink tier")

    def write_batches(self, output: OutputRequest, reader: pa.RecordBatchReader) -> WriteResult:
        """Consume `reader` and write it to the output with its strategy (universal tier)."""
        raise self.unsupported("has no universal sink tier")

    @classmethod
    def view_relation(cls, connection: dict[str, Any], output: str, options: dict[str, Any]) -> str | None:
        """How a view in this sink names the output's table (quoted SQL), for `strategy: view`; None when
        the connector writes no views (its manifest lists no `view` strategy)."""
        return None

    def write_view(self, output: OutputRequest, sql: str) -> WriteResult:
        """Create or replace the output as a view of `sql`, a query naming the target's own relations
        (`strategy: view`)."""
        raise PzConnectorError(f"connector '{self.manifest().name}' cannot create views", code="PZ0305")

    def target_columns(self, output: OutputRequest) -> list[TargetColumn] | None:
        """The columns of the existing target this write keeps, for the engine's narrowing rule: called
        before any write, for every strategy. None when there is no such target: it does not exist yet, or
        the write recreates it from the result's types (a replace that swaps in a new table or folder)."""
        return None

    # -- connectivity (tier 5) ------------------------------------------------------------------
    def check_connection(self) -> None:
        """Raise PzConnectorError when the system cannot be reached."""

    def fetch_schema(self, dataset: DatasetRequest) -> list[tuple[str, str]]:
        """The live dataset's columns (name, DuckDB type); PzConnectorError when missing."""
        raise self.unsupported("cannot fetch schemas")

    def probe_output(self, output: OutputRequest) -> None:
        """Check the sink may create/replace the output's target; PzConnectorError when not."""

    def close(self) -> None:
        """Release connections."""


def bounds_predicate(
    column_sql: str, bounds: ReadBounds, literal: Callable[[str], str], nullable: bool = True
) -> str:
    """The SQL predicate of an incremental read's bounds over `column_sql` (a quoted column reference), or ''
    when the read is unbounded. `literal` turns a bound's text into a typed literal of the connector's dialect
    (e.g. `CAST('2024-01-01' AS timestamp)`). Rows with a NULL cursor are always included (see ReadBounds);
    `nullable=False` (the source knows the column holds no NULL) leaves out the `OR … IS NULL`."""
    if bounds.cursor is None:
        return ""
    conditions = []
    if bounds.lower is not None:
        conditions.append(f"{column_sql} {'>=' if bounds.lower_inclusive else '>'} {literal(bounds.lower)}")
    if bounds.upper is not None:
        conditions.append(f"{column_sql} <= {literal(bounds.upper)}")
    if not conditions:
        return ""
    if not nullable:
        return " AND ".join(conditions)
    return f"(({' AND '.join(conditions)}) OR {column_sql} IS NULL)"
