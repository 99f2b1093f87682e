"""One page of a JSON API as Arrow record batches, parsed by DuckDB (never row by row in Python).

A page's body lands in a temporary file; DuckDB finds the records list at the dataset's `records` path (and
the next cursor, for cursor pagination), and `read_json(..., format='array')` reads the records: with the
`columns:` contract's types, or with the types inferred from the first page that has records, by the same
rules as JSON files (DuckDB's sampling, nesting below 16 levels kept as JSON). Every later page is read with
those types. Memory is bounded by one page.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipelinez.connectors.files.jsondepth import refuse_too_deep
from pipelinez.connectors.files.jsonread import INFER_DEPTH, INFER_SAMPLE
from pipelinez.connectors.sdk_sql import summary

# The JSON-file rules (depth guard, inference bounds) of the SDK's file-format kit, as for JSON files.
from pipelinez.core import duck_connect
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.sqlnames import quote_ident, quote_literal

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

BATCH_ROWS = 122_880


@dataclass
class Page:
    """A parsed page: where its records are, the next cursor it names, and (once read) its row count."""

    records_file: Path | None  # None: the page holds no records
    cursor: str | None
    rows: int = 0


class PageReader:
    """Parses the pages of one dataset read in a private in-memory DuckDB, with one schema for all."""

    def __init__(
        self,
        records_path: str | None,
        contract: Sequence[tuple[str, str]] | None,
        note: Callable[[str], None] = lambda _m: None,
    ):

        self.records_path = records_path
        self.schema: tuple[tuple[str, str], ...] | None = tuple(contract) if contract else None
        self.inferred = not contract  # the schema comes from the first page's records
        self._note = note
        self._unread: set[str] = set()  # keys of later pages that the inferred schema does not read
        self._con: duckdb.DuckDBPyConnection = duck_connect.connect()
        self._con.execute("SET TimeZone = 'UTC'")
        self._dir = tempfile.TemporaryDirectory(prefix="pz-http-")
        self._pages = 0

    def resume(self, schema: tuple[tuple[str, str], ...] | None, unread: frozenset[str], pages: int) -> None:
        """Continue a read an earlier attempt began: its schema, the keys it noted, the pages it parsed."""
        if schema is not None:
            self.schema = schema
        self._unread = set(unread)
        self._pages = pages

    @property
    def unread(self) -> frozenset[str]:
        return frozenset(self._unread)

    def close(self) -> None:
        self._con.close()
        self._dir.cleanup()

    def parse(self, body: bytes, cursor_path: str | None, what: str) -> Page:
        """Find the records and the next cursor of one page body."""
        import duckdb

        self._pages += 1
        folder = Path(self._dir.name)
        page_file = folder / "page.json"
        page_file.write_bytes(body)
        refuse_too_deep([page_file])
        path = self.records_path or "$"
        sql = (
            "SELECT json_type(j), r::VARCHAR, json_type(r), json_extract_string(j, ?), "
            "CASE WHEN json_type(j) = 'OBJECT' THEN json_keys(j) END "
            "FROM (SELECT j, json_extract(j, ?) AS r "
            f"FROM (SELECT content::JSON AS j FROM read_text({quote_literal(page_file.as_posix())})))"
        )
        try:
            row = self._con.execute(sql, [cursor_path or "$.__pz_no_cursor", path]).fetchone()
        except duckdb.Error as exc:
            raise PzConnectorError(f"{what}: the response is not JSON: {summary(str(exc))}") from None
        assert row is not None
        top, records, kind, cursor = row[0], row[1], row[2], row[3]
        keys: list[str] = list(row[4] or [])
        if records is None or records == "null":
            if self._pages == 1 and self.records_path is not None:
                raise PzConnectorError(
                    f"{what}: the response has no records at '{self.records_path}'"
                    + (f" (its top-level keys: {', '.join(keys)})" if keys else f" (it is a JSON {top})")
                    + "; set records: to the path of the list"
                )
            return Page(None, cursor)
        if self.records_path is None and top == "ARRAY":
            return Page(page_file, cursor)
        records_file = folder / "records.json"
        text = records if kind == "ARRAY" else f"[{records}]"
        records_file.write_text(text, encoding="utf-8")
        return Page(records_file, cursor)

    def batches(self, page: Page, what: str) -> Iterator[pa.RecordBatch]:
        """The page's records as Arrow batches with the dataset's schema (inferred now when not known)."""
        import duckdb

        if page.records_file is None:
            return
        scan_file = quote_literal(page.records_file.as_posix())
        try:
            if self.schema is None:
                found = self._con.execute(
                    f"DESCRIBE SELECT * FROM read_json({scan_file}, format='array', "
                    f"maximum_depth={INFER_DEPTH}, sample_size={INFER_SAMPLE})"
                ).fetchall()
                if not found or (len(found) == 1 and found[0][0] == "json" and found[0][1] == "JSON"):
                    # an empty list: nothing to infer from yet
                    count = self._con.execute(f"SELECT count(*) FROM read_json({scan_file}, format='array')")
                    if (count.fetchone() or (0,))[0] == 0:
                        return
                self.schema = tuple((str(r[0]), str(r[1])) for r in found)
            elif self.inferred:
                self._notice_new_keys(scan_file, what)
            columns = "{" + ", ".join(f"{quote_literal(n)}: {quote_literal(t)}" for n, t in self.schema) + "}"
            reader = self._con.execute(
                f"SELECT * FROM read_json({scan_file}, format='array', auto_detect=false, columns={columns})"
            ).to_arrow_reader(BATCH_ROWS)
            for batch in reader:
                page.rows += batch.num_rows
                yield batch
        except duckdb.Error as exc:
            raise PzConnectorError(
                f"{what}: cannot read the records: {summary(str(exc))}; "
                "declare or fix columns: for the dataset"
            ) from None

    def _notice_new_keys(self, scan_file: str, what: str) -> None:
        """A note naming keys a later page has (in its first records) that the first page's did not: the
        inferred columns do not read them. Cheap: top-level keys of a sample only."""
        assert self.schema is not None
        sample = self._con.execute(
            f"DESCRIBE SELECT * FROM read_json({scan_file}, format='array', maximum_depth=1, "
            "sample_size=1024)"
        ).fetchall()
        known = {n for n, _ in self.schema} | self._unread
        new = sorted(str(r[0]) for r in sample if str(r[0]) not in known)
        if new and not (len(sample) == 1 and sample[0][0] == "json"):
            self._unread.update(new)
            self._note(
                f"{what}: key(s) {', '.join(new)} are not in the columns inferred from the first page and "
                "are not read; declare columns: for the dataset to read them"
            )

    def empty_batch(self) -> pa.RecordBatch | None:
        """An empty batch of the schema (a read with a contract that found no records), else None."""
        if self.schema is None:
            return None
        cols = ", ".join(f"NULL::{t} AS {quote_ident(n)}" for n, t in self.schema)
        import pyarrow as pa

        table = self._con.execute(f"SELECT {cols} LIMIT 0").to_arrow_table()
        return pa.RecordBatch.from_pylist([], schema=table.schema)
