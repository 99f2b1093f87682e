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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pipelinez.compile.templating import REF_TOKEN_RE, WATERMARK_TOKEN_RE
from pipelinez.core import duck_connect
from pipelinez.core.json_types import JsonObject

if TYPE_CHECKING:
    import duckdb

Json = JsonObject


class Cause(StrEnum):
    """Why a watermark() call is not a recognised lower-bound comparison (PZ0224): one per article bullet,
    plus the shapes the analysis cannot follow."""

    UPPER_BOUND = "upper_bound"
    EQUALITY = "equality"
    CURSOR_EXPRESSION = "cursor_expression"
    VALUE_COLUMN = "value_column"
    OUTSIDE_COMPARISON = "outside_comparison"
    NOT_A_FILTER = "not_a_filter"
    UNQUALIFIED = "unqualified"
    WRONG_DATASET = "wrong_dataset"
    NOT_SOURCED = "not_sourced"  # decided by the caller, which knows the pipeline's source() calls
    UNTRACEABLE = "untraceable"


@dataclass(frozen=True)
class Recognized:
    cursor: str  # the column as the base table's read names it
    inclusive: bool  # >=
    # the value side's parse tree (holding the placeholder): the read's lower bound is what it evaluates to
    value: Json | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Unrecognized:
    cause: Cause
    detail: str  # words for the message, e.g. "compares o.updated_at < watermark()"


Outcome = Recognized | Unrecognized


@dataclass
class PipelineAnalysis:
    """The outcome of every watermark() call (by its index) and the reads no recognised filter reaches."""

    calls: dict[int, list[Outcome]] = field(default_factory=dict)  # one outcome per place the call appears
    unfiltered: set[tuple[str, str]] = field(default_factory=set)  # read somewhere no filter reaches
    filtered: set[tuple[str, str]] = field(default_factory=set)  # read somewhere under a recognised filter
    gave_up: str = ""  # why the analysis stopped (every call is then unrecognised)

    def recognized(self, index: int) -> list[Recognized]:
        """Every place call `index` is a recognised lower bound (a Jinja variable may print it twice)."""
        return [o for o in self.calls.get(index, []) if isinstance(o, Recognized)]

    def outcome(self, index: int) -> Outcome:
        """One outcome per call: its first problem, else its first recognition; a call that appears nowhere
        in the query (a comment, a string, a Jinja variable never printed) is outside any comparison."""
        if self.gave_up:
            return Unrecognized(Cause.UNTRACEABLE, self.gave_up)
        found = self.calls.get(index, [])
        problems = [o for o in found if isinstance(o, Unrecognized)]
        if problems:
            return problems[0]
        if found:
            return found[0]
        return Unrecognized(Cause.OUTSIDE_COMPARISON, "does not appear in the query (a comment or a string?)")


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
    walker = _Walker({k.lower(): v for k, v in staging.items()}, dict(targets))
    try:
        walker.query(tree.get("node"), _Env())
        walker.finish()
    except RecursionError:  # nested deeper than Python follows: refuse every call, filter nothing
        walker.give_up("is nested too deeply for pz to analyse")
    return walker.result


# ----------------------------------------------------------------------------------------------------------
# the tree walk


_LOWER = {"COMPARE_GREATERTHAN": False, "COMPARE_GREATERTHANOREQUALTO": True}
_MIRRORED = {"COMPARE_LESSTHAN": False, "COMPARE_LESSTHANOREQUALTO": True}  # wm < cursor == cursor > wm
_OPS = {
    "COMPARE_GREATERTHAN": ">",
    "COMPARE_GREATERTHANOREQUALTO": ">=",
    "COMPARE_LESSTHAN": "<",
    "COMPARE_LESSTHANOREQUALTO": "<=",
    "COMPARE_EQUAL": "=",
    "COMPARE_NOTEQUAL": "!=",
    "COMPARE_DISTINCT_FROM": "IS DISTINCT FROM",
    "COMPARE_NOT_DISTINCT_FROM": "IS NOT DISTINCT FROM",
}
_QUERY_NODES = {"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"}


def token_index(expr: Any) -> int | None:
    if isinstance(expr, dict) and expr.get("class") == "COLUMN_REF":
        names = expr.get("column_names") or []
        if len(names) == 1 and isinstance(names[0], str):
            match = WATERMARK_TOKEN_RE.fullmatch(names[0])
            if match:
                return int(match.group(1))
    return None


def _children(obj: Any) -> Iterator[Any]:
    if isinstance(obj, dict):
        yield from obj.values()
    elif isinstance(obj, list):
        yield from obj


def _is_query_node(obj: Any) -> bool:
    kind = obj.get("type") if isinstance(obj, dict) else None
    return isinstance(kind, str) and kind in _QUERY_NODES and "cte_map" in obj


@dataclass
class _Cte:
    name: str
    node: Any  # the CTE's query node
    env: _Env  # the CTEs visible inside its body
    renamed: bool  # `name(a, b) AS (...)`: columns renamed by position
    uses: int = 0


class _Env:
    """The CTEs in scope, innermost first."""

    def __init__(self, ctes: dict[str, _Cte] | None = None, parent: _Env | None = None):
        self.ctes = ctes or {}
        self.parent = parent

    def find(self, name: str) -> _Cte | None:
        env: _Env | None = self
        while env is not None:
            if name in env.ctes:
                return env.ctes[name]
            env = env.parent
        return None


@dataclass
class _Binding:
    """One table of a query block's FROM clause, by the name its columns are qualified with."""

    alias: str
    kind: str  # staging | cte | subquery | other
    ref: Json  # the table reference
    dataset: tuple[str, str] | None = None
    cte: _Cte | None = None
    what: str = ""  # how to name it in a message


@dataclass
class _Block:
    bindings: list[_Binding]
    env: _Env


@dataclass(frozen=True)
class _Trace:
    """Where a cursor column comes from: a read of a staging table, through these CTEs."""

    ref: Json
    dataset: tuple[str, str]
    column: str
    ctes: tuple[_Cte, ...]


class _Failure(Exception):
    def __init__(self, cause: Cause, detail: str):
        super().__init__(detail)
        self.cause, self.detail = cause, detail


class _Walker:
    def __init__(self, staging: dict[str, tuple[str, str]], targets: dict[int, tuple[str, str]]):
        self.staging = staging
        self.targets = targets
        self.result = PipelineAnalysis()
        self.blocks: dict[int, _Block] = {}
        self.reads: dict[int, tuple[str, str]] = {}  # every staging-table read, by id of its reference
        self.pending: list[tuple[_Trace, int, Recognized]] = []  # filters, checked once CTE uses are counted
        self.seen_tokens: set[int] = set()  # ids of placeholder column refs given an outcome

    # -- outcomes ------------------------------------------------------------------------------------------
    def _record(self, expr: Json, outcome: Outcome) -> None:
        index = token_index(expr)
        if index is None or id(expr) in self.seen_tokens:
            return
        self.seen_tokens.add(id(expr))
        self.result.calls.setdefault(index, []).append(outcome)

    def _record_all(self, expr: Any, outcome: Outcome) -> None:
        for token in _tokens(expr, into_subqueries=False):
            self._record(token, outcome)

    def give_up(self, detail: str) -> None:
        self.result.unfiltered |= set(self.staging.values())
        self.result.filtered.clear()
        self.result.gave_up = detail

    def finish(self) -> None:
        filtered: set[int] = set()
        for trace, _index, _outcome in self.pending:
            if all(cte.uses == 1 for cte in trace.ctes):
                filtered.add(id(trace.ref))
                self.result.filtered.add(trace.dataset)
        for ref_id, dataset in self.reads.items():
            if ref_id not in filtered:
                self.result.unfiltered.add(dataset)

    # -- query nodes ---------------------------------------------------------------------------------------
    def query(self, node: Any, env: _Env) -> None:
        if not isinstance(node, dict):
            return
        kind = node.get("type")
        env = self._with_ctes(node, env)
        if kind == "SELECT_NODE":
            self._select(node, env)
        elif kind in ("SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"):
            for key in ("left", "right", "query", "child"):
                if key in node:
                    self.query(node[key], env)
            for child in node.get("children") or []:
                self.query(child, env)
            self._expressions(node.get("modifiers"), env)
        else:
            self._unknown(node, env)

    def _with_ctes(self, node: Json, env: _Env) -> _Env:
        entries = (node.get("cte_map") or {}).get("map") or []
        if not entries:
            return env
        inner = _Env({}, env)
        for entry in entries:
            name = str(entry.get("key", "")).lower()
            value = entry.get("value") or {}
            body = (value.get("query") or {}).get("node")
            cte = _Cte(name, body, inner, bool(value.get("aliases")))
            inner.ctes[name] = cte  # visible to the CTEs after it, and to itself when recursive
        for cte in list(inner.ctes.values()):
            self.query(cte.node, cte.env)
        return inner

    def _select(self, node: Json, env: _Env) -> None:
        block = self._block(node, env)
        self._from(node.get("from_table"), block)
        self._filter(node.get("where_clause"), block)
        for key in ("select_list", "group_expressions", "having", "qualify", "modifiers", "sample"):
            self._expressions(node.get(key), env)

    def _block(self, node: Json, env: _Env) -> _Block:
        block = self.blocks.get(id(node))
        if block is None:
            block = _Block([], env)
            self._bind(node.get("from_table"), block)
            self.blocks[id(node)] = block
        return block

    def _bind(self, ref: Any, block: _Block) -> None:
        """The FROM clause's tables as bindings; counts CTE uses, records staging reads."""
        if not isinstance(ref, dict):
            return
        kind = ref.get("type")
        alias = str(ref.get("alias") or "").lower()
        if kind == "JOIN":
            self._bind(ref.get("left"), block)
            self._bind(ref.get("right"), block)
        elif kind == "BASE_TABLE":
            name = str(ref.get("table_name") or "").lower()
            qualified = bool(ref.get("schema_name") or ref.get("catalog_name"))
            cte = None if qualified else block.env.find(name)
            if cte is not None:
                cte.uses += 1
                block.bindings.append(_Binding(alias or name, "cte", ref, cte=cte, what=f"CTE '{name}'"))
            elif name in self.staging and not ref.get("catalog_name"):
                self.reads[id(ref)] = self.staging[name]
                dataset = self.staging[name]
                words = f"source('{dataset[0]}', '{dataset[1]}')"
                block.bindings.append(_Binding(alias or name, "staging", ref, dataset, what=words))
            else:
                words = _table_words(str(ref.get("table_name") or ""))
                block.bindings.append(_Binding(alias or name, "other", ref, what=words))
        elif kind == "SUBQUERY":
            block.bindings.append(_Binding(alias, "subquery", ref, what="a subquery"))
        elif kind == "EMPTY":
            return
        else:
            kinds = {"TABLE_FUNCTION": "a table function", "EXPRESSION_LIST": "a VALUES list"}
            block.bindings.append(_Binding(alias, "other", ref, what=kinds.get(str(kind), f"a {kind} table")))

    def _from(self, ref: Any, block: _Block) -> None:
        """Walk the FROM clause: subqueries, join conditions (inner joins filter), table function args."""
        if not isinstance(ref, dict):
            return
        kind = ref.get("type")
        if kind == "JOIN":
            self._from(ref.get("left"), block)
            self._from(ref.get("right"), block)
            condition = ref.get("condition")
            if ref.get("join_type") == "INNER" and ref.get("ref_type") == "REGULAR":
                self._filter(condition, block)
            else:
                self._expressions(condition, block.env)
        elif kind == "SUBQUERY":
            self.query((ref.get("subquery") or {}).get("node"), block.env)
        elif kind in ("BASE_TABLE", "EMPTY"):
            return
        else:
            self._unknown(ref, block.env)  # table functions, VALUES, PIVOT: their queries and placeholders

    def _unknown(self, obj: Any, env: _Env) -> None:
        """A shape the analysis does not follow: its nested queries are analysed on their own, its reads
        stay unfiltered and its placeholders unrecognised (they fall to 'outside a comparison')."""
        if _is_query_node(obj):
            self.query(obj, env)
            return
        if isinstance(obj, dict) and obj.get("type") == "BASE_TABLE":
            name = str(obj.get("table_name") or "").lower()
            cte = env.find(name)
            if cte is not None:
                cte.uses += 1
            elif name in self.staging:
                self.reads[id(obj)] = self.staging[name]
            return
        if isinstance(obj, dict) and obj.get("class") == "SUBQUERY":
            self.query((obj.get("subquery") or {}).get("node"), env)
            return
        for child in _children(obj):
            self._unknown(child, env)

    # -- expressions ---------------------------------------------------------------------------------------
    def _filter(self, expr: Any, block: _Block) -> None:
        """An expression whose AND-ed terms filter the block's rows."""
        if not isinstance(expr, dict):
            return
        if expr.get("class") == "CONJUNCTION" and expr.get("type") == "CONJUNCTION_AND":
            for child in expr.get("children") or []:
                self._filter(child, block)
            return
        if expr.get("class") == "COMPARISON":
            self._comparison(expr, block, filtering=True)
        self._expressions(expr, block.env)

    def _expressions(self, expr: Any, env: _Env) -> None:
        """Any expression: placeholders met here are not in a recognised place; subqueries are analysed."""
        if isinstance(expr, list):
            for child in expr:
                self._expressions(child, env)
            return
        if not isinstance(expr, dict):
            return
        cls = expr.get("class")
        if cls == "SUBQUERY":
            self.query((expr.get("subquery") or {}).get("node"), env)
            self._expressions(expr.get("child"), env)
            return
        if _is_query_node(expr):
            self.query(expr, env)
            return
        if cls == "COMPARISON":
            self._comparison(expr, None, filtering=False)
        elif cls == "BETWEEN":
            self._record_all(
                expr, Unrecognized(Cause.EQUALITY, "is in a BETWEEN; only > and >= declare a lower bound")
            )
        elif cls == "OPERATOR" and expr.get("type") in ("COMPARE_IN", "COMPARE_NOT_IN"):
            outcome = Unrecognized(Cause.EQUALITY, "is in an IN list; only > and >= are recognised")
            self._record_all(expr, outcome)
        elif token_index(expr) is not None:
            self._record(expr, Unrecognized(Cause.OUTSIDE_COMPARISON, "is not inside a comparison"))
            return
        for child in _children(expr):
            if isinstance(child, dict | list):
                self._expressions(child, env)

    def _comparison(self, expr: Json, block: _Block | None, *, filtering: bool) -> None:
        left, right = expr.get("left"), expr.get("right")
        in_left = list(_tokens(left, into_subqueries=False))
        in_right = list(_tokens(right, into_subqueries=False))
        if not in_left and not in_right:
            return
        kind = str(expr.get("type"))
        op = _OPS.get(kind, kind)
        if in_left and in_right:
            outcome = Unrecognized(Cause.VALUE_COLUMN, "appears on both sides of one comparison")
            self._record_all(expr, outcome)
            return
        value, cursor = (right, left) if in_right else (left, right)
        written = f"{_shown(left)} {op} {_shown(right)}"
        if in_right and kind in _LOWER:
            inclusive = _LOWER[kind]
        elif in_left and kind in _MIRRORED:
            inclusive = _MIRRORED[kind]
        elif kind in _LOWER or kind in _MIRRORED:
            self._record_all(value, Unrecognized(Cause.UPPER_BOUND, f"is an upper bound ({written})"))
            return
        else:
            cause = Cause.EQUALITY if kind in _OPS else Cause.OUTSIDE_COMPARISON
            self._record_all(value, Unrecognized(cause, f"is compared with {op} ({written})"))
            return
        found = self._lower_bound(value, cursor, block, written, inclusive, filtering)
        if isinstance(found, Unrecognized):
            self._record_all(value, found)
            return
        trace, recognized = found
        for token in _tokens(value, into_subqueries=False):
            index = token_index(token)
            target = self.targets.get(index) if index is not None else None
            if index is None or target is None:
                continue
            if target != trace.dataset:
                self._record(
                    token,
                    Unrecognized(
                        Cause.WRONG_DATASET,
                        f"compares '{_shown(cursor)}', which traces to source('{trace.dataset[0]}', "
                        f"'{trace.dataset[1]}'), not to the dataset the call names",
                    ),
                )
                continue
            self.pending.append((trace, index, recognized))
            self._record(token, recognized)

    def _lower_bound(
        self, value: Any, cursor: Any, block: _Block | None, written: str, inclusive: bool, filtering: bool
    ) -> Unrecognized | tuple[_Trace, Recognized]:
        if not (isinstance(cursor, dict) and cursor.get("class") == "COLUMN_REF"):
            return Unrecognized(
                Cause.CURSOR_EXPRESSION, f"has a function or expression on the cursor side ({written})"
            )
        if _columns_in(value) or _has_subquery(value):
            return Unrecognized(
                Cause.VALUE_COLUMN, f"has a column or a subquery on its value side ({written})"
            )
        if not filtering or block is None:
            return Unrecognized(
                Cause.NOT_A_FILTER,
                f"is in a comparison that does not filter rows ({written}): it must be AND-ed into a WHERE "
                "clause or an inner JOIN's ON condition",
            )
        try:
            trace = self._trace(cursor, block, ())
        except _Failure as exc:
            return Unrecognized(exc.cause, exc.detail)
        return trace, Recognized(trace.column, inclusive, value)

    # -- tracing a cursor to its base table ----------------------------------------------------------------
    def _trace(self, column: Json, block: _Block, ctes: tuple[_Cte, ...]) -> _Trace:
        names = [str(n) for n in column.get("column_names") or []]
        shown = ".".join(names)
        if len(names) == 1:
            if len(block.bindings) != 1:
                tables = ", ".join(b.alias or b.what for b in block.bindings) or "none"
                raise _Failure(
                    Cause.UNQUALIFIED,
                    f"compares the unqualified cursor '{shown}' in a query that reads several tables "
                    f"({tables}); qualify it with its table's alias",
                )
            return self._resolve(block.bindings[0], names[0], ctes)
        if len(names) == 2:
            alias = names[0].lower()
            for binding in block.bindings:
                if binding.alias == alias:
                    return self._resolve(binding, names[1], ctes)
            raise _Failure(
                Cause.UNTRACEABLE, f"compares '{shown}', but '{names[0]}' names no table of its query"
            )
        raise _Failure(Cause.CURSOR_EXPRESSION, f"compares '{shown}', which is not a plain column of a table")

    def _resolve(self, binding: _Binding, column: str, ctes: tuple[_Cte, ...]) -> _Trace:
        if binding.ref.get("column_name_alias"):
            raise _Failure(
                Cause.UNTRACEABLE,
                f"compares '{column}' of {binding.what}, whose columns are renamed by an alias list",
            )
        if binding.kind == "staging" and binding.dataset is not None:
            return _Trace(binding.ref, binding.dataset, column, ctes)
        if binding.kind == "cte" and binding.cte is not None:
            cte = binding.cte
            if cte.renamed:
                raise _Failure(
                    Cause.UNTRACEABLE, f"compares '{column}' of CTE '{cte.name}', whose columns are renamed"
                )
            if cte in ctes:
                raise _Failure(Cause.UNTRACEABLE, f"compares '{column}' of recursive CTE '{cte.name}'")
            return self._column_of(cte.node, cte.env, column, (*ctes, cte), f"CTE '{cte.name}'")
        if binding.kind == "subquery":
            node = (binding.ref.get("subquery") or {}).get("node")
            return self._column_of(node, _Env(), column, ctes, "a subquery", binding)
        raise _Failure(
            Cause.WRONG_DATASET, f"compares '{column}' of {binding.what}, not of the dataset the call names"
        )

    def _column_of(
        self,
        node: Any,
        env: _Env,
        column: str,
        ctes: tuple[_Cte, ...],
        what: str,
        binding: _Binding | None = None,
    ) -> _Trace:
        """Trace output column `column` of a query node to its base table."""
        if not isinstance(node, dict) or node.get("type") != "SELECT_NODE":
            kind = node.get("type") if isinstance(node, dict) else None
            words = "a UNION/INTERSECT/EXCEPT" if kind == "SET_OPERATION_NODE" else f"a {kind or 'query'}"
            raise _Failure(
                Cause.UNQUALIFIED if kind == "SET_OPERATION_NODE" else Cause.UNTRACEABLE,
                f"compares '{column}' of {what}, which is {words}: it may come from several tables",
            )
        block = self.blocks.get(id(node))
        if block is None:  # a subquery's block is built when it is walked, which happens first
            raise _Failure(Cause.UNTRACEABLE, f"compares '{column}' of {what}, which pz could not follow")
        wanted = column.lower()
        stars: list[Json] = []
        for item in node.get("select_list") or []:
            if not isinstance(item, dict):
                continue
            if item.get("class") == "STAR":
                stars.append(item)
                continue
            alias = str(item.get("alias") or "")
            names = item.get("column_names") or [] if item.get("class") == "COLUMN_REF" else []
            name = alias or (str(names[-1]) if names else "")
            if name.lower() != wanted:
                continue
            if item.get("class") != "COLUMN_REF" or token_index(item) is not None:
                raise _Failure(
                    Cause.CURSOR_EXPRESSION,
                    f"compares '{column}' of {what}, which computes it ({_shown(item)}) rather than "
                    "passing a column through",
                )
            return self._trace(item, block, ctes)
        for star in stars:
            if star.get("columns") or star.get("expr"):
                continue  # COLUMNS(...): computed
            relation = str(star.get("relation_name") or "").lower()
            excluded = {_last(e).lower() for e in star.get("exclude_list") or []}
            excluded |= {_last(e).lower() for e in star.get("qualified_exclude_list") or []}
            if wanted in excluded:
                continue
            replaced = {_last(r.get("key")).lower() for r in _map_entries(star.get("replace_list"))}
            renamed = _map_entries(star.get("rename_list"))
            if wanted in replaced or wanted in {_last(r.get("value")).lower() for r in renamed}:
                raise _Failure(
                    Cause.CURSOR_EXPRESSION, f"compares '{column}' of {what}, which replaces or renames it"
                )
            if wanted in {_last(r.get("key")).lower() for r in renamed}:
                continue  # renamed away: not selected under this name
            if relation:
                for b in block.bindings:
                    if b.alias == relation:
                        return self._resolve(b, column, ctes)
                continue
            if len(block.bindings) == 1:
                return self._resolve(block.bindings[0], column, ctes)
            raise _Failure(
                Cause.UNQUALIFIED,
                f"compares '{column}' of {what}, whose SELECT * reads several tables; select the cursor "
                "by its table's alias, or filter inside",
            )
        raise _Failure(Cause.UNTRACEABLE, f"compares '{column}', which {what} does not select")


def _tokens(expr: Any, *, into_subqueries: bool) -> Iterator[Json]:
    """Placeholder column refs in an expression (not inside subqueries unless asked)."""
    stack = [expr]
    while stack:
        obj = stack.pop()
        if isinstance(obj, dict):
            if token_index(obj) is not None:
                yield obj
                continue
            if not into_subqueries and (obj.get("class") == "SUBQUERY" or _is_query_node(obj)):
                continue
            stack.extend(reversed(list(_children(obj))))
        elif isinstance(obj, list):
            stack.extend(reversed(obj))


def _columns_in(expr: Any) -> bool:
    """A column reference other than a placeholder, anywhere (lambdas' parameters count: refused too)."""
    stack = [expr]
    while stack:
        obj = stack.pop()
        if isinstance(obj, dict):
            if obj.get("class") == "COLUMN_REF" and token_index(obj) is None:
                return True
            stack.extend(_children(obj))
        elif isinstance(obj, list):
            stack.extend(obj)
    return False


def _has_subquery(expr: Any) -> bool:
    stack = [expr]
    while stack:
        obj = stack.pop()
        if isinstance(obj, dict):
            if obj.get("class") == "SUBQUERY" or _is_query_node(obj):
                return True
            stack.extend(_children(obj))
        elif isinstance(obj, list):
            stack.extend(obj)
    return False


def _map_entries(value: Any) -> list[Json]:
    if isinstance(value, dict):
        value = value.get("map") or list(value.items())
    return [e if isinstance(e, dict) else {"key": e[0], "value": e[1]} for e in value or [] if e]


def _last(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        if "column" in item:
            return str(item["column"])
        names = item.get("column_names") or [item.get("column_name", "")]
        return str(names[-1]) if names else ""
    if isinstance(item, list) and item:
        return str(item[-1])
    return str(item)


def _table_words(name: str) -> str:
    match = REF_TOKEN_RE.fullmatch(name)
    return f"ref('{match.group(1)}')" if match else f"table '{name}'"


def _shown(expr: Any) -> str:
    """A short rendering of an expression for messages (placeholders shown as watermark())."""
    if not isinstance(expr, dict):
        return "?"
    if token_index(expr) is not None:
        return "watermark()"
    cls = expr.get("class")
    if cls == "COLUMN_REF":
        return ".".join(str(n) for n in expr.get("column_names") or [])
    if cls == "CONSTANT":
        value = (expr.get("value") or {}).get("value")
        return repr(value) if isinstance(value, str) else str(value)
    if cls == "FUNCTION":
        name = str(expr.get("function_name"))
        args = [_shown(c) for c in expr.get("children") or []]
        if expr.get("is_operator") or not name.isidentifier():
            return f" {name} ".join(args) if len(args) == 2 else f"{name}{''.join(args)}"
        return f"{name}({', '.join(args)})"
    if cls == "CAST":
        return f"CAST({_shown(expr.get('child'))} AS …)"
    has_token = any(True for _ in _tokens(expr, into_subqueries=False))
    return "… watermark() …" if has_token else "an expression"
