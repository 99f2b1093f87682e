"""A pipeline reads only what it declares: `source()` and `ref()` are its only inputs.

DuckDB can read any file, URL or database the process can reach from inside a query
(`read_csv('/etc/passwd')`, `read_text()`, `postgres_scan()`, `query('…')`, the catalog functions) and run
statements that reach outside (`ATTACH`, `COPY`, `INSTALL`/`LOAD`, `SET`, `PRAGMA`). `outside_reads` finds
the reads in a pipeline's or a check's SQL on DuckDB's own parse tree (`json_serialize_sql`): every table
function but the few that only compute (`range`, `unnest`, …), the system catalog's views (`duckdb_tables`,
`pg_settings`, …) and every table named in another catalog or schema. `refused_statement` names a statement
of the kinds above.

In tier 4 a text scan decides first whether the parse is needed: a table function is always called with `(`,
so SQL whose every `name(` is a known scalar function or keyword, and that names no catalog view, calls no
table function nor view, and most pipelines never reach the parser. Any other name (a table function, a
CTE's column list, an unusual function) is looked up on the parse tree. The scan does not look for tables
named with a catalog or schema (`wh.orders`): tier 4 binds every query in a database holding only its
inputs, where such a name does not bind (PZ0402). The run parses every pipeline's and check's SQL, scan or
not, so there a qualified name (an attached sink's table) is refused as well.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelinez.core.json_types import JsonObject

if TYPE_CHECKING:
    import duckdb

# table functions that compute rows from their arguments and read nothing
ALLOWED_TABLE_FUNCTIONS = frozenset(
    {"range", "generate_series", "unnest", "json_each", "json_tree", "repeat", "repeat_row"}
)

# statement types (DuckDB's StatementType names) that reach outside the query
REFUSED_STATEMENTS = {
    "ATTACH": "ATTACH",
    "DETACH": "DETACH",
    "COPY": "COPY",
    "COPY_DATABASE": "COPY",
    "EXPORT": "EXPORT",
    "LOAD": "INSTALL/LOAD",
    "SET": "SET",
    "VARIABLE_SET": "SET",
    "PRAGMA": "PRAGMA",
    "CALL": "CALL",
}

# names that, followed by `(`, are never a table function: SQL keywords and common scalar, aggregate and
# window functions, and type names (a cast's `decimal(18, 2)`). Any other name sends the SQL to the parser.
_NEVER_TABLE_WORDS = """
    in as values over filter exists and or not on using from join select where when then else case between
    like ilike similar is any all some lateral struct map list array interval row columns grouping rollup
    cube sets partition within group by extract position substring trim overlay distinct union except
    intersect with recursive materialized qualify having window limit offset exclude replace rename include
    cast try_cast coalesce nullif greatest least if ifnull iif nvl decimal numeric varchar char character
    text timestamp timestamptz time date bit float double real int integer bigint smallint tinyint hugeint
    count sum avg mean min max abs round floor ceil ceiling upper lower length len concat concat_ws substr
    regexp_matches regexp_replace regexp_extract regexp_full_match date_trunc datetrunc date_part datepart
    date_diff datediff date_add date_sub strftime strptime now epoch epoch_ms make_date make_timestamp year
    month day hour minute second week quarter dayofweek string_agg listagg group_concat array_agg list_agg
    first last any_value arg_min arg_max argmin argmax min_by max_by row_number rank dense_rank
    percent_rank cume_dist lag lead ntile first_value last_value nth_value percentile_cont percentile_disc
    quantile quantile_cont median mode stddev stddev_pop stddev_samp variance var_pop var_samp corr
    bool_and bool_or split_part string_split starts_with ends_with contains prefix suffix md5 sha1 sha256
    hash uuid gen_random_uuid random strlen left right lpad rpad ltrim rtrim reverse format printf
    json_extract json_extract_string json_value to_json json struct_pack list_value array_length
    list_contains list_extract array_extract age exp ln log log10 log2 power pow sqrt mod sign trunc typeof
    try to_timestamp current_timestamp current_date greatest_common_divisor hash instr strpos translate
    repeat_string bit_length octet_length ascii chr unicode to_base64 from_base64 encode decode
"""
_NEVER_TABLE = frozenset(_NEVER_TABLE_WORDS.split())

# `name(` and `"name"(`, found on the reversed text: a pattern that starts with `(` is searched for that
# character first, ten times faster than one that starts with a name. Where the text holds a comment, a
# forward scan also finds a comment between the name and the `(`.
_REVERSED_CALL = re.compile(r'\(\s*+([\w$]++|"(?:[^"]|"")++")')
_COMMENTED_CALL = re.compile(
    r'(?:"((?:[^"]|"")++)"|\b([^\W\d][\w$]*+))(?:\s++|/\*.*?\*/|--[^\n]*+)*+\(',
    re.S,
)


# the system catalog's views a query can name without parentheses or a schema (DuckDB 1.5): they list every
# attached database, its tables and settings. information_schema's views need their schema, caught as such.
_CATALOG_VIEW_WORDS = """
    duckdb_columns duckdb_constraints duckdb_databases duckdb_indexes duckdb_logs duckdb_schemas duckdb_tables
    duckdb_types duckdb_views pragma_database_list sqlite_master sqlite_schema sqlite_temp_master
    sqlite_temp_schema pg_am pg_attrdef pg_attribute pg_class pg_collation pg_constraint pg_database pg_depend
    pg_description pg_enum pg_index pg_indexes pg_namespace pg_prepared_statements pg_proc pg_sequence
    pg_sequences pg_settings pg_tables pg_tablespace pg_type pg_views
"""
CATALOG_VIEWS = frozenset(_CATALOG_VIEW_WORDS.split())
_CATALOG_HINTS = (*CATALOG_VIEWS, "information_schema")
_CATALOG_STEMS = ("duckdb_", "pragma_", "sqlite_", "pg_", "information_schema")  # each hint starts so


@dataclass(frozen=True)
class OutsideRead:
    """One read of something that is not an input: what it is, and where it starts in the SQL."""

    what: str  # "table function read_csv()", "table pg.public.orders"
    offset: int | None  # 0-based character offset in the SQL, when DuckDB gives one
    view: str | None = None  # the catalog view's name, when the read is one


def _calls(sql: str) -> Iterator[tuple[str, int]]:
    """(lower-cased name, offset) of every `name(` in the text that is not a keyword or a known scalar."""
    if "/*" in sql or "--" in sql:
        matches = [(m.group(1) or m.group(2), m.start()) for m in _COMMENTED_CALL.finditer(sql)]
    else:
        end = len(sql)
        matches = [(m.group(1)[::-1].strip('"'), end - m.end(1)) for m in _REVERSED_CALL.finditer(sql[::-1])]
    for name, at in matches:
        lowered = name.replace('""', '"').lower()
        if lowered not in _NEVER_TABLE:
            yield lowered, at


def may_read_outside(sql: str) -> bool:
    """Whether the SQL calls anything that might be a table function or names a catalog view (else it
    certainly does neither)."""
    if next(_calls(sql), None) is not None:
        return True
    lowered = sql.lower()
    return any(stem in lowered for stem in _CATALOG_STEMS) and any(hint in lowered for hint in _CATALOG_HINTS)


def outside_reads(con: duckdb.DuckDBPyConnection, sql: str, prescan: bool = True) -> list[OutsideRead]:
    """Every table function (but the computing ones) and every table of another catalog or schema the
    query reads, in the order DuckDB's parse tree holds them. SQL that does not parse reads nothing here:
    the binder reports it. `prescan`: skip the parse when the text scan finds no call (tier 4)."""
    if prescan and not may_read_outside(sql):
        return []
    row = con.execute("SELECT json_serialize_sql(?::VARCHAR)", [sql]).fetchone()
    tree = json.loads(str(row[0])) if row else {}
    if not isinstance(tree, dict):
        return []
    if tree.get("error"):
        # a PIVOT is several statements that DuckDB will not serialize: judge its calls by name
        return _named_table_functions(con, sql) if tree.get("error_type") == "not implemented" else []
    nodes = list(_nodes(tree))
    found = [read for read in map(_read_of, nodes) if read is not None]
    if any(read.view for read in found):  # a CTE of that name is no catalog view (a table can't be: PZ0238)
        ctes = _cte_names(nodes)
        found = [read for read in found if read.view is None or read.view.lower() not in ctes]
    return [_at_char(sql, read) for read in found]


def bare_tables(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple[str, int | None]] | None:
    """(name, character offset) of every table the query names in its own database (no catalog, schema
    `main` or none) that no CTE of the query names: relations it reads besides what ref() and source()
    render (the caller knows those). None: the SQL does not parse or serialize (anything may be read)."""
    row = con.execute("SELECT json_serialize_sql(?::VARCHAR)", [sql]).fetchone()
    tree = json.loads(str(row[0])) if row else {}
    if not isinstance(tree, dict) or tree.get("error"):
        return None
    nodes = list(_nodes(tree))
    ctes = _cte_names(nodes)
    found: list[tuple[str, int | None]] = []
    for node in nodes:
        if node.get("type") != "BASE_TABLE" or node.get("catalog_name"):
            continue
        name = str(node.get("table_name", ""))
        if str(node.get("schema_name") or "") in ("", "main") and name.lower() not in ctes:
            at = _at_char(sql, OutsideRead(name, _location(node))).offset
            found.append((name, at))
    return found


def _cte_names(nodes: list[JsonObject]) -> set[str]:
    return {
        str(entry.get("key", "")).lower()
        for node in nodes
        if isinstance(node.get("cte_map"), dict)
        for entry in node["cte_map"].get("map", [])
        if isinstance(entry, dict)
    }


def _named_table_functions(con: duckdb.DuckDBPyConnection, sql: str) -> list[OutsideRead]:
    """The table functions and catalog views a query that DuckDB will not serialize names, by name."""
    lowered = sql.lower()
    views = [
        OutsideRead(f"the catalog view {view}", match.start())
        for view in sorted(CATALOG_VIEWS)
        if view in lowered and (match := re.search(rf"\b{view}\b", lowered))
    ]
    calls = list(_calls(sql))
    names = sorted({name for name, _ in calls} - ALLOWED_TABLE_FUNCTIONS)
    rows = con.execute(
        "SELECT DISTINCT lower(function_name) FROM duckdb_functions() "
        "WHERE function_type IN ('table', 'table_macro') AND lower(function_name) IN (SELECT unnest(?))",
        [names],
    ).fetchall()
    tables = {str(r[0]) for r in rows}
    return [OutsideRead(f"table function {name}()", at) for name, at in calls if name in tables] + views


def refused_statement(statement_type: str) -> str | None:
    """The word for a statement a pipeline may not run (ATTACH, COPY, …), or None."""
    return REFUSED_STATEMENTS.get(statement_type)


def _nodes(value: Any) -> Iterator[JsonObject]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def _read_of(node: JsonObject) -> OutsideRead | None:
    kind = node.get("type")
    if kind == "TABLE_FUNCTION":
        function = node.get("function") or {}
        name = str(function.get("function_name", "")).lower()
        if name in ALLOWED_TABLE_FUNCTIONS and not function.get("schema") and not function.get("catalog"):
            return None
        return OutsideRead(f"table function {name}()", _location(node))
    if kind == "BASE_TABLE":
        catalog, schema = str(node.get("catalog_name") or ""), str(node.get("schema_name") or "")
        name = str(node.get("table_name", ""))
        if not catalog and schema in ("", "main", "pg_catalog") and name.lower() in CATALOG_VIEWS:
            return OutsideRead(f"the catalog view {name}", _location(node), name)
        if catalog or schema not in ("", "main"):
            qualified = ".".join(p for p in (catalog, schema, name) if p)
            return OutsideRead(f"table {qualified} of another database or schema", _location(node))
    return None


def _location(node: JsonObject) -> int | None:
    location = node.get("query_location")
    return location if isinstance(location, int) and 0 <= location < 2**32 else None


def _at_char(sql: str, read: OutsideRead) -> OutsideRead:
    """DuckDB's locations count UTF-8 bytes; messages count characters."""
    if read.offset is None or sql.isascii():
        return read
    prefix = sql.encode("utf-8")[: read.offset].decode("utf-8", errors="ignore")
    return OutsideRead(read.what, len(prefix), read.view)


def line_col(sql: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a character offset."""
    before = sql[:offset]
    line = before.count("\n") + 1
    return line, offset - (before.rfind("\n") + 1) + 1
