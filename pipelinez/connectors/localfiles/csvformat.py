"""CSV reading, native (DuckDB `read_csv`) and universal (pyarrow `open_csv` streams), with one meaning.

Both tiers land the same table, types and values, because both are pinned to the same decisions:

- **Dialect.** Nothing about the dialect is sniffed: `delimiter` (default `,`), `quote` (default `"`,
  `""` turns quoting off; a quote inside a quoted field is doubled), `header` (default true) and `null`
  (default: the empty field; a quoted field equal to it is NULL too) are passed to DuckDB and pyarrow alike.
  Fields may hold the delimiter, quotes and newlines when quoted.
- **Schema.** The columns that land are the `columns:` contract, in its order, with its exact types; without a
  contract, the columns and types DuckDB sniffs (sample-based) from the dataset's first file, with the date
  and timestamp formats it detected. The same schema is used for every partition, so every partition lands
  in the same table shape.
- **Columns by name.** With `header: true`, each file's columns are matched to the schema by header name
  (files may order their columns differently; columns outside the schema are not read). Within one read
  (one partition) a schema column that some files lack is NULL for those files; one that no file of the
  read has is an error. With `header: false` columns are positional: the contract's order is the file's.
- **Conversion.** Values are converted by DuckDB in both tiers: the universal tier has pyarrow split the
  file into text fields and casts them with DuckDB (`CAST`, or `strptime` with a date/timestamp format),
  which is exactly how DuckDB's CSV reader converts them.

Rows never become Python objects: the universal tier moves Arrow batches from pyarrow through DuckDB.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.duckdb.sql import summary, with_schema
from pipelinez.connectors.localfiles.paths import duckdb_path
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


def _file_list(files: Sequence[Path]) -> str:
    return "[" + ", ".join(quote_literal(duckdb_path(f)) for f in files) + "]"


def resolve_schema(
    con: duckdb.DuckDBPyConnection,
    first_file: Path,
    dialect: CsvDialect,
    contract: Sequence[tuple[str, str]] | None,
) -> ReadSchema:
    """The schema every read of this dataset lands (see the module docstring). `contract` types must
    already be canonical DuckDB types."""
    if contract:
        return ReadSchema(tuple(contract), dialect.dateformat, dialect.timestampformat)
    row = con.execute(
        "SELECT Columns, DateFormat, TimestampFormat FROM "
        f"sniff_csv({quote_literal(duckdb_path(first_file))}, "
        f"{dialect.duckdb_args()})"
    ).fetchone()
    assert row is not None
    columns = tuple((str(c["name"]), str(c["type"])) for c in row[0])
    return ReadSchema(columns, dialect.dateformat or row[1], dialect.timestampformat or row[2])


def header_names(con: duckdb.DuckDBPyConnection, file: Path, dialect: CsvDialect) -> list[str]:
    """A file's column names as DuckDB's reader names them (duplicates get `_1`, blanks `columnN`)."""
    row = con.execute(
        f"SELECT Columns FROM sniff_csv({quote_literal(duckdb_path(file))}, {dialect.duckdb_args()}, "
        "all_varchar=true)"
    ).fetchone()
    assert row is not None
    return [str(c["name"]) for c in row[0]]


def _present(
    con: duckdb.DuckDBPyConnection, files: Sequence[Path], dialect: CsvDialect, schema: ReadSchema
) -> set[str]:
    """Schema columns some file of the read has; error when one is in none of them."""
    if not dialect.header:
        return {name for name, _ in schema.columns}
    rows = con.execute(
        f"DESCRIBE SELECT * FROM read_csv({_file_list(files)}, {dialect.duckdb_args()}, union_by_name=true, "
        "all_varchar=true)"
    ).fetchall()
    names = {str(r[0]) for r in rows}
    missing = [name for name, _ in schema.columns if name not in names]
    if missing:
        raise PzConnectorError(
            f"column(s) {', '.join(repr(m) for m in missing)} of the dataset's schema are in no header "
            f"of {_describe_files(files)} (headers have: {', '.join(sorted(names))})",
            code="PZ0505",
        )
    return names


def _describe_files(files: Sequence[Path]) -> str:
    if len(files) == 1:
        return f"file {files[0]}"
    return f"{len(files)} files ({files[0]} … {files[-1]})"


def native_select(
    con: duckdb.DuckDBPyConnection, files: Sequence[Path], dialect: CsvDialect, schema: ReadSchema
) -> str:
    """A SELECT over `files` that yields exactly the schema's columns, in order, with its types."""
    if not dialect.header:
        return (
            f"SELECT * FROM read_csv({_file_list(files)}, {dialect.duckdb_args()}, auto_detect=false, "
            f"columns={_struct(schema.columns)}{schema.format_args()})"
        )
    present = _present(con, files, dialect, schema)
    typed = [(n, t) for n, t in schema.columns if n in present]
    cols = ", ".join(
        quote_ident(n) if n in present else f"CAST(NULL AS {t}) AS {quote_ident(n)}"
        for n, t in schema.columns
    )
    return (
        f"SELECT {cols} FROM read_csv({_file_list(files)}, {dialect.duckdb_args()}, union_by_name=true, "
        f"all_varchar=true, types={_struct(typed)}{schema.format_args()})"
    )


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
    files: Sequence[Path], dialect: CsvDialect, schema: ReadSchema, batch_rows: int = BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of `files`: pyarrow splits text fields, DuckDB converts them; one file at a time."""
    import duckdb
    import pyarrow as pa
    import pyarrow.csv as pacsv

    con = duckdb.connect()
    try:
        con.execute("SET arrow_lossless_conversion = true")
        con.execute("SET preserve_insertion_order = true")
        per_file = [
            header_names(con, f, dialect) if dialect.header else [n for n, _ in schema.columns] for f in files
        ]
        union = {name for names in per_file for name in names}
        missing = [name for name, _ in schema.columns if name not in union]
        if missing:
            raise PzConnectorError(
                f"column(s) {', '.join(repr(m) for m in missing)} of the dataset's schema are in no header "
                f"of {_describe_files(files)} (headers have: {', '.join(sorted(union))})",
                code="PZ0505",
            )
        produced, last_schema = False, None
        for file, names in zip(files, per_file, strict=True):
            fields = [f"c{i}" for i in range(len(names))]
            position = {name: i for i, name in enumerate(names)}
            wanted = [fields[position[n]] for n, _ in schema.columns if n in position]
            exprs = ", ".join(
                (
                    f"{_cast(quote_ident(fields[position[n]]), t, schema)} AS {quote_ident(n)}"
                    if n in position
                    else f"CAST(NULL AS {t}) AS {quote_ident(n)}"
                )
                for n, t in schema.columns
            )
            try:
                reader = pacsv.open_csv(
                    pa.input_stream(str(file), compression="detect"),
                    read_options=pacsv.ReadOptions(
                        column_names=fields,
                        skip_rows_after_names=1 if dialect.header else 0,
                        block_size=BLOCK_SIZE,
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
                        include_columns=wanted or fields[:1],
                        null_values=[dialect.null],
                        strings_can_be_null=True,
                        quoted_strings_can_be_null=True,
                    ),
                )
            except pa.ArrowException as exc:
                raise PzConnectorError(f"file {file}: {exc}", code="PZ0505") from exc
            con.register("pz_csv_stream", reader)
            try:
                result = con.execute(f"SELECT {exprs} FROM pz_csv_stream").to_arrow_reader(batch_rows)
                last_schema = result.schema
                for batch in result:
                    produced = True
                    yield batch
            except duckdb.Error as exc:
                raise PzConnectorError(f"file {file}: {summary(str(exc))}", code="PZ0505") from exc
            finally:
                con.unregister("pz_csv_stream")
        if not produced and last_schema is not None:
            yield from with_schema((), last_schema)
    finally:
        con.close()
