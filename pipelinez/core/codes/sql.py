"""PZ04xx: SQL dry-compile (tier 4)."""

from __future__ import annotations

from pipelinez.core.codes.model import Code

CODES: tuple[Code, ...] = (
    Code(
        "PZ0401",
        "SqlSyntax",
        "a pipeline's SQL does not parse",
        "fix the SQL at the line and column shown",
    ),
    Code(
        "PZ0402",
        "UnknownRelation",
        "the SQL names a table or function DuckDB cannot find",
        "read tables with {{ source('src', 'dataset') }} or {{ ref('pipeline') }}, never by raw name",
    ),
    Code(
        "PZ0403",
        "SqlBinding",
        "the SQL does not type-check (no matching function or operator, bad cast)",
        "add an explicit CAST or fix the expression at the place shown",
    ),
    Code(
        "PZ0404",
        "NotAQuery",
        "a pipeline holds more than one statement, or a statement that is not a query",
        "keep one SELECT (or WITH … SELECT) after the INSERT INTO clauses",
    ),
    Code(
        "PZ0405",
        "CheckSql",
        "a check's generated SQL does not compile (unknown column or bad expression)",
        "fix the check's columns/expression in the sidecar",
    ),
    Code(
        "PZ0406",
        "LooseCompile",
        "a dataset has no declared columns and no cached schema, so pipelines reading it were only "
        "parsed, not bound (warning)",
        "declare columns: for the dataset, or run `pz validate --connect` to cache its schema",
    ),
    Code(
        "PZ0412",
        "UnknownColumn",
        "the SQL names a column that does not exist in its input",
        "fix the column name (candidates are shown), or add it to the source's columns: contract",
    ),
    Code(
        "PZ0413",
        "ReadsOutsideInputs",
        "a pipeline's or check's SQL reads something other than its source() and ref() inputs: a table "
        "function that reads files, URLs, other databases or the catalog (read_csv, read_text, "
        "postgres_scan, query, duckdb_settings, ...), a table of another database, or a statement "
        "(ATTACH, COPY, INSTALL/LOAD, SET, PRAGMA)",
        "declare the data as a source and read it with {{ source('src', 'dataset') }}; a project that "
        "must read outside its inputs sets `engine: { external_access: true }` in project.yml",
    ),
    Code(
        "PZ0414",
        "ExtensionNotLoadable",
        "a pipeline uses a type or function of a DuckDB extension that DuckDB loads on first use (inet, "
        "spatial, excel, ...): tier 4 binds with DuckDB's external access off, so it loads no extension",
        "write the query without the extension's types and functions, or set `engine: { external_access: "
        "true }` in project.yml (it also lifts PZ0413's guard: pipelines may then read files and URLs)",
    ),
)
