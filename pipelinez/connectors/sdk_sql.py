"""DuckDB SQL helpers of the connector SDK, shared by the builtin connectors (which import no other builtin):
contract types, landing rows, error messages, peeking at rows."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from pipelinez.connectors.sdk import ReadBounds, bounds_predicate
from pipelinez.core import duck_catalog
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.duck_messages import csv_error
from pipelinez.core.duck_types import parse_type
from pipelinez.core.sqlnames import quote_ident, quote_literal
from pipelinez.core.transient import is_transient_native

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

_LINE_CONTEXT = re.compile(r"\n[ \t]*LINE |LINE \d+:")
_DUCKDB_HINTS = re.compile(r"\n\n|\n(?:Possible fixes|Possible solutions|The search space used was)")
_LOCK_CONFLICT = "Could not set lock on file"
_LOCK_HOLDER = re.compile(r"PID (\d+)")
_FLAT = re.compile(r"[A-Z_ ]+(\(\d+,\s*\d+\))?")  # a type without nesting: INTEGER, DECIMAL(12,2), …


def summary(message: str) -> str:
    """A DuckDB error message without its `LINE n:` statement context, and without what follows its first
    paragraph (DuckDB's own option hints and parameter dumps, which name DuckDB settings, not pz keys)."""
    cut = _LINE_CONTEXT.search(message)
    text = (message[: cut.start()] if cut else message).strip()
    hints = _DUCKDB_HINTS.search(text)
    return (text[: hints.start()] if hints else text).strip()


def wrap(exc: BaseException, code: str, prefix: str = "") -> PzConnectorError:
    """A DuckDB error as a PzConnectorError: the cause, after `prefix` (what failed, when the node name the
    engine puts in front of every message does not say it). A file lock held by another process is
    transient: it clears when that process closes the file."""
    raw = str(exc)
    text = csv_error(raw) or summary(raw)  # a CSV error names file, line and cause (in DuckDB's dump)
    if _LOCK_CONFLICT in text:
        holder = _LOCK_HOLDER.search(text)
        who = f" (PID {holder.group(1)})" if holder else ""
        return PzConnectorError(
            f"{prefix}another process holds the database file open{who}; close it (a DuckDB shell, a "
            f"notebook, another pz run) and retry. DuckDB said: {text.splitlines()[0]}",
            is_transient=True,
            code=code,
        )
    return PzConnectorError(f"{prefix}{text}", is_transient=is_transient_native(text), code=code)


def os_error(exc: OSError, code: str, prefix: str = "") -> PzConnectorError:
    """A file-system error as a PzConnectorError: what failed, the cause and the path it concerns."""
    where = f": {exc.filename}" if exc.filename else ""
    return PzConnectorError(f"{prefix}{exc.strerror or exc}{where}", code=code)


def canonical_type(text: str) -> str:
    """A contract type as DuckDB spells it (`decimal(18,2)` -> `DECIMAL(18,2)`), parsed by DuckDB itself, so
    the result is safe to place in SQL. ValueError when DuckDB does not know the type."""
    return parse_type(text)


def canonical_contract(columns: Mapping[str, str] | None) -> list[tuple[str, str]] | None:
    if not columns:
        return None
    result: list[tuple[str, str]] = []
    for name, typ in columns.items():
        try:
            result.append((str(name), canonical_type(typ)))
        except ValueError as exc:
            raise PzConnectorError(
                f"column '{name}' has type '{typ}' that DuckDB does not know ({exc})", code="PZ0505"
            ) from exc
    return result


def table_exists(con: duckdb.DuckDBPyConnection, quoted: str) -> bool:
    """Whether the (quoted, maybe qualified) table exists, looked up without touching it: one name resolved
    by the binder, never an enumeration of the instance's catalogs (which would reach every database other
    nodes have attached, see `pipelinez.core.duck_catalog`)."""
    return duck_catalog.table_exists(con, quoted)


def land(con: duckdb.DuckDBPyConnection, target: str, select: str, compression: str = "auto") -> None:
    """Create `target` from `select`, or insert into it by column name when it exists already.
    `compression` is the dataset's `staging_compression` (see `create_staging_table`)."""
    if table_exists(con, target):
        con.execute(f"INSERT INTO {target} BY NAME {select}")
    elif create_staging_table(con, target, select, compression):
        con.execute(f"INSERT INTO {target} {select}")
    else:
        con.execute(f"CREATE TABLE {target} AS {select}")


def create_staging_table(con: duckdb.DuckDBPyConnection, target: str, select: str, compression: str) -> bool:
    """Create the empty staging table `target` with `select`'s columns and the compression asked for; False
    when it is left to `CREATE TABLE … AS` (auto: DuckDB analyses every column segment and picks the
    smallest codec, which costs more CPU than reading a CSV file).

    - fast: text columns stored as they are, every other column DuckDB's own choice (its light codecs:
      bitpacking, RLE, dictionary… are cheap to pick). Text is where compression costs: auto's FSST
      analysis, and zstd too (5 of a 10M-row PostgreSQL load's 13.6 CPU seconds, three text columns).
    - zstd: text columns zstd (about half the file of fast), every other column as in fast.
    - uncompressed: no column compressed (the largest file).
    Columns of types DuckDB cannot compress that way (nested types) keep DuckDB's choice."""
    if compression not in ("fast", "zstd", "uncompressed"):
        return False
    columns = [(str(r[0]), str(r[1])) for r in con.execute(f"DESCRIBE {select}").fetchall()]
    spec = []
    for name, kind in columns:
        codec = None
        if kind == "VARCHAR":
            codec = "zstd" if compression == "zstd" else "uncompressed"
        elif compression == "uncompressed" and _FLAT.fullmatch(kind):
            codec = "uncompressed"
        spec.append(f"{quote_ident(name)} {kind}" + (f" USING COMPRESSION {codec}" if codec else ""))
    con.execute(f"CREATE TABLE {target} ({', '.join(spec)})")
    return True


def with_schema(batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """`batches`, or one empty batch of `schema` when there are none, so a consumer always learns the
    columns (an empty source still lands an empty table of the right shape)."""
    import pyarrow as pa

    empty = True
    for batch in batches:
        empty = False
        yield batch
    if empty:
        yield pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)


def peek_rows(reader: Iterable[pa.RecordBatch]) -> tuple[pa.RecordBatch | None, Iterator[pa.RecordBatch]]:
    """The first batch of `reader` holding rows (None when it has none) and the batches after it."""
    batches = iter(reader)
    for batch in batches:
        if batch.num_rows:
            return batch, batches
    return None, batches


def bounded_select(select: str, bounds: ReadBounds) -> str:
    """`select` restricted to an incremental read's bounds (DuckDB dialect), or `select` itself when the read
    is unbounded. The filter sits on the scan's output, so DuckDB pushes it into the scan (Parquet row groups,
    an attached table's scan). A bound's literal is cast to the contract's cursor type when declared, else
    DuckDB types the string literal as the cursor column's own type."""
    if not bounds.incremental:
        return select
    cursor = str(bounds.cursor)

    def literal(text: str) -> str:
        if bounds.cursor_type:
            return f"CAST({quote_literal(text)} AS {canonical_type(bounds.cursor_type)})"
        return quote_literal(text)

    predicate = bounds_predicate(f"pz_bounded.{quote_ident(cursor)}", bounds, literal)
    if not predicate:
        return select
    return f"SELECT * FROM ({select}) AS pz_bounded WHERE {predicate}"


def bounded_batches(batches: Iterable[pa.RecordBatch], bounds: ReadBounds) -> Iterator[pa.RecordBatch]:
    """`batches` with only the rows inside an incremental read's bounds (and the NULL-cursor rows), filtered
    with Arrow kernels batch by batch; the bounds' literals are cast to the cursor column's Arrow type."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not bounds.incremental or (bounds.lower is None and bounds.upper is None):
        yield from batches
        return
    for batch in batches:
        index = batch.schema.get_field_index(str(bounds.cursor))
        if index < 0:
            raise PzConnectorError(
                f"the cursor column '{bounds.cursor}' is not a column of the data (found: "
                f"{', '.join(batch.schema.names)})",
                code="PZ0505",
            )
        column = batch.column(index)
        keep = pc.is_null(column)
        inside = None
        if bounds.lower is not None:
            low = pa.scalar(bounds.lower).cast(column.type)
            inside = pc.greater_equal(column, low) if bounds.lower_inclusive else pc.greater(column, low)
        if bounds.upper is not None:
            high = pc.less_equal(column, pa.scalar(bounds.upper).cast(column.type))
            inside = high if inside is None else pc.and_(inside, high)
        yield batch.filter(pc.or_(keep, inside))
