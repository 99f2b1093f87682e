"""Reading DuckDB's parse tree for the SQL route's inference: the placeholder a watermark() call renders as
(`token_index`), walking a node's children, finding placeholders, columns and subqueries in an expression,
rendering an expression for a message, and the scopes the walk keeps (CTEs in scope, a query block's FROM
bindings, where a cursor column traces to)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pipelinez.compile.templating import REF_TOKEN_RE, WATERMARK_TOKEN_RE
from pipelinez.compile.watermark_outcomes import Cause, Json

LOWER = {"COMPARE_GREATERTHAN": False, "COMPARE_GREATERTHANOREQUALTO": True}
MIRRORED = {"COMPARE_LESSTHAN": False, "COMPARE_LESSTHANOREQUALTO": True}  # wm < cursor == cursor > wm
OPS = {
    "COMPARE_GREATERTHAN": ">",
    "COMPARE_GREATERTHANOREQUALTO": ">=",
    "COMPARE_LESSTHAN": "<",
    "COMPARE_LESSTHANOREQUALTO": "<=",
    "COMPARE_EQUAL": "=",
    "COMPARE_NOTEQUAL": "!=",
    "COMPARE_DISTINCT_FROM": "IS DISTINCT FROM",
    "COMPARE_NOT_DISTINCT_FROM": "IS NOT DISTINCT FROM",
}
QUERY_NODES = {"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"}


def token_index(expr: Any) -> int | None:
    if isinstance(expr, dict) and expr.get("class") == "COLUMN_REF":
        names = expr.get("column_names") or []
        if len(names) == 1 and isinstance(names[0], str):
            match = WATERMARK_TOKEN_RE.fullmatch(names[0])
            if match:
                return int(match.group(1))
    return None


def child_nodes(obj: Any) -> Iterator[Any]:
    if isinstance(obj, dict):
        yield from obj.values()
    elif isinstance(obj, list):
        yield from obj


def is_query_node(obj: Any) -> bool:
    kind = obj.get("type") if isinstance(obj, dict) else None
    return isinstance(kind, str) and kind in QUERY_NODES and "cte_map" in obj


@dataclass
class Cte:
    """A CTE of a parsed query: its name, query node and what it uses."""

    name: str
    node: Any  # the CTE's query node
    env: Env  # the CTEs visible inside its body
    renamed: bool  # `name(a, b) AS (...)`: columns renamed by position
    uses: int = 0


class Env:
    """The CTEs in scope, innermost first."""

    def __init__(self, ctes: dict[str, Cte] | None = None, parent: Env | None = None):
        self.ctes = ctes or {}
        self.parent = parent

    def find(self, name: str) -> Cte | None:
        env: Env | None = self
        while env is not None:
            if name in env.ctes:
                return env.ctes[name]
            env = env.parent
        return None


@dataclass
class Binding:
    """One table of a query block's FROM clause, by the name its columns are qualified with."""

    alias: str
    kind: str  # staging | cte | subquery | other
    ref: Json  # the table reference
    dataset: tuple[str, str] | None = None
    cte: Cte | None = None
    what: str = ""  # how to name it in a message


@dataclass
class Block:
    """The names a query block binds, and the scope it sees."""

    bindings: list[Binding]
    env: Env


@dataclass(frozen=True)
class CursorTrace:
    """Where a cursor column comes from: a read of a staging table, through these CTEs."""

    ref: Json
    dataset: tuple[str, str]
    column: str
    ctes: tuple[Cte, ...]


class TraceFailure(Exception):
    def __init__(self, cause: Cause, detail: str):
        super().__init__(detail)
        self.cause, self.detail = cause, detail


def tokens(expr: Any, *, into_subqueries: bool) -> Iterator[Json]:
    """Placeholder column refs in an expression (not inside subqueries unless asked)."""
    stack = [expr]
    while stack:
        obj = stack.pop()
        if isinstance(obj, dict):
            if token_index(obj) is not None:
                yield obj
                continue
            if not into_subqueries and (obj.get("class") == "SUBQUERY" or is_query_node(obj)):
                continue
            stack.extend(reversed(list(child_nodes(obj))))
        elif isinstance(obj, list):
            stack.extend(reversed(obj))


def columns_in(expr: Any) -> bool:
    """A column reference other than a placeholder, anywhere (lambdas' parameters count: refused too)."""
    stack = [expr]
    while stack:
        obj = stack.pop()
        if isinstance(obj, dict):
            if obj.get("class") == "COLUMN_REF" and token_index(obj) is None:
                return True
            stack.extend(child_nodes(obj))
        elif isinstance(obj, list):
            stack.extend(obj)
    return False


def has_subquery(expr: Any) -> bool:
    stack = [expr]
    while stack:
        obj = stack.pop()
        if isinstance(obj, dict):
            if obj.get("class") == "SUBQUERY" or is_query_node(obj):
                return True
            stack.extend(child_nodes(obj))
        elif isinstance(obj, list):
            stack.extend(obj)
    return False


def map_entries(value: Any) -> list[Json]:
    if isinstance(value, dict):
        value = value.get("map") or list(value.items())
    return [e if isinstance(e, dict) else {"key": e[0], "value": e[1]} for e in value or [] if e]


def last_name(item: Any) -> str:
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


def table_words(name: str) -> str:
    match = REF_TOKEN_RE.fullmatch(name)
    return f"ref('{match.group(1)}')" if match else f"table '{name}'"


def shown_sql(expr: Any) -> str:
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
        args = [shown_sql(c) for c in expr.get("children") or []]
        if expr.get("is_operator") or not name.isidentifier():
            return f" {name} ".join(args) if len(args) == 2 else f"{name}{''.join(args)}"
        return f"{name}({', '.join(args)})"
    if cls == "CAST":
        return f"CAST({shown_sql(expr.get('child'))} AS …)"
    has_token = any(True for _ in tokens(expr, into_subqueries=False))
    return "… watermark() …" if has_token else "an expression"
