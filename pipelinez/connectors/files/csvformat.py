"""CSV reading, native (DuckDB `read_csv`) and universal (pyarrow `open_csv` streams), with one meaning.

Both tiers land the same table, types and values, because both are pinned to the same decisions:

- **Dialect.** Nothing about the dialect is sniffed: `delimiter` (default `,`), `quote` (default `"`,
  `""` turns quoting off; a quote inside a quoted field is doubled), `header` (default true) and `null`
  (default: the empty field; a quoted field equal to it is NULL too) are passed to DuckDB and pyarrow alike.
  Fields may hold the delimiter, quotes and newlines when quoted.
- **Schema.** The columns that land are the `columns:` contract, in its order, with its exact types; without a
  contract, the columns and types DuckDB sniffs (sample-based) from the dataset's first file, with the date
  and timestamp formats it detected. The same schema is used for every partition, so every partition lands
  in the same table shape. With a contract nothing is sniffed at all.
- **Columns by name.** With `header: true`, each file's header row (only that row, read with the same
  dialect) names its columns: blanks are trimmed, an empty name becomes `column<i>`, a repeated name gets
  `_1`, `_2`… Schema columns are matched to header names ignoring case, so files may order their columns
  differently; columns outside the schema are read as text and dropped. Within one read (one partition) a
  schema column that some files lack is NULL for those files; one that no file of the read has is an error.
  With `header: false` columns are positional: the contract's order is the file's.
- **Conversion.** Values are converted by DuckDB in both tiers: the universal tier has pyarrow split the
  file into text fields and casts them with DuckDB (`CAST`, or `strptime` with a date/timestamp format),
  which is exactly how DuckDB's CSV reader converts them.

Rows never become Python objects: the universal tier moves Arrow batches from pyarrow through DuckDB.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.files.netfail import is_network_failure
from pipelinez.connectors.files.store import FileRef, file_list
from pipelinez.connectors.sdk_sql import summary, with_schema
from pipelinez.core import duck_connect
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident, quote_literal

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

BLOCK_SIZE = 4 << 20  # pyarrow block: holds the longest row (DuckDB max_line_size: 2 MiB); bounds memory
BATCH_ROWS = 122_880


@dataclass(frozen=True)
class CsvDialect:
    delimiter: str = ","
    quote: str = '"'
    header: bool = True
    null: str = ""
    dateformat: str | None = None
    timestampformat: str | None = None

    @staticmethod
    def of(options: Mapping[str, Any]) -> CsvDialect:
        def text(key: str, default: str | None) -> str | None:
            value = options.get(key, default)
            return None if value is None else str(value)

        return CsvDialect(
            delimiter=text("delimiter", ",") or ",",
            quote=text("quote", '"') or "",
            header=bool(options.get("header", True)),
            null=text("null", "") or "",
            dateformat=text("dateformat", None),
            timestampformat=text("timestampformat", None),
        )

    def duckdb_args(self) -> str:
        """read_csv/sniff_csv arguments pinning the dialect (every value a quoted literal)."""
        return ", ".join(
            [
                f"delim={quote_literal(self.delimiter)}",
                f"quote={quote_literal(self.quote)}",
                f"escape={quote_literal(self.quote)}",
                f"header={'true' if self.header else 'false'}",
                f"nullstr={quote_literal(self.null)}",
                "skip=0",
                "comment=''",
            ]
        )


@dataclass(frozen=True)
class ReadSchema:
    """What lands: columns (name, canonical DuckDB type) in order, and the date/timestamp formats applied."""

    columns: tuple[tuple[str, str], ...]
    dateformat: str | None = None
    timestampformat: str | None = None

    def format_args(self) -> str:
        args = ""
        if self.dateformat:
            args += f", dateformat={quote_literal(self.dateformat)}"
        if self.timestampformat:
            args += f", timestampformat={quote_literal(self.timestampformat)}"
        return args


def _struct(pairs: Sequence[tuple[str, str]]) -> str:
    return "{" + ", ".join(f"{quote_literal(n)}: {quote_literal(t)}" for n, t in pairs) + "}"


def contract_schema(contract: Sequence[tuple[str, str]], dialect: CsvDialect) -> ReadSchema:
    """The schema a `columns:` contract decides (no file is looked at)."""
    return ReadSchema(tuple(contract), dialect.dateformat, dialect.timestampformat)


def resolve_schema(
    con: duckdb.DuckDBPyConnection,
    first_file: FileRef,
    dialect: CsvDialect,
    contract: Sequence[tuple[str, str]] | None,
) -> ReadSchema:
    """The schema every read of this dataset lands (see the module docstring). `contract` types must
    already be canonical DuckDB types."""
    if contract:
        return contract_schema(contract, dialect)
    import duckdb

    try:
        row = con.execute(
            "SELECT Columns, DateFormat, TimestampFormat FROM "
            f"sniff_csv({quote_literal(first_file.location)}, {dialect.duckdb_args()})"
        ).fetchone()
    except duckdb.Error as exc:
        if is_network_failure(str(exc)):  # the read itself failed, not the detection: retried, no advice
            raise PzConnectorError(
                f"cannot read {first_file} to detect its column types: {summary(str(exc))}",
                is_transient=True,
                code="PZ0505",
            ) from exc
        raise PzConnectorError(
            f"DuckDB could not detect the column types of {first_file}: {summary(str(exc))}; declare "
            "columns: for this dataset (and check delimiter, quote and header)",
            code="PZ0505",
        ) from exc
    assert row is not None
    sniffed = [(str(c["name"]), str(c["type"])) for c in row[0]]
    if dialect.header:
        names = header_names(first_file, dialect)
        if len(names) != len(sniffed):
            raise PzConnectorError(
                f"file {first_file}: its header has {len(names)} column(s) but its rows {len(sniffed)}; "
                "check delimiter/quote, or declare columns:",
                code="PZ0505",
            )
        sniffed = [(name, typ) for name, (_, typ) in zip(names, sniffed, strict=True)]
    # An ISO date needs no format: a plain cast reads it, and keeps `infinity` (DuckDB's strptime turns
    # 'INFINITY' into 1900-01-01, so pinning the sniffed ISO format would change such a value silently).
    sniffed_date = None if row[1] == "%Y-%m-%d" else row[1]
    return ReadSchema(tuple(sniffed), dialect.dateformat or sniffed_date, dialect.timestampformat or row[2])


def header_names(file: FileRef, dialect: CsvDialect) -> list[str]:
    """The column names of a file's header row, read with the dataset's dialect (only that row is read):
    blanks trimmed, an empty name becomes `column<i>`, a repeated name (ignoring case) gets `_1`, `_2`…"""

    with (
        file.open_start() as raw,
        io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace", newline="") as text,
    ):
        reader = csv.reader(
            text,
            delimiter=dialect.delimiter,
            quotechar=dialect.quote or None,
            quoting=csv.QUOTE_MINIMAL if dialect.quote else csv.QUOTE_NONE,
            doublequote=True,
            strict=False,
        )
        fields = next(reader, None)
    if not fields:
        raise PzConnectorError(f"file {file} has no header row", code="PZ0505")
    names: list[str] = []
    taken: set[str] = set()
    for i, field in enumerate(fields):
        base = field.strip() or f"column{i}"
        name, k = base, 0
        while name.lower() in taken:
            k += 1
            name = f"{base}_{k}"
        taken.add(name.lower())
        names.append(name)
    return names


@dataclass(frozen=True)
class _Layout:
    """Files of one read that share a header, in read order."""

    names: tuple[str, ...]
    files: tuple[FileRef, ...]

    def position(self, column: str) -> int | None:
        lowered = column.lower()
        return next((i for i, n in enumerate(self.names) if n.lower() == lowered), None)


def _layouts(
    files: Sequence[FileRef],
    dialect: CsvDialect,
    schema: ReadSchema,
    hive: frozenset[str] | set[str] = frozenset(),
) -> list[_Layout]:
    """Consecutive files with the same header, grouped; error when a schema column (other than a `hive`
    partition column) is in no header."""
    if not dialect.header:
        return [_Layout(tuple(n for n, _ in schema.columns), tuple(files))]
    layouts: list[_Layout] = []
    for file in files:
        names = tuple(header_names(file, dialect))
        if layouts and layouts[-1].names == names:
            layouts[-1] = _Layout(names, (*layouts[-1].files, file))
        else:
            layouts.append(_Layout(names, (file,)))
    missing = [
        n
        for n, _ in schema.columns
        if n.lower() not in hive and all(lay.position(n) is None for lay in layouts)
    ]
    if missing:
        seen = sorted({n for lay in layouts for n in lay.names})
        raise PzConnectorError(
            f"column(s) {', '.join(repr(m) for m in missing)} of the dataset's schema are in no header "
            f"of {_describe_files(files)} (headers have: {', '.join(seen)})",
            code="PZ0505",
        )
    return layouts


def _describe_files(files: Sequence[FileRef]) -> str:
    if len(files) == 1:
        return f"file {files[0]}"
    return f"{len(files)} files ({files[0]} … {files[-1]})"


def native_select(
    files: Sequence[FileRef], dialect: CsvDialect, schema: ReadSchema, hive: Sequence[str] = ()
) -> str:
    """A SELECT over `files` that yields exactly the schema's columns, in order, with its types. Every read
    is explicit (`auto_detect=false`): files sharing a header are read together, with each schema column
    typed and every other column read as text and dropped. Columns named in `hive` come from the files'
    `key=value` folders (`hive_partitioning`), not from the files."""
    hive_names = {h.lower() for h in hive}
    hive_arg = ", hive_partitioning=true" if hive else ""
    if not dialect.header:
        in_file = [(n, t) for n, t in schema.columns if n.lower() not in hive_names]
        listed = "*"
        if hive:
            listed = ", ".join(
                f"CAST({quote_ident(n)} AS {t}) AS {quote_ident(n)}" for n, t in schema.columns
            )
        return (
            f"SELECT {listed} FROM read_csv({file_list(files)}, {dialect.duckdb_args()}, auto_detect=false, "
            f"columns={_struct(in_file)}{schema.format_args()}{hive_arg})"
        )
    types = {n.lower(): t for n, t in schema.columns}
    selects = []
    for layout in _layouts(files, dialect, schema, hive_names):
        struct = _struct([(n, types.get(n.lower(), "VARCHAR")) for n in layout.names])
        cols = []
        for name, typ in schema.columns:
            at = layout.position(name)
            if name.lower() in hive_names:
                source = f"CAST({quote_ident(name)} AS {typ})"
            else:
                source = f"CAST(NULL AS {typ})" if at is None else quote_ident(layout.names[at])
            cols.append(f"{source} AS {quote_ident(name)}")
        selects.append(
            f"SELECT {', '.join(cols)} FROM read_csv({file_list(layout.files)}, {dialect.duckdb_args()}, "
            f"auto_detect=false, columns={struct}{schema.format_args()}{hive_arg})"
        )
    return "\nUNION ALL\n".join(selects)


def _cast(field: str, typ: str, schema: ReadSchema) -> str:
    upper = typ.upper()
    if upper == "VARCHAR":
        return field
    if upper == "DATE" and schema.dateformat:
        return f"CAST(strptime({field}, {quote_literal(schema.dateformat)}) AS DATE)"
    if upper in ("TIMESTAMP", "TIMESTAMP WITH TIME ZONE") and schema.timestampformat:
        return f"CAST(strptime({field}, {quote_literal(schema.timestampformat)}) AS {typ})"
    return f"CAST({field} AS {typ})"


def universal_batches(
    files: Sequence[FileRef], dialect: CsvDialect, schema: ReadSchema, batch_rows: int = BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of `files`: pyarrow splits text fields, DuckDB converts them; one file at a time."""
    import duckdb

    con = duck_connect.connect()
    try:
        con.execute("SET arrow_lossless_conversion = true")
        con.execute("SET preserve_insertion_order = true")
        last_schema, produced = None, False
        for layout in _layouts(files, dialect, schema):
            fields = list(layout.names)  # unique ignoring case (see header_names)
            at = {name: layout.position(name) for name, _ in schema.columns}
            exprs = ", ".join(
                f"{_cast(quote_ident(fields[i]), t, schema)} AS {quote_ident(n)}"
                if (i := at[n]) is not None
                else f"CAST(NULL AS {t}) AS {quote_ident(n)}"
                for n, t in schema.columns
            )
            wanted = [fields[i] for i in at.values() if i is not None] or fields[:1]
            for file in layout.files:
                con.register("pz_csv_stream", _open_text_fields(file, fields, wanted, dialect))
                try:
                    result = con.execute(f"SELECT {exprs} FROM pz_csv_stream").to_arrow_reader(batch_rows)
                    last_schema = result.schema
                    for batch in result:
                        produced = True
                        yield batch
                except duckdb.Error as exc:
                    raise PzConnectorError(
                        f"file {file}: {summary(str(exc))}",
                        is_transient=is_network_failure(str(exc)),
                        code="PZ0505",
                    ) from exc
                finally:
                    con.unregister("pz_csv_stream")
        if not produced and last_schema is not None:
            yield from with_schema((), last_schema)  # one empty batch: the consumer learns the columns
    finally:
        con.close()


def _open_text_fields(
    file: FileRef, fields: list[str], wanted: list[str], dialect: CsvDialect
) -> pa.RecordBatchReader:
    """A pyarrow stream of the file's `wanted` columns as text, split with the dataset's dialect."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    try:
        return pacsv.open_csv(
            file.open_text_source(),
            read_options=pacsv.ReadOptions(
                column_names=fields, skip_rows_after_names=1 if dialect.header else 0, block_size=BLOCK_SIZE
            ),
            parse_options=pacsv.ParseOptions(
                delimiter=dialect.delimiter,
                quote_char=dialect.quote or False,
                double_quote=True,
                escape_char=False,
                newlines_in_values=True,
                ignore_empty_lines=len(fields) > 1,
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={f: pa.string() for f in fields},
                include_columns=wanted,
                null_values=[dialect.null],
                strings_can_be_null=True,
                quoted_strings_can_be_null=True,
            ),
        )
    except pa.ArrowException as exc:
        raise PzConnectorError(f"file {file}: {exc}", code="PZ0505") from exc
