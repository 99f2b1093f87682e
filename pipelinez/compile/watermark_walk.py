"""The tree walk of the SQL route's inference (see `watermark_sql` for what it recognises): one pass over a
pipeline query's parse tree that records each watermark() placeholder's outcome, binds each query block's
FROM clause, and traces a compared cursor column through aliases, CTEs and FROM-subqueries to the staging
table it reads."""

from __future__ import annotations

from typing import Any

from pipelinez.compile.watermark_outcomes import (
    Cause,
    Json,
    Outcome,
    PipelineAnalysis,
    Recognized,
    Unrecognized,
)
from pipelinez.compile.watermark_tree import (
    LOWER,
    MIRRORED,
    OPS,
    Binding,
    Block,
    Cte,
    CursorTrace,
    Env,
    TraceFailure,
    child_nodes,
    columns_in,
    has_subquery,
    is_query_node,
    last_name,
    map_entries,
    shown_sql,
    table_words,
    token_index,
    tokens,
)


class Walker:
    def __init__(self, staging: dict[str, tuple[str, str]], targets: dict[int, tuple[str, str]]):
        self.staging = staging
        self.targets = targets
        self.result = PipelineAnalysis()
        self.blocks: dict[int, Block] = {}
        self.reads: dict[int, tuple[str, str]] = {}  # every staging-table read, by id of its reference
        self.pending: list[
            tuple[CursorTrace, int, Recognized]
        ] = []  # filters, checked once CTE uses are counted
        self.seen_tokens: set[int] = set()  # ids of placeholder column refs given an outcome

    # -- outcomes ------------------------------------------------------------------------------------------
    def _record(self, expr: Json, outcome: Outcome) -> None:
        index = token_index(expr)
        if index is None or id(expr) in self.seen_tokens:
            return
        self.seen_tokens.add(id(expr))
        self.result.calls.setdefault(index, []).append(outcome)

    def _record_all(self, expr: Any, outcome: Outcome) -> None:
        for token in tokens(expr, into_subqueries=False):
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
    def query(self, node: Any, env: Env) -> None:
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

    def _with_ctes(self, node: Json, env: Env) -> Env:
        entries = (node.get("cte_map") or {}).get("map") or []
        if not entries:
            return env
        inner = Env({}, env)
        for entry in entries:
            name = str(entry.get("key", "")).lower()
            value = entry.get("value") or {}
            body = (value.get("query") or {}).get("node")
            cte = Cte(name, body, inner, bool(value.get("aliases")))
            inner.ctes[name] = cte  # visible to the CTEs after it, and to itself when recursive
        for cte in list(inner.ctes.values()):
            self.query(cte.node, cte.env)
        return inner

    def _select(self, node: Json, env: Env) -> None:
        block = self._block(node, env)
        self._from(node.get("from_table"), block)
        self._filter(node.get("where_clause"), block)
        for key in ("select_list", "group_expressions", "having", "qualify", "modifiers", "sample"):
            self._expressions(node.get(key), env)

    def _block(self, node: Json, env: Env) -> Block:
        block = self.blocks.get(id(node))
        if block is None:
            block = Block([], env)
            self._bind(node.get("from_table"), block)
            self.blocks[id(node)] = block
        return block

    def _bind(self, ref: Any, block: Block) -> None:
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
                block.bindings.append(Binding(alias or name, "cte", ref, cte=cte, what=f"CTE '{name}'"))
            elif name in self.staging and not ref.get("catalog_name"):
                self.reads[id(ref)] = self.staging[name]
                dataset = self.staging[name]
                words = f"source('{dataset[0]}', '{dataset[1]}')"
                block.bindings.append(Binding(alias or name, "staging", ref, dataset, what=words))
            else:
                words = table_words(str(ref.get("table_name") or ""))
                block.bindings.append(Binding(alias or name, "other", ref, what=words))
        elif kind == "SUBQUERY":
            block.bindings.append(Binding(alias, "subquery", ref, what="a subquery"))
        elif kind == "EMPTY":
            return
        else:
            kinds = {"TABLE_FUNCTION": "a table function", "EXPRESSION_LIST": "a VALUES list"}
            block.bindings.append(Binding(alias, "other", ref, what=kinds.get(str(kind), f"a {kind} table")))

    def _from(self, ref: Any, block: Block) -> None:
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

    def _unknown(self, obj: Any, env: Env) -> None:
        """A shape the analysis does not follow: its nested queries are analysed on their own, its reads
        stay unfiltered and its placeholders unrecognised (they fall to 'outside a comparison')."""
        if is_query_node(obj):
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
        for child in child_nodes(obj):
            self._unknown(child, env)

    # -- expressions ---------------------------------------------------------------------------------------
    def _filter(self, expr: Any, block: Block) -> None:
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

    def _expressions(self, expr: Any, env: Env) -> None:
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
        if is_query_node(expr):
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
        for child in child_nodes(expr):
            if isinstance(child, dict | list):
                self._expressions(child, env)

    def _comparison(self, expr: Json, block: Block | None, *, filtering: bool) -> None:
        left, right = expr.get("left"), expr.get("right")
        in_left = list(tokens(left, into_subqueries=False))
        in_right = list(tokens(right, into_subqueries=False))
        if not in_left and not in_right:
            return
        kind = str(expr.get("type"))
        op = OPS.get(kind, kind)
        if in_left and in_right:
            outcome = Unrecognized(Cause.VALUE_COLUMN, "appears on both sides of one comparison")
            self._record_all(expr, outcome)
            return
        value, cursor = (right, left) if in_right else (left, right)
        written = f"{shown_sql(left)} {op} {shown_sql(right)}"
        if in_right and kind in LOWER:
            inclusive = LOWER[kind]
        elif in_left and kind in MIRRORED:
            inclusive = MIRRORED[kind]
        elif kind in LOWER or kind in MIRRORED:
            self._record_all(value, Unrecognized(Cause.UPPER_BOUND, f"is an upper bound ({written})"))
            return
        else:
            cause = Cause.EQUALITY if kind in OPS else Cause.OUTSIDE_COMPARISON
            self._record_all(value, Unrecognized(cause, f"is compared with {op} ({written})"))
            return
        found = self._lower_bound(value, cursor, block, written, inclusive, filtering)
        if isinstance(found, Unrecognized):
            self._record_all(value, found)
            return
        trace, recognized = found
        for token in tokens(value, into_subqueries=False):
            index = token_index(token)
            target = self.targets.get(index) if index is not None else None
            if index is None or target is None:
                continue
            if target != trace.dataset:
                self._record(
                    token,
                    Unrecognized(
                        Cause.WRONG_DATASET,
                        f"compares '{shown_sql(cursor)}', which traces to source('{trace.dataset[0]}', "
                        f"'{trace.dataset[1]}'), not to the dataset the call names",
                    ),
                )
                continue
            self.pending.append((trace, index, recognized))
            self._record(token, recognized)

    def _lower_bound(
        self, value: Any, cursor: Any, block: Block | None, written: str, inclusive: bool, filtering: bool
    ) -> Unrecognized | tuple[CursorTrace, Recognized]:
        if not (isinstance(cursor, dict) and cursor.get("class") == "COLUMN_REF"):
            return Unrecognized(
                Cause.CURSOR_EXPRESSION, f"has a function or expression on the cursor side ({written})"
            )
        if columns_in(value) or has_subquery(value):
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
        except TraceFailure as exc:
            return Unrecognized(exc.cause, exc.detail)
        return trace, Recognized(trace.column, inclusive, value)

    # -- tracing a cursor to its base table ----------------------------------------------------------------
    def _trace(self, column: Json, block: Block, ctes: tuple[Cte, ...]) -> CursorTrace:
        names = [str(n) for n in column.get("column_names") or []]
        shown = ".".join(names)
        if len(names) == 1:
            if len(block.bindings) != 1:
                tables = ", ".join(b.alias or b.what for b in block.bindings) or "none"
                raise TraceFailure(
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
            raise TraceFailure(
                Cause.UNTRACEABLE, f"compares '{shown}', but '{names[0]}' names no table of its query"
            )
        raise TraceFailure(
            Cause.CURSOR_EXPRESSION, f"compares '{shown}', which is not a plain column of a table"
        )

    def _resolve(self, binding: Binding, column: str, ctes: tuple[Cte, ...]) -> CursorTrace:
        if binding.ref.get("column_name_alias"):
            raise TraceFailure(
                Cause.UNTRACEABLE,
                f"compares '{column}' of {binding.what}, whose columns are renamed by an alias list",
            )
        if binding.kind == "staging" and binding.dataset is not None:
            return CursorTrace(binding.ref, binding.dataset, column, ctes)
        if binding.kind == "cte" and binding.cte is not None:
            cte = binding.cte
            if cte.renamed:
                raise TraceFailure(
                    Cause.UNTRACEABLE, f"compares '{column}' of CTE '{cte.name}', whose columns are renamed"
                )
            if cte in ctes:
                raise TraceFailure(Cause.UNTRACEABLE, f"compares '{column}' of recursive CTE '{cte.name}'")
            return self._column_of(cte.node, cte.env, column, (*ctes, cte), f"CTE '{cte.name}'")
        if binding.kind == "subquery":
            node = (binding.ref.get("subquery") or {}).get("node")
            return self._column_of(node, Env(), column, ctes, "a subquery", binding)
        raise TraceFailure(
            Cause.WRONG_DATASET, f"compares '{column}' of {binding.what}, not of the dataset the call names"
        )

    def _column_of(
        self,
        node: Any,
        env: Env,
        column: str,
        ctes: tuple[Cte, ...],
        what: str,
        binding: Binding | None = None,
    ) -> CursorTrace:
        """Trace output column `column` of a query node to its base table."""
        if not isinstance(node, dict) or node.get("type") != "SELECT_NODE":
            kind = node.get("type") if isinstance(node, dict) else None
            words = "a UNION/INTERSECT/EXCEPT" if kind == "SET_OPERATION_NODE" else f"a {kind or 'query'}"
            raise TraceFailure(
                Cause.UNQUALIFIED if kind == "SET_OPERATION_NODE" else Cause.UNTRACEABLE,
                f"compares '{column}' of {what}, which is {words}: it may come from several tables",
            )
        block = self.blocks.get(id(node))
        if block is None:  # a subquery's block is built when it is walked, which happens first
            raise TraceFailure(Cause.UNTRACEABLE, f"compares '{column}' of {what}, which pz could not follow")
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
                raise TraceFailure(
                    Cause.CURSOR_EXPRESSION,
                    f"compares '{column}' of {what}, which computes it ({shown_sql(item)}) rather than "
                    "passing a column through",
                )
            return self._trace(item, block, ctes)
        for star in stars:
            found = self._through_star(star, block, column, ctes, what)
            if found is not None:
                return found
        raise TraceFailure(Cause.UNTRACEABLE, f"compares '{column}', which {what} does not select")

    def _through_star(
        self, star: Json, block: Block, column: str, ctes: tuple[Cte, ...], what: str
    ) -> CursorTrace | None:
        """Trace `column` through one `*` of a select list; None when that `*` does not select it."""
        wanted = column.lower()
        if star.get("columns") or star.get("expr"):
            return None  # COLUMNS(...): computed
        relation = str(star.get("relation_name") or "").lower()
        excluded = {last_name(e).lower() for e in star.get("exclude_list") or []}
        excluded |= {last_name(e).lower() for e in star.get("qualified_exclude_list") or []}
        if wanted in excluded:
            return None
        replaced = {last_name(r.get("key")).lower() for r in map_entries(star.get("replace_list"))}
        renamed = map_entries(star.get("rename_list"))
        if wanted in replaced or wanted in {last_name(r.get("value")).lower() for r in renamed}:
            raise TraceFailure(
                Cause.CURSOR_EXPRESSION, f"compares '{column}' of {what}, which replaces or renames it"
            )
        if wanted in {last_name(r.get("key")).lower() for r in renamed}:
            return None  # renamed away: not selected under this name
        if relation:
            for b in block.bindings:
                if b.alias == relation:
                    return self._resolve(b, column, ctes)
            return None
        if len(block.bindings) == 1:
            return self._resolve(block.bindings[0], column, ctes)
        raise TraceFailure(
            Cause.UNQUALIFIED,
            f"compares '{column}' of {what}, whose SELECT * reads several tables; select the cursor "
            "by its table's alias, or filter inside",
        )
