"""SQL-route inference: which watermark() calls of a pipeline are recognised lower-bound filters, and on
which cursor column of which source() table. Works on DuckDB's own parse tree (`json_serialize_sql`), never
on the SQL text.

Each watermark() call renders as a placeholder column (`__pz_wm_<i>__`), so in the tree it is a column
reference. A call is recognised when every place it appears is the value side of a comparison

    <cursor> >  <expression containing the placeholder>     (exclusive)
    <cursor> >= <expression containing the placeholder>     (inclusive)

or the mirrored `<expression> < <cursor>` / `<expression> <= <cursor>` (the same comparison written the other
way round), where

- the comparison is a row filter: ANDed into a WHERE clause or into the ON condition of an inner join;
- the cursor side is a bare column, qualified by a table alias or unqualified when its query block reads one
  table only;
- the value side holds no column and no subquery (constants, casts, functions, intervals are fine);
- the cursor column traces, through table aliases, CTEs and FROM-subqueries whose select lists pass it
  through unchanged, to a base table that is the staging table of the very dataset the call names.

The analysis also says which reads (base-table references) of each source() table a recognised comparison
filters, so a read the filter does not reach is found (PZ0226). A filter that reaches a read through a CTE
filters it only when that CTE is read exactly once. Anything the analysis does not understand is refused,
never accepted: an unknown node shape leaves its placeholders unrecognised and its reads unfiltered.
Every pass visits each node of the tree a bounded number of times, so the cost is linear in the query.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pipelinez.compile.watermark_outcomes import (
    Cause,
    Json,
    Outcome,
    PipelineAnalysis,
    Recognized,
    Unrecognized,
)
from pipelinez.compile.watermark_tree import Env, token_index
from pipelinez.compile.watermark_walk import Walker
from pipelinez.core import duck_connect

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "Cause",
    "Json",
    "Outcome",
    "PipelineAnalysis",
    "Recognized",
    "Unrecognized",
    "analyse",
    "parse_queries",
    "token_index",
]


def parse_queries(queries: Sequence[str], con: duckdb.DuckDBPyConnection | None = None) -> list[Json | None]:
    """DuckDB's parse tree of each query (one statement, a SELECT), or None when DuckDB cannot serialize it:
    a syntax error or not a single query, which tier 4 reports in its own words. All in one statement, on
    `con` or on a private in-memory connection."""
    if not queries:
        return []

    own = con is None
    use = duck_connect.connect() if con is None else con
    try:
        # one JSON text, not a Python list: binding a list converts (and type-sniffs) every element
        sql = """SELECT list_transform(from_json(?, '["VARCHAR"]'), q -> json_serialize_sql(q))"""
        texts = use.execute(sql, [json.dumps(list(queries))]).fetchone()
    finally:
        if own:
            use.close()
    out: list[Json | None] = []
    for text in texts[0] if texts else []:
        try:
            tree = json.loads(text)
        except (ValueError, RecursionError):
            out.append(None)
            continue
        statements = tree.get("statements") if isinstance(tree, dict) and not tree.get("error") else None
        out.append(statements[0] if isinstance(statements, list) and len(statements) == 1 else None)
    return out


def analyse(
    tree: Json, staging: Mapping[str, tuple[str, str]], targets: Mapping[int, tuple[str, str]]
) -> PipelineAnalysis:
    """Analyse one parsed pipeline query. `staging` maps each staging table the pipeline source()s (its
    name) to its (source, dataset); `targets` each watermark() call's index to the dataset it names."""
    walker = Walker({k.lower(): v for k, v in staging.items()}, dict(targets))
    try:
        walker.query(tree.get("node"), Env())
        walker.finish()
    except RecursionError:  # nested deeper than Python follows: refuse every call, filter nothing
        walker.give_up("is nested too deeply for pz to analyse")
    return walker.result
