"""JSON reading with one set of rules, for JSON files and for JSON documents from other places (the `http`
connector's responses): nesting guard, bounded schema inference, and the exact-schema read.

- `refuse_too_deep(files)`: PZ0505 for a file nested deeper than `jsondepth.MAX_DEPTH` levels (DuckDB's
  reader would crash the process); call it before DuckDB parses anything.
- `infer_columns(con, files)`: the (name, DuckDB type) pairs DuckDB's `read_json` samples from the files
  (`INFER_SAMPLE` records per file, nesting below `INFER_DEPTH` levels stays `JSON`); PZ0505 when it can't.
- `select(files, columns)`: the SELECT reading the files as exactly those columns, in order, with those
  types (`format='auto'`: newline-delimited records or a top-level array; a key missing from a record is
  NULL).

`files` are `store.FileRef`s: `store.local_ref(path)` for a local file (e.g. responses spooled to a temp
newline-delimited JSON file).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pipelinez.connectors.files.jsondepth import refuse_too_deep
from pipelinez.connectors.files.netfail import is_network_failure
from pipelinez.connectors.files.store import FileRef, file_list
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident, quote_literal

if TYPE_CHECKING:
    import duckdb

__all__ = ["INFER_DEPTH", "INFER_SAMPLE", "infer_columns", "refuse_too_deep", "select"]

INFER_DEPTH = 16  # levels of nesting typed as STRUCT/LIST when inferring; deeper values are JSON
INFER_SAMPLE = 20480  # records sampled per file when inferring (DuckDB's default, pinned)


def struct_literal(pairs: Sequence[tuple[str, str]]) -> str:
    """A DuckDB struct literal {'name': 'TYPE', …} (a `columns=` argument of DuckDB's readers)."""
    return "{" + ", ".join(f"{quote_literal(n)}: {quote_literal(t)}" for n, t in pairs) + "}"


def infer_columns(
    con: duckdb.DuckDBPyConnection, files: Sequence[FileRef], what: str = "the dataset", hive: bool = False
) -> tuple[tuple[str, str], ...]:
    """Keys and types sampled from the files, bounded: nesting below INFER_DEPTH levels stays JSON. With
    `hive`, the files' `key=value` folders add their columns."""
    import duckdb

    hive_arg = ", hive_partitioning=true" if hive else ""
    scan = f"read_json({file_list(files)}, maximum_depth={INFER_DEPTH}, sample_size={INFER_SAMPLE}{hive_arg})"
    try:
        rows = con.execute(f"DESCRIBE SELECT * FROM {scan}").fetchall()
    except duckdb.Error as exc:
        if is_network_failure(str(exc)):  # the read itself failed, not the inference: retried, no advice
            raise PzConnectorError(
                f"cannot read {files[0]} to infer its columns: {str(exc).splitlines()[0]}",
                is_transient=True,
                code="PZ0505",
            ) from None
        raise PzConnectorError(
            f"cannot infer the columns of {files[0]}{' …' if len(files) > 1 else ''}: "
            f"{str(exc).splitlines()[0]}; declare columns: for {what}",
            code="PZ0505",
        ) from None
    return tuple((str(r[0]), str(r[1])) for r in rows)


def select(files: Sequence[FileRef], columns: Sequence[tuple[str, str]], hive: Sequence[str] = ()) -> str:
    """The SELECT that reads `files` as exactly `columns` (name, DuckDB type), in order; columns named in
    `hive` come from the files' `key=value` folders."""
    if not hive:
        return (
            f"SELECT * FROM read_json({file_list(files)}, auto_detect=false, format='auto', "
            f"columns={struct_literal(columns)})"
        )
    names = {h.lower() for h in hive}
    in_file = [(n, t) for n, t in columns if n.lower() not in names]
    cols = ", ".join(f"CAST({quote_ident(n)} AS {t}) AS {quote_ident(n)}" for n, t in columns)
    return (
        f"SELECT {cols} FROM read_json({file_list(files)}, auto_detect=false, format='auto', "
        f"columns={struct_literal(in_file)}, hive_partitioning=true)"
    )
