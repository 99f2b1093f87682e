"""Write strategies into a DuckDB database, each in one transaction on the target database.

`source` is a table the cursor can read (a staging table, or a temp table holding the universal stream);
`catalog` is the target database's name on that cursor (an ATTACH alias, or the file's own name).

- replace: CREATE TABLE <schema>."__pz_tmp_<table head>_<run>_<hash>" AS SELECT * FROM source; DROP TABLE IF
  EXISTS target; ALTER TABLE tmp RENAME TO target; COMMIT. DuckDB runs the three in one transaction, so
  readers and crashes see the old table or the new one, never none. (CREATE OR REPLACE would be atomic too;
  the temp table gives the swap a seam that tests can fail on: failpoint `sink.before_swap`.)
- merge: `MERGE INTO target USING source ON (keys)` (DuckDB >= 1.4): rows whose `on_delete` column is true
  delete their key; other rows (false or NULL) update the matched row or are inserted. The `on_delete`
  column is a control column: it is never written (not when the target is created, not on insert or
  update), and a target column of that name (from an earlier write) is left as it is. Keys compare with
  IS NOT DISTINCT FROM, so NULL keys match themselves and merging twice equals merging once. Two source
  rows with the same key are refused: which one should win is not defined.
- append: INSERT INTO target BY NAME SELECT * FROM source; batches_committed = 1.
Columns are matched by name everywhere. A missing target (and schema) is created from the source's shape.
Source columns the target lacks are added to it (ALTER TABLE ADD COLUMN) in the same transaction; target
columns the source lacks are left NULL on insert and untouched on update.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pipelinez.connectors.duckdb.names import TableName
from pipelinez.connectors.sdk import OutputRequest, WriteResult
from pipelinez.connectors.sdk_feed import ArrowFeed
from pipelinez.core import failpoints
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident

if TYPE_CHECKING:
    import duckdb


def is_empty(cur: duckdb.DuckDBPyConnection, source: str) -> bool:
    """Whether `source` has no row; stops at the first row it finds (a view is not computed whole)."""
    return cur.execute(f"SELECT 1 FROM {source} LIMIT 1").fetchone() is None


def count_rows(cur: duckdb.DuckDBPyConnection, source: str) -> int:
    row = cur.execute(f"SELECT count(*) FROM {source}").fetchone()
    return int(row[0]) if row else 0


def columns_of(cur: duckdb.DuckDBPyConnection, relation: str) -> list[tuple[str, str]]:
    return [(str(r[0]), str(r[1])) for r in cur.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()]


_COLLATED = re.compile(
    r'(?:"((?:[^"]|"")+)"|([A-Za-z_][\w$]*))\s+VARCHAR\s+COLLATE\s+([\w.]+)', re.IGNORECASE
)


def collations(create_sql: str) -> dict[str, str]:
    """Lower-cased column name -> collation, for the columns a table's CREATE statement collates."""
    return {
        (quoted.replace('""', '"') if quoted else plain).lower(): collation.lower()
        for quoted, plain, collation in _COLLATED.findall(create_sql)
    }


def collation_folds(collation: str) -> tuple[str, ...]:
    """What a DuckDB collation (`nocase`, `noaccent`, `nocase.noaccent`) ignores when it compares."""
    parts = set(collation.split("."))
    return tuple(f for f, p in (("case", "nocase"), ("accents", "noaccent")) if p in parts)


def refuse_empty(target: TableName) -> PzConnectorError:
    return PzConnectorError(
        f"the result has no rows, and replace would leave table {target} empty; nothing was written "
        "(set allow_empty: true to allow it)",
        code="PZ0509",
    )


def check_merge(
    cur: duckdb.DuckDBPyConnection,
    output: OutputRequest,
    source: str,
    source_cols: Sequence[tuple[str, str]],
) -> None:
    """Merge preconditions, checked on the source before the target is touched."""
    names = {n.lower() for n, _ in source_cols}
    if not output.keys:
        raise PzConnectorError("strategy merge needs keys: [the columns that identify a row]", code="PZ0305")
    missing = [k for k in output.keys if k.lower() not in names]
    if output.on_delete and output.on_delete.lower() not in names:
        missing.append(output.on_delete)
    if missing:
        raise PzConnectorError(
            f"the result has no column(s) {', '.join(repr(m) for m in missing)} "
            f"(it has: {', '.join(n for n, _ in source_cols)})",
            code="PZ0501",
        )
    if output.on_delete and output.on_delete.lower() in {k.lower() for k in output.keys}:
        raise PzConnectorError(f"on_delete column '{output.on_delete}' cannot be a key", code="PZ0501")
    keys = ", ".join(quote_ident(k) for k in output.keys)
    dup = cur.execute(
        f"SELECT count(*) FROM (SELECT {keys} FROM {source} GROUP BY ALL HAVING count(*) > 1)"
    ).fetchone()
    if dup and dup[0]:
        raise PzConnectorError(
            f"{dup[0]} key value(s) of ({', '.join(output.keys)}) repeat in the "
            "result; merge needs one row per key (deduplicate the pipeline's result)",
            code="PZ0501",
        )


def written_columns(output: OutputRequest, source_cols: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The source columns that land in the target: all of them, but merge's `on_delete` control column."""
    flag = output.on_delete.lower() if output.strategy == "merge" and output.on_delete else None
    return [(n, t) for n, t in source_cols if n.lower() != flag]


def _add_missing_columns(
    cur: duckdb.DuckDBPyConnection, target: str, source_cols: Sequence[tuple[str, str]]
) -> None:
    have = {n.lower() for n, _ in columns_of(cur, target)}
    for name, typ in source_cols:
        if name.lower() not in have:
            cur.execute(f"ALTER TABLE {target} ADD COLUMN {quote_ident(name)} {typ}")


def write(
    cur: duckdb.DuckDBPyConnection,
    catalog: str,
    target: TableName,
    output: OutputRequest,
    source: str,
    source_cols: Sequence[tuple[str, str]],
    rows: int | None,
    shape: str | None = None,
    leftovers: Sequence[str] | None = None,
    feed: ArrowFeed | None = None,
) -> WriteResult:
    """Run the output's strategy in one transaction; the previous state stays on any failure.

    `rows` is the source's row count (merge reads the source more than once), or None (replace and append
    only): they count what they write, so the source (a pipeline streamed into the write is a view) is
    computed once. A one-shot stream comes as `feed`, written in bounded statements and counted as it lands,
    and `shape` (also `source`) names an empty relation with the stream's columns.
    `leftovers`: the target's work tables of earlier runs, when the caller listed them elsewhere (the file
    attached to the shared staging instance must not be listed there: see `leftover_work_tables`)."""
    qtarget = target.sql(catalog)
    cur.execute("BEGIN TRANSACTION")
    try:
        cur.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(catalog)}.{quote_ident(target.schema)}")
        if output.strategy == "replace":
            result = _replace(cur, catalog, target, output, source, rows, shape, leftovers, feed)
        else:
            result = _into_target(cur, qtarget, output, source, source_cols, rows, shape, feed)
        cur.execute("COMMIT")
        return result
    except BaseException:
        with contextlib.suppress(Exception):
            cur.execute("ROLLBACK")
        raise


def _replace(
    cur: duckdb.DuckDBPyConnection,
    catalog: str,
    target: TableName,
    output: OutputRequest,
    source: str,
    rows: int | None,
    shape: str | None,
    leftovers: Sequence[str] | None,
    feed: ArrowFeed | None,
) -> WriteResult:
    """Replace, inside `write`'s transaction: the result into a work table, then swapped in for the target."""
    sweep(cur, catalog, target, leftovers)
    tmp = work_table(target, output.run_id)
    cur.execute(f"DROP TABLE IF EXISTS {tmp.sql(catalog)}")
    if feed is None:
        cur.execute(f"CREATE TABLE {tmp.sql(catalog)} AS SELECT * FROM {source}")
    else:
        cur.execute(f"CREATE TABLE {tmp.sql(catalog)} AS SELECT * FROM {shape or source} WITH NO DATA")
        rows = feed.insert_into(cur, tmp.sql(catalog))
    if rows is None:
        rows = count_rows(cur, tmp.sql(catalog))  # a table's count: no second pass over the source
    failpoints.hit("sink.before_swap")
    cur.execute(f"DROP TABLE IF EXISTS {target.sql(catalog)}")
    cur.execute(f"ALTER TABLE {tmp.sql(catalog)} RENAME TO {quote_ident(target.table)}")
    return WriteResult(rows)


def _into_target(
    cur: duckdb.DuckDBPyConnection,
    qtarget: str,
    output: OutputRequest,
    source: str,
    source_cols: Sequence[tuple[str, str]],
    rows: int | None,
    shape: str | None,
    feed: ArrowFeed | None,
) -> WriteResult:
    """Append or merge, inside `write`'s transaction, into the target (created when missing)."""
    data = written_columns(output, source_cols)
    select = "*" if len(data) == len(source_cols) else ", ".join(quote_ident(n) for n, _ in data)
    cur.execute(
        f"CREATE TABLE IF NOT EXISTS {qtarget} AS SELECT {select} FROM {shape or source} WITH NO DATA"
    )
    _add_missing_columns(cur, qtarget, data)
    if output.strategy == "append" and feed is not None:
        return WriteResult(feed.insert_into(cur, qtarget, by_name=True), 1)
    if output.strategy == "append":
        inserted = cur.execute(f"INSERT INTO {qtarget} BY NAME SELECT * FROM {source}").fetchone()
        return WriteResult(rows if rows is not None else int(inserted[0] if inserted else 0), 1)
    if rows is None:
        raise ValueError("merge needs a source it can read twice")
    cur.execute(_merge_sql(qtarget, output, source, source_cols))
    failpoints.hit("sink.before_merge")
    return WriteResult(rows - _delete_requests(cur, output, source))


def _digest(target: TableName) -> str:
    return hashlib.sha1(target.table.lower().encode("utf-8")).hexdigest()[:8]


def work_table(target: TableName, run_id: str) -> TableName:
    """`__pz_tmp_<table head>_<run>_<hash>`: the hash (of the full, case-folded table name) keeps apart two
    long names that share their head."""
    run = "".join(ch if ch.isalnum() else "_" for ch in run_id)[-24:] or "run"
    return TableName(target.schema, f"__pz_tmp_{target.table[:40]}_{run}_{_digest(target)}")


def sweep(
    cur: duckdb.DuckDBPyConnection, catalog: str, target: TableName, leftovers: Sequence[str] | None = None
) -> None:
    """Drop the target's work tables of earlier runs. A replace's work table lives inside its transaction,
    so only a write that failed between its statements without rolling back could leave one; the sweep
    keeps the target's schema clean whatever happened. `leftovers` None: list them on `cur` (a connection
    of the file's own instance)."""
    names = leftover_work_tables(cur, catalog, target) if leftovers is None else leftovers
    for name in names:
        cur.execute(f"DROP TABLE IF EXISTS {TableName(target.schema, str(name)).sql(catalog)}")


def leftover_work_tables(cur: duckdb.DuckDBPyConnection, catalog: str, target: TableName) -> list[str]:
    """The target's work tables of earlier runs in `catalog`. `duckdb_tables()` lists every database the
    instance has attached: call this where only this file is looked up (`files.looked_up`, the helper
    instance with the file attached read-only), never on the run's staging instance, where it would reach
    (and fail with) the databases other nodes have attached."""
    rows = cur.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND lower(schema_name) = lower(?) "
        "AND starts_with(table_name, '__pz_tmp_') AND ends_with(table_name, ?)",
        [catalog, target.schema, f"_{_digest(target)}"],
    ).fetchall()
    return [str(name) for (name,) in rows]


def _delete_requests(cur: duckdb.DuckDBPyConnection, output: OutputRequest, source: str) -> int:
    """Rows of a merge's source flagged by `on_delete`: they remove a key, they do not land."""
    if not output.on_delete:
        return 0
    return count_rows(cur, f"(SELECT 1 FROM {source} WHERE {quote_ident(output.on_delete)} IS TRUE)")


def _merge_sql(
    qtarget: str, output: OutputRequest, source: str, source_cols: Sequence[tuple[str, str]]
) -> str:
    keys = {k.lower() for k in output.keys}
    on = " AND ".join(f"t.{quote_ident(k)} IS NOT DISTINCT FROM s.{quote_ident(k)}" for k in output.keys)
    names = [n for n, _ in written_columns(output, source_cols)]
    clauses: list[str] = []
    flag = f"s.{quote_ident(output.on_delete)}" if output.on_delete else None
    if flag:
        clauses.append(f"WHEN MATCHED AND {flag} IS TRUE THEN DELETE")
    updates = ", ".join(f"{quote_ident(n)} = s.{quote_ident(n)}" for n in names if n.lower() not in keys)
    if updates:
        clauses.append(f"WHEN MATCHED THEN UPDATE SET {updates}")
    cols = ", ".join(quote_ident(n) for n in names)
    values = ", ".join(f"s.{quote_ident(n)}" for n in names)
    guard = f" AND {flag} IS NOT TRUE" if flag else ""
    clauses.append(f"WHEN NOT MATCHED{guard} THEN INSERT ({cols}) VALUES ({values})")
    return f"MERGE INTO {qtarget} AS t USING {source} AS s ON ({on})\n" + "\n".join(clauses)
