"""Hypothesis strategies that turn a valid project tree into a broken (or still valid) one.

Every mutation is a function `(draw, tree) -> description` that edits `tree` in place with values drawn
from hypothesis, so a case is reproducible from hypothesis' choices alone. The families follow issue 6:
YAML shape, types, identifiers, SQL text, file-system oddities and data files; `cases()` combines zero to
three of them with a command line. A quarter of the cases then also get one of issue 20's surfaces
(`tests.fuzz.surfaces`: incremental cursors, overlapping outputs, misbehaving http APIs, signals), drawn
last so that the rest of a case is what it was before they existed.
"""

from __future__ import annotations

import copy
import io
import random
import re
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from tests.fuzz.harness import Case, dump_yaml
from tests.fuzz.seeds import ENV, SEEDS, Tree
from tests.fuzz.surfaces import SURFACES

Draw = Callable[..., Any]
Path_ = tuple[str | int, ...]

# --- value pools ---------------------------------------------------------------------------------------

HOSTILE_IDS = [
    "", " ", ".", "..", "../x", "a/b", "a.b", "a b", "1abc", "select", "from", "order", "group", "table",
    "user", "default", "NULL", "true", "ünïcode", "名前", "🙂", "a'b", 'a"b', "a`b", "a\\b", "a;b", "a--b",
    "a/*b", "{{x}}", "x" * 63, "x" * 64, "y" * 100, "z" * 300, "CamelCase", "_", "__pz_tmp_x",
    "src_files__orders", "a\tb", "a\nb", "-x", "con", "chk_a__b", "main", "information_schema", "Ω",
]  # fmt: skip
ODD_SCALARS: list[Any] = [
    None, True, False, 0, -1, 1, 2**31, 2**63, 2**64, -(2**63) - 1, 10**30, 1.5, -0.0, 1e308,
    float("nan"), float("inf"), float("-inf"), "", " ", "~", "null", "yes", "no", "on", "0x1F", "0o17",
    "1e400", "2024-13-45", "2024-01-01", "12:30:00", "../..", "/etc/passwd", "ünïcødé", "🙂", "\x00",
    "\t", "a\nb", "{{ var('nope') }}", "{{ env('NOPE') }}", "{{ env('FZ_TOKEN') }}", "{{", "}}",
    "{% if %}", "'", '"', "`", "; DROP TABLE x", "*", "**", "$HOME", "%s", "\\", "-1s", "0", "500ms",
]  # fmt: skip
KEY_NAMES = [
    "sync", "partitions", "breaker", "connectors", "input", "retry", "columns", "checks", "table", "query",
    "path", "format", "strategy", "keys", "on_delete", "duplicates", "allow_empty", "max_concurrency",
    "engine", "materialized", "severity", "name", "files_per_partition", "header", "delimiter", "quote",
    "null", "window", "cursor", "mode", "start", "description", "tags", "vars", "env", "unknown_key",
]  # fmt: skip
COLUMN_TYPES = [
    "bigint", "integer", "int", "smallint", "tinyint", "hugeint", "ubigint", "varchar", "text", "double",
    "float", "real", "boolean", "bool", "date", "time", "timestamp", "timestamptz", "interval", "blob",
    "uuid", "json", "decimal(10,2)", "decimal(38,10)", "decimal(39,2)", "decimal(2,5)", "decimal(0,0)",
    "decimal", "numeric(5)", "varchar(3)", "varchar(-1)", "int[]", "varchar[][]", "STRUCT(a INT)",
    "MAP(VARCHAR, INT)", "UNION(a INT, b VARCHAR)", "ENUM('a','b')", "nonsense", "", " ", "bigint;",
    "bigint; DROP TABLE x", "BIGINT", "BigInt", "decimal(10,2", "timestamp with time zone", "geometry",
    "bit", "int128", "🙂", "string",
]  # fmt: skip
VAR_TYPES = ["string", "int", "bigint", "decimal", "bool", "date", "timestamp", "float", "", "list", "Int"]
DURATIONS = [
    "500ms", "2s", "5m", "1h", "1d", "0s", "0ms", "-1s", "1y", "1.5s", "", " ", "1 s", "99999999999d",
    "1e3s", "s", "10", "1w", "PT1S", "1S", "1h30m", "0x10s", "∞", "9" * 30 + "ms",
]  # fmt: skip
CHECK_TYPES = [
    "not_null", "unique", "accepted_values", "row_count", "expression", "relationships", "freshness",
    "not_nul", "custom", "",
]  # fmt: skip
SQL_SNIPPETS = [
    ";", "; DROP TABLE x;", ";\nSELECT 2", "--", "-- comment\n", "/*", "*/", "/* x */", "'", '"', "(",
    ")", "{{", "}}", "{%", "%}", "{#", "#}", "{{ ref('nope') }}", "{{ source('files', 'nope') }}",
    "{{ source('nope', 'orders') }}", "{{ sink('wh', 'extra') }}", "{{ var('nope') }}",
    "{{ env('NOPE') }}", "{{ env('FZ_TOKEN') }}", "{{ env('NOPE', 'dflt') }}", "{{ var('nope', 1) }}",
    "{{ watermark('files', 'orders') }}", "{% for i in range(3) %}{{ i }}{% endfor %}",
    "{% for i in range(100000000) %}x{% endfor %}", "{{ 'a' * 200000000 }}", "{{ ''.__class__.__mro__ }}",
    "{{ lipsum(2000000000) }}", "{{ [1]|batch(2000000000, 0)|list }}", "{{ '{:>2000000000}'.format(1) }}",
    "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
    "{{ [[0] * 1000000] * 1000 }}",
    "{{ cycler.__init__.__globals__ }}", "{{ self }}", "{% include 'x.sql' %}", "{% extends 'x' %}",
    "{% import 'x' as y %}", "{% macro m() %}1{% endmacro %}{{ m() }}", "{% raw %}", "{% endraw %}",
    "{{ ref() }}", "{{ source() }}", "{{ sink() }}", "{{ ref(1) }}", "{{ ref('totals', 'x') }}",
    "{{ 1/0 }}", "{{ undefined_name }}", "{{ range(10**9)|list|length }}", "\x00", "\u200b", "\ufeff",
    "ATTACH 'other.db' AS o;", "COPY (SELECT 1) TO 'copied.csv';", "PRAGMA version;", "SET threads=1;",
    "LOAD httpfs;", "SELECT * FROM read_csv('/etc/hostname')", "CREATE TABLE t AS SELECT 1;",
    "DELETE FROM x;", "UNION ALL SELECT 1", "JOIN", "WHERE", "GROUP BY", "ORDER BY 999", "LIMIT -1",
    "SELECT", "INSERT INTO", "INSERT INTO {{ sink('wh', 'totals') }}", "::", "$1", "?", "\\", "`",
    "1/0", "CAST('x' AS INT)", "'2024-13-45'::DATE", "9223372036854775808::BIGINT",
]  # fmt: skip
SQL_WHOLE = [
    "", " ", "\n\n", "-- only a comment\n", "/* unterminated", "SELECT 1 AS one", "SELECT 1; SELECT 2",
    "INSERT INTO {{ sink('wh', 'totals') }}", "INSERT INTO {{ sink('wh', 'totals') }}\n",
    "INSERT INTO main.totals SELECT 1", "CREATE TABLE x AS SELECT 1", "DROP TABLE x", "WITH a AS (SELECT 1)",
    "SELECT * FROM {{ ref('totals') }}", "SELECT * FROM {{ source('files', 'orders') }}",
    "INSERT INTO {{ sink('wh', 'totals') }}\nINSERT INTO {{ sink('wh', 'totals') }}\nSELECT 1 AS a",
    "INSERT INTO {{ sink('nope', 'x') }}\nSELECT 1 AS a", "{{ sink('wh', 'totals') }}\nSELECT 1 AS a",
    "SELECT 1 AS a\nINSERT INTO {{ sink('wh', 'totals') }}", "{% if true %}SELECT 1", "SELECT {{",
    "SELECT 1 AS a, 2 AS a", "SELECT NULL AS n", "SELECT * FROM range(3)", "SELECT 'x' AS \"\"",
    "INSERT INTO {{ sink('wh', 'totals') }}\nSELECT 1 AS \"a b\", 2 AS \"ü\", 3 AS \"select\"",
    "INSERT INTO {{ sink('wh', 'totals') }}\nSELECT [1, 2] AS l, {'a': 1} AS s, MAP {'k': 1} AS m",
    "INSERT INTO {{ sink('wh', 'totals') }}\nSELECT 'nan'::DOUBLE AS d, 'inf'::DOUBLE AS e",
    "INSERT INTO {{ sink('wh', 'totals') }}\nSELECT * FROM range(0) t(x)",
    "INSERT INTO {{ sink('wh', 'totals') }}\nSELECT x FROM range(100000) t(x)",
    "INSERT INTO {{ sink('wh', 'totals') }}\nSELECT 170141183460469231731687303715884105727::HUGEINT AS h",
    "INSERT INTO {{ sink('wh', 'totals') }}\nSELECT '294247-01-10'::TIMESTAMP AS t",
    "INSERT INTO {{ sink('wh', 'totals') }}\nSELECT 1 AS a UNION ALL SELECT 'x'",
]  # fmt: skip
TEXT_BREAKS = [
    "\t", "  ", "{", "}", "[", "]", ":", ": :", "- ", "&a ", "*a", "*nope", "!!python/object:os.system ",
    "!!binary ", "!custom ", "---\n", "...\n", "? ", "%YAML 1.1\n", "'", '"', "|", ">", "#", "\x00", "\x07",
    "\ufeff", "\r", "\r\n", "<<: *a\n", "@", "`", "%", ",", "\\", "\u2028",
]  # fmt: skip
BINARY_BLOBS = [
    b"\x00" * 64, b"\xff\xfe" + "name: x\n".encode("utf-16-le"), b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    b"PAR1\x00\x00PAR1", b"\xc3\x28\xa0\xa1", b"name: ok\n\xff\n", b"\xef\xbb\xbfname: bom\n",
    bytes(range(256)), b"PK\x03\x04" + b"\x00" * 30,
]  # fmt: skip
SYMLINK_TARGETS = [
    "nope.yml", "/nonexistent/x", ".", "..", "/dev/null", "/etc/hostname", "/proc/self/status", "/tmp",
    "/usr",
    "SELF", "LOOP",
]  # fmt: skip
RUN_FLAGS = [
    ["--threads", "1"], ["--full-refresh"], ["--fail-fast"], ["--select", "+totals+"], ["--select", "nope"],
    ["--exclude", "tag:daily"], ["--var", "min_amount=abc"], ["--var", "nope=1"], ["--var", "top_n=5"],
    ["--var", "=x"], ["--var", "since=2024-02-30"], ["--var", "strict=maybe"], ["--select", "source:files"],
    ["--select", "sink:wh"], ["--quiet"], ["--select", ""], ["--threads", "0"], ["--bogus-flag"],
    ["--select", "+"], ["--all"], ["--select", "totals", "--all"], ["--select", "tag:nope"],
    ["--var", "top_n=99999999999999999999"], ["--var", "label={{ env('FZ_TOKEN') }}"], ["--threads", "x"],
    ["--exclude", "+totals"], ["--select", "enriched+"], ["--no-color"],
]  # fmt: skip


def odd_values() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(ODD_SCALARS),
        st.integers(),
        st.floats(),
        st.text(max_size=30),
        st.sampled_from(HOSTILE_IDS),
        st.lists(st.sampled_from(ODD_SCALARS[:20]), max_size=3),
        st.dictionaries(st.sampled_from(KEY_NAMES), st.sampled_from(ODD_SCALARS[:20]), max_size=2),
        st.integers(1_000, 20_000).map(lambda n: "x" * n),
    )


def identifiers() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(HOSTILE_IDS),
        st.from_regex(r"[a-z_][a-z0-9_]{0,70}", fullmatch=True),
        st.text(max_size=20),
    )


# --- tree helpers ----------------------------------------------------------------------------------------


class Drawer:
    """hypothesis' `draw` for values, plus an evenly spread random source for structural choices.

    hypothesis favours small, boundary and repeated integers, which is right for values but skews the
    mix of mutations; the random source is seeded by hypothesis, so a case stays reproducible.
    """

    def __init__(self, draw: Callable[..., Any], rng: random.Random):
        self.draw, self.rng = draw, rng

    def __call__(self, strategy: st.SearchStrategy[Any]) -> Any:
        return self.draw(strategy)


def _uniform(draw: Draw) -> float:
    return float(draw.rng.random())


def chance(draw: Draw, p: float) -> bool:
    return _uniform(draw) < p


def choose(draw: Draw, items: list[Any]) -> Any:
    return items[int(_uniform(draw) * len(items))]


def between(draw: Draw, lo: int, hi: int) -> int:
    return lo + int(_uniform(draw) * (hi - lo + 1))


def _pick(draw: Draw, items: list[Any]) -> Any:
    return choose(draw, items) if items else None


def _yaml_files(tree: Tree) -> list[str]:
    return sorted(p for p, (k, _) in tree.items() if k == "yaml")


def _text_files(tree: Tree, suffix: str = "") -> list[str]:
    return sorted(p for p, (k, _) in tree.items() if k == "text" and p.endswith(suffix))


def _paths(obj: Any, prefix: Path_ = ()) -> list[Path_]:
    out: list[Path_] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append((*prefix, k))
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.append((*prefix, i))
            out += _paths(v, (*prefix, i))
    return out


def _dict_paths(obj: Any) -> list[Path_]:
    return [()] * (isinstance(obj, dict)) + [p for p in _paths(obj) if isinstance(_get(obj, p), dict)]


def _get(obj: Any, path: Path_) -> Any:
    for key in path:
        obj = obj[key]
    return obj


def _parent(obj: Any, path: Path_) -> tuple[Any, str | int]:
    return _get(obj, path[:-1]), path[-1]


def _datasets(tree: Tree) -> list[tuple[str, str]]:
    """(source file, dataset name) of every dataset still held as YAML data."""
    out = []
    for path in _yaml_files(tree):
        doc = tree[path][1]
        if path.startswith("sources/") and isinstance(doc, dict) and isinstance(doc.get("datasets"), dict):
            out += [(path, str(name)) for name in doc["datasets"]]
    return out


def _outputs(tree: Tree) -> list[tuple[str, str]]:
    out = []
    for path in _yaml_files(tree):
        doc = tree[path][1]
        if path.startswith("sinks/") and isinstance(doc, dict) and isinstance(doc.get("outputs"), dict):
            out += [(path, str(name)) for name in doc["outputs"]]
    return out


def _to_text(tree: Tree, path: str) -> str:
    kind, value = tree[path]
    if kind == "yaml":
        value = dump_yaml(value)
        tree[path] = ("text", value)
    return str(value) if kind in ("yaml", "text") else ""


def _sub_sql(tree: Tree, pattern: str, repl: str) -> None:
    for path in _text_files(tree, ".sql"):
        tree[path] = ("text", re.sub(pattern, lambda _m: repl, tree[path][1]))


def _remove_under(tree: Tree, folder: str) -> None:
    for path in [p for p in tree if p == folder or p.startswith(folder + "/")]:
        del tree[path]


def _quote(name: str) -> str:
    return "'" + name + "'"


# --- YAML shape -----------------------------------------------------------------------------------------


def yaml_drop_key(draw: Draw, tree: Tree) -> str:
    path = _pick(draw, _yaml_files(tree))
    if path is None:
        return "noop"
    doc = tree[path][1]
    key = _pick(draw, _paths(doc))
    if key is None:
        tree[path] = ("yaml", {})
        return f"{path}: emptied"
    parent, last = _parent(doc, key)
    del parent[last]
    return f"{path}: dropped {key}"


def yaml_rename_key(draw: Draw, tree: Tree) -> str:
    path = _pick(draw, _yaml_files(tree))
    doc = tree[path][1] if path else None
    keys = [p for p in _paths(doc) if isinstance(p[-1], str)]
    key = _pick(draw, keys)
    if key is None:
        return "noop"
    parent, last = _parent(doc, key)
    assert isinstance(last, str)
    new = draw(
        st.one_of(
            st.sampled_from([last + "s", last[:-1], last.upper(), last.replace("_", "-"), " " + last]),
            st.sampled_from(KEY_NAMES),
            identifiers(),
        )
    )
    parent[new] = parent.pop(last)
    return f"{path}: renamed key {key} -> {new!r}"


def yaml_wrong_type(draw: Draw, tree: Tree) -> str:
    path = _pick(draw, _yaml_files(tree))
    doc = tree[path][1] if path else None
    key = _pick(draw, _paths(doc))
    if key is None:
        return "noop"
    parent, last = _parent(doc, key)
    value = draw(odd_values())
    parent[last] = value
    return f"{path}: {key} = {_short(value)}"


def yaml_add_key(draw: Draw, tree: Tree) -> str:
    path = _pick(draw, _yaml_files(tree))
    doc = tree[path][1] if path else None
    where = _pick(draw, _dict_paths(doc))
    if where is None:
        return "noop"
    key = draw(st.one_of(st.sampled_from(KEY_NAMES), identifiers()))
    value = draw(
        st.one_of(
            odd_values(),
            st.sampled_from(
                [
                    {"mode": "incremental", "cursor": "id", "start": 0},
                    {"column": "id", "count": 4},
                    {"failure_threshold": 3, "cool_down": "1s"},
                    {"localfiles": ">=1"},
                    {"max_attempts": 2, "base_delay": "1ms"},
                    {"id": "bigint"},
                    [{"not_null": {"columns": ["id"]}}],
                ]
            ),
        )
    )
    _get(doc, where)[key] = value
    return f"{path}: added {(*where, key)} = {_short(value)}"


def yaml_deep_nest(draw: Draw, tree: Tree) -> str:
    path = _pick(draw, _yaml_files(tree))
    doc = tree[path][1] if path else None
    key = _pick(draw, _paths(doc))
    if key is None:
        return "noop"
    depth = between(draw, 2, 150)
    as_list = chance(draw, 0.5)
    value: Any = "leaf"
    for _ in range(depth):
        value = [value] if as_list else {"a": value}
    parent, last = _parent(doc, key)
    parent[last] = value
    return f"{path}: {key} nested {depth} deep"


def yaml_text_break(draw: Draw, tree: Tree) -> str:
    path = _pick(
        draw, sorted(p for p, (k, _) in tree.items() if k == "yaml" or p.endswith((".yml", ".yaml")))
    )
    if path is None or tree[path][0] not in ("yaml", "text"):
        return "noop"
    text = _to_text(tree, path)
    how = choose(draw, ["insert", "tab_indent", "truncate", "dup_line", "deep", "laughs", "crlf"])
    if how == "insert":
        pos = between(draw, 0, len(text))
        snippet = choose(draw, TEXT_BREAKS)
        text = text[:pos] + snippet + text[pos:]
        detail = f"inserted {snippet!r} at {pos}"
    elif how == "tab_indent":
        text = re.sub(r"(?m)^  ", "\t", text, count=between(draw, 1, 3))
        detail = "tab indentation"
    elif how == "truncate":
        pos = between(draw, 0, len(text))
        text, detail = text[:pos], f"truncated at {pos}"
    elif how == "dup_line":
        lines = text.splitlines(keepends=True) or [""]
        i = between(draw, 0, len(lines) - 1)
        text, detail = "".join(lines[: i + 1] + lines[i:]), f"duplicated line {i + 1}"
    elif how == "deep":
        depth = choose(draw, [100, 1000, 10000, 100000])
        text, detail = text + "x: " + "[" * depth + "]" * depth + "\n", f"flow nesting {depth}"
    elif how == "laughs":
        text = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
            for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        )
        text, detail = text + "name: laughs\n", "billion laughs aliases"
    else:
        text, detail = text.replace("\n", "\r\n"), "CRLF line ends"
    tree[path] = ("text", text)
    return f"{path}: {detail}"


def yaml_top_level(draw: Draw, tree: Tree) -> str:
    path = _pick(draw, _yaml_files(tree))
    if path is None:
        return "noop"
    text = draw(
        st.sampled_from(
            ["", "---\n", "null\n", "- a\n- b\n", "just a string\n", "42\n", "name: a\n---\nname: b\n", "~\n"]
        )
    )
    tree[path] = ("text", text)
    return f"{path}: whole file {text!r}"


# --- types ------------------------------------------------------------------------------------------------


def contract_type(draw: Draw, tree: Tree) -> str:
    pick = _pick(draw, _datasets(tree))
    if pick is None:
        return "noop"
    path, name = pick
    ds = tree[path][1]["datasets"][name]
    if not isinstance(ds, dict):
        return "noop"
    cols = ds.get("columns")
    if not isinstance(cols, dict) or not cols:
        ds["columns"] = cols = {"id": "bigint"}
    col = _pick(draw, sorted(cols))
    cols[col] = draw(st.one_of(st.sampled_from(COLUMN_TYPES), st.text(max_size=12), odd_values()))
    return f"{path}: datasets.{name}.columns.{col} = {_short(cols[col])}"


def var_types(draw: Draw, tree: Tree) -> str:
    kind, doc = tree.get("project.yml", ("", None))
    if kind != "yaml" or not isinstance(doc, dict):
        return "noop"
    vars_ = doc.setdefault("vars", {})
    if not isinstance(vars_, dict):
        return "noop"
    name = draw(st.one_of(st.sampled_from(sorted(vars_) or ["v"]), identifiers()))
    spec: dict[str, Any] = {}
    if chance(draw, 0.5):
        spec["type"] = draw(st.one_of(st.sampled_from(VAR_TYPES), odd_values()))
    if chance(draw, 0.5):
        spec["default"] = draw(odd_values())
    vars_[name] = spec if chance(draw, 0.8) else draw(odd_values())
    return f"project.yml: vars.{name} = {_short(vars_[name])}"


DURATION_PLACES = [
    ("project.yml", ("engine", "retry", "base_delay")),
    ("project.yml", ("engine", "retry", "max_delay")),
    ("project.yml", ("engine", "breaker", "cool_down")),
    ("sources/files.yml", ("retry", "base_delay")),
    ("sinks/wh.yml", ("retry", "max_delay")),
    ("pipelines/enriched.yml", ("checks", 5, "freshness", "max_age")),
]


def durations(draw: Draw, tree: Tree) -> str:
    places = [(f, p) for f, p in DURATION_PLACES if tree.get(f, ("",))[0] == "yaml"]
    pick = _pick(draw, places)
    if pick is None:
        return "noop"
    file, path = pick
    obj = tree[file][1]
    value = draw(st.one_of(st.sampled_from(DURATIONS), odd_values()))
    with_contextless(obj, path, value)
    return f"{file}: {'.'.join(map(str, path))} = {_short(value)}"


def with_contextless(obj: Any, path: Path_, value: Any) -> None:
    """Set `path` in `obj`, creating mappings on the way; gives up silently where the shape differs."""
    for key in path[:-1]:
        if isinstance(obj, dict):
            obj = obj.setdefault(key, {})
        elif isinstance(obj, list) and isinstance(key, int) and key < len(obj):
            obj = obj[key]
        else:
            return
    if isinstance(obj, dict) or (isinstance(obj, list) and isinstance(path[-1], int) and path[-1] < len(obj)):
        obj[path[-1]] = value


def checks(draw: Draw, tree: Tree) -> str:
    """Replace or add a check in a sidecar or under a dataset."""
    holders = [p for p in _yaml_files(tree) if p.startswith("pipelines/")]
    holders += [f"{p}#{d}" for p, d in _datasets(tree)]
    holder = _pick(draw, holders)
    if holder is None:
        return "noop"
    if "#" in holder:
        file, ds = holder.split("#", 1)
        target = tree[file][1]["datasets"][ds]
    else:
        file, target = holder, tree[holder][1]
    if not isinstance(target, dict):
        return "noop"
    checks_ = target.get("checks")
    if not isinstance(checks_, list):
        target["checks"] = checks_ = []
    check = draw(
        st.one_of(
            st.sampled_from(
                [
                    {"freshness": {"column": "customer", "max_age": "1d"}},
                    {"freshness": {"column": "amount", "max_age": "1d"}},
                    {"freshness": {"column": "id", "max_age": "1d"}},
                    {"relationships": {"column": "id", "to": "source('files', 'customers')", "field": "x"}},
                    {"relationships": {"column": "customer", "to": "customers", "field": "customer"}},
                    {"relationships": {"column": "id", "to": "nope", "field": "id"}},
                    {
                        "relationships": {
                            "column": "id",
                            "to": "source('files', 'items')",
                            "field": "order_id",
                        }
                    },
                    {"accepted_values": {"column": "amount", "values": ["a", 1, True]}},
                    {"accepted_values": {"column": "nope", "values": ["a"]}},
                    {"row_count": {"min": 5, "max": 1}},
                    {"row_count": {"min": -1}},
                    {"row_count": {}},
                    {"unique": {"columns": []}},
                    {"not_null": {"columns": ["nope"]}},
                    {"expression": {"sql": "sum(amount) > 0"}},
                    {"expression": {"sql": "1; DROP TABLE x"}},
                    {"expression": {"sql": "(SELECT 1)"}},
                    {"expression": {"sql": "amount >"}},
                    {"expression": {"sql": "{{ var('nope') }}"}},
                    {"not_null": {"columns": ["id"]}, "severity": "fatal"},
                    {"not_null": {"columns": ["id"]}, "name": "a b"},
                    {"not_null": {"columns": ["id"]}, "unique": {"columns": ["id"]}},
                ]
            ),
            st.fixed_dictionaries(
                {choose(draw, CHECK_TYPES): st.dictionaries(st.sampled_from(KEY_NAMES), odd_values())}
            ),
        )
    )
    if checks_ and chance(draw, 0.5):
        checks_[between(draw, 0, len(checks_) - 1)] = check
    else:
        checks_.append(check)
    return f"{holder}: check {_short(check)}"


def materialization(draw: Draw, tree: Tree) -> str:
    sqls = _text_files(tree, ".sql")
    sql = _pick(draw, sqls)
    if sql is None:
        return "noop"
    side = sql[:-4] + ".yml"
    doc = tree[side][1] if tree.get(side, ("",))[0] == "yaml" else {}
    if not isinstance(doc, dict):
        return "noop"
    doc["materialized"] = choose(draw, ["ephemeral", "ephemeral", "table", "view", "incremental", ""])
    tree[side] = ("yaml", doc)
    return f"{side}: materialized {doc['materialized']!r}"


def output_options(draw: Draw, tree: Tree) -> str:
    pick = _pick(draw, _outputs(tree))
    if pick is None:
        return "noop"
    path, name = pick
    out = tree[path][1]["outputs"][name]
    if not isinstance(out, dict):
        return "noop"
    key = choose(draw, ["strategy", "keys", "on_delete", "duplicates", "allow_empty", "table", "path"])
    value = draw(
        st.one_of(
            st.sampled_from(
                {
                    "strategy": ["replace", "merge", "append", "upsert", ""],
                    "keys": [["id"], ["nope"], [], ["id", "id"], "id", ["country"], ["customer"]],
                    "on_delete": [{"column": "status"}, {"column": "nope"}, {}, "x"],
                    "duplicates": ["accept", "refuse", "", True],
                    "allow_empty": [True, False, "yes"],
                    "table": ["main.x", "x.y.z", '"unterminated', 'a"b', "main.", ".x", "s." + "t" * 80,
                              "totals", "main.totals", "audit.log", '"Mixed Case"', "select", "ü.ü"],
                    "path": ["x.csv", "../escape", "/tmp/abs", "", "a/b/c", "enriched.csv", "*", "."],
                }[key]
            ),
            odd_values(),
        )
    )  # fmt: skip
    out[key] = value
    return f"{path}: outputs.{name}.{key} = {_short(value)}"


# --- identifiers ------------------------------------------------------------------------------------------


def rename_pipeline(draw: Draw, tree: Tree) -> str:
    sql = _pick(draw, _text_files(tree, ".sql"))
    if sql is None:
        return "noop"
    old = sql.rsplit("/", 1)[-1][:-4]
    new = draw(identifiers())
    folder = sql.rsplit("/", 1)[0]
    tree[f"{folder}/{new}.sql"] = tree.pop(sql)
    side = f"{folder}/{old}.yml"
    if side in tree:
        tree[f"{folder}/{new}.yml"] = tree.pop(side)
    consistent = chance(draw, 0.5)
    if consistent:
        _sub_sql(tree, rf"ref\(\s*'{re.escape(old)}'\s*\)", f"ref({_quote(new)})")
    return f"renamed pipeline {old} -> {new!r} ({'refs too' if consistent else 'refs unchanged'})"


def _rename_entry(draw: Draw, tree: Tree, picks: list[tuple[str, str]], key: str, what: str) -> str:
    """Rename one `datasets:`/`outputs:` entry and the source()/sink() calls that name it."""
    pick = _pick(draw, picks)
    if pick is None:
        return "noop"
    path, old = pick
    new = draw(identifiers())
    entries = tree[path][1][key]
    entries[new] = entries.pop(old)
    instance = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    _sub_sql(tree, rf"'{re.escape(instance)}',\s*'{re.escape(old)}'", f"{_quote(instance)}, {_quote(new)}")
    return f"{path}: renamed {what} {old} -> {new!r}"


def rename_dataset(draw: Draw, tree: Tree) -> str:
    return _rename_entry(draw, tree, _datasets(tree), "datasets", "dataset")


def rename_output(draw: Draw, tree: Tree) -> str:
    return _rename_entry(draw, tree, _outputs(tree), "outputs", "output")


def rename_instance(draw: Draw, tree: Tree) -> str:
    path = _pick(draw, sorted(p for p in tree if re.fullmatch(r"(sources|sinks)/[^/]+\.yml", p)))
    if path is None:
        return "noop"
    folder, file = path.split("/")
    old, new = file[:-4], draw(identifiers())
    tree[f"{folder}/{new}{choose(draw, ['.yml', '.yaml', '.YML', '.json', ''])}"] = tree.pop(path)
    func = "source" if folder == "sources" else "sink"
    _sub_sql(tree, rf"{func}\(\s*'{re.escape(old)}',", f"{func}({_quote(new)},")
    return f"renamed {folder[:-1]} {old} -> {new!r}"


def rename_column(draw: Draw, tree: Tree) -> str:
    pick = _pick(draw, _datasets(tree))
    if pick is None:
        return "noop"
    path, ds_name = pick
    ds = tree[path][1]["datasets"][ds_name]
    cols = ds.get("columns") if isinstance(ds, dict) else None
    if not isinstance(cols, dict) or not cols:
        return "noop"
    old = _pick(draw, sorted(cols))
    new = draw(identifiers())
    ds["columns"] = {(new if k == old else k): v for k, v in cols.items()}
    for data in [p for p in tree if p.startswith("data/") and tree[p][0] == "text"]:
        text = tree[data][1]
        if data.endswith(".csv"):
            head, _, rest = text.partition("\n")
            tree[data] = (
                "text",
                re.sub(rf"\b{re.escape(old)}\b", new.replace("\\", "\\\\"), head) + "\n" + rest,
            )
        elif data.endswith(".json"):
            tree[data] = ("text", text.replace(f'"{old}":', f"{_json_str(new)}:"))
    if chance(draw, 0.5):
        _sub_sql(tree, rf"\b{re.escape(old)}\b", new)
    return f"{path}: renamed column {ds_name}.{old} -> {new!r}"


def _json_str(s: str) -> str:
    import json

    return json.dumps(s)


# --- SQL text ---------------------------------------------------------------------------------------------


def sql_edit(draw: Draw, tree: Tree) -> str:
    sql = _pick(draw, _text_files(tree, ".sql"))
    if sql is None:
        return "noop"
    text = tree[sql][1]
    how = choose(draw, ["truncate", "insert", "insert", "insert", "whole", "lines", "noise"])
    if how == "truncate":
        pos = between(draw, 0, len(text))
        text, detail = text[:pos], f"truncated at {pos}"
    elif how == "insert":
        pos = between(draw, 0, len(text))
        snippet = draw(st.one_of(st.sampled_from(SQL_SNIPPETS), st.text(max_size=10)))
        text, detail = text[:pos] + snippet + text[pos:], f"inserted {snippet!r} at {pos}"
    elif how == "whole":
        text = choose(draw, SQL_WHOLE)
        detail = f"replaced by {text!r}"
    elif how == "lines":
        lines = text.splitlines(keepends=True) or ["\n"]
        i = between(draw, 0, len(lines) - 1)
        op = choose(draw, ["delete", "duplicate", "swap"])
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        else:
            j = between(draw, 0, len(lines) - 1)
            lines[i], lines[j] = lines[j], lines[i]
        text, detail = "".join(lines), f"{op} line {i + 1}"
    else:
        chars = list(text) or [" "]
        for _ in range(between(draw, 1, 4)):
            i = between(draw, 0, len(chars) - 1)
            chars[i] = choose(draw, list("'\"(){}[];-/*%#\\`$?:\x00\n\t ü"))
        text, detail = "".join(chars), "character noise"
    tree[sql] = ("text", text)
    return f"{sql}: {detail}"


RUNTIME_EXPRS = [
    "error('fuzz: boom')", "CAST(CASE WHEN random() < 2 THEN 'x' END AS INTEGER)", "random()",
    "[1, 2][(random() * 0 + 5)::INT]", "(SELECT 1 UNION ALL SELECT 2)", "strptime('nope', '%Y')",
]  # fmt: skip


def runtime_failure(draw: Draw, tree: Tree) -> str:
    """Wrap a pipeline's query so that it binds (validate passes) and may fail only when it runs."""
    sql = _pick(draw, _text_files(tree, ".sql"))
    if sql is None:
        return "noop"
    lines = tree[sql][1].splitlines()
    head = [line for line in lines if line.lstrip().upper().startswith("INSERT INTO")]
    body = [line for line in lines if line not in head]
    expr = choose(draw, RUNTIME_EXPRS)
    text = "\n".join([*head, f"SELECT *, {expr} AS fz_extra FROM (", *body, ") AS fz_q", ""])
    tree[sql] = ("text", text)
    return f"{sql}: wrapped with {expr}"


# --- file-system oddities ---------------------------------------------------------------------------------


def _any_file(draw: Draw, tree: Tree) -> str | None:
    return _pick(draw, sorted(p for p, (k, _) in tree.items() if k in ("yaml", "text", "bytes")))


def fs_empty(draw: Draw, tree: Tree) -> str:
    path = _any_file(draw, tree)
    if path is None:
        return "noop"
    tree[path] = ("text", "")
    return f"{path}: empty"


def fs_binary(draw: Draw, tree: Tree) -> str:
    path = _any_file(draw, tree)
    if path is None:
        return "noop"
    blob = draw(st.one_of(st.sampled_from(BINARY_BLOBS), st.binary(min_size=1, max_size=64)))
    tree[path] = ("bytes", blob)
    return f"{path}: binary {blob[:16]!r}"


def fs_delete(draw: Draw, tree: Tree) -> str:
    path = _pick(draw, sorted(tree))
    if path is None:
        return "noop"
    del tree[path]
    return f"{path}: deleted"


def fs_file_to_dir(draw: Draw, tree: Tree) -> str:
    path = _any_file(draw, tree)
    if path is None:
        return "noop"
    tree[path] = ("dir", None)
    if chance(draw, 0.5):
        tree[path + "/inner.txt"] = ("text", "x")
    return f"{path}: a folder"


def fs_dir_to_file(draw: Draw, tree: Tree) -> str:
    folder = choose(draw, ["sources", "sinks", "pipelines", "data", ".pz", ".pz/runs", "out", "out/lake"])
    _remove_under(tree, folder)
    tree[folder] = choose(draw, [("text", "x"), ("text", ""), ("link", "/dev/null")])
    return f"{folder}: a file instead of a folder"


def fs_symlink(draw: Draw, tree: Tree) -> str:
    path = _pick(draw, [*sorted(tree), "pipelines/linked.sql", "sources/linked.yml", "pipelines/loopdir"])
    if path is None:
        return "noop"
    target = draw(st.one_of(st.sampled_from(SYMLINK_TARGETS), st.sampled_from(sorted(tree) or ["x"])))
    if target == "SELF":
        target = path.rsplit("/", 1)[-1]
    elif target == "LOOP":
        other = path + ".loop"
        tree[other] = ("link", path.rsplit("/", 1)[-1])
        target = other.rsplit("/", 1)[-1]
    elif not target.startswith("/") and target not in (".", ".."):
        target = "../" * path.count("/") + target  # relative to the link's folder
    _remove_under(tree, path)
    tree[path] = ("link", target)
    return f"{path}: symlink -> {target}"


def fs_fifo(draw: Draw, tree: Tree) -> str:
    path = _pick(draw, [*sorted(tree), "pipelines/fifo.sql", "sources/fifo.yml"])
    if path is None:
        return "noop"
    _remove_under(tree, path)
    tree[path] = ("fifo", None)
    return f"{path}: named pipe"


EXTRA_FILES = [
    "pipelines/ü.sql", "pipelines/.hidden.sql", "pipelines/a b.sql", "pipelines/x.SQL", "pipelines/1x.sql",
    "pipelines/select.sql", "pipelines/sub/totals.sql", "pipelines/orphan.yml", "pipelines/x.sql.yml",
    "sources/files.yaml", "sinks/wh.yaml", "sources/README.md", "pipelines/" + "p" * 250 + ".sql",
    "pipelines/a.b.sql", "project.yaml", "sinks/x.yml", "sources/x.yml", "pipelines/sub/deeper/more/x.sql",
    "pipelines/totals.yaml",
]  # fmt: skip


def fs_extra_file(draw: Draw, tree: Tree) -> str:
    path = choose(draw, EXTRA_FILES)
    content = draw(
        st.sampled_from(
            [
                "SELECT 1 AS a\n",
                "INSERT INTO {{ sink('wh', 'totals') }}\nSELECT 1 AS a\n",
                "connector: localfiles\nconnection: { root: data }\n",
                "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
                "checks: [{not_null: {columns: [a]}}]\n",
                "materialized: ephemeral\n",
                "",
                "connector: nope\n",
            ]
        )
    )
    tree[path] = ("text", content)
    return f"{path}: extra file {content!r}"


def fs_huge_file(draw: Draw, tree: Tree) -> str:
    path = choose(draw, ["project.yml", "pipelines/totals.sql", "sources/files.yml", "data/orders.csv"])
    size = choose(draw, [10 * 1024 * 1024 + 1, 11 * 1024 * 1024])
    if path.endswith(".csv"):
        tree[path] = (
            "text",
            "id,customer,amount,status,ordered_at\n" + "1,a,1.0,open,2026-01-01\n" * (size // 24),
        )
    else:
        tree[path] = ("text", "-- " + "x" * size + "\n")
    return f"{path}: {size} bytes"


# --- data files -----------------------------------------------------------------------------------------

CSV_VARIANTS = [
    "", "\n", "id,customer,amount,status,ordered_at\n", "1,ada,10.50,shipped,2026-01-01\n",
    "id,customer,amount,status,ordered_at\n1,ada\n",
    "id,customer,amount,status,ordered_at\n1,a,1,b,2026-01-01,x,y\n",
    "id;customer;amount;status;ordered_at\n1;a;1;b;2026-01-01\n",
    'id,customer,amount,status,ordered_at\n1,"ada,10.50,shipped,2026-01-01\n',
    "\ufeffid,customer,amount,status,ordered_at\n1,a,1,b,2026-01-01\n",
    "id,customer,amount,status,ordered_at\r\n1,a,1,b,2026-01-01\r\n",
    "id,customer,amount,status,ordered_at\n1,a\x00b,1,b,2026-01-01\n",
    "id,customer,amount,status,ordered_at\nabc,a,1,b,2026-01-01\n",
    "id,customer,amount,status,ordered_at\n99999999999999999999999,a,1,b,2026-01-01\n",
    "id,customer,amount,status,ordered_at\n1,a,123456789012.5,b,2026-01-01\n",
    "id,customer,amount,status,ordered_at\n1,a,1,b,2026-02-30\n",
    "id,customer,amount,status,ordered_at\n1,a,1,b,294247-01-10\n",
    "id,customer,amount,status,ordered_at\n1,a,NaN,b,2026-01-01\n",
    "id,customer,amount,status,ordered_at\n,,,,\n",
    "id,id,amount,status,ordered_at\n1,2,1,b,2026-01-01\n", ",,,,\n1,a,1,b,2026-01-01\n",
    "id,customer,amount,status,ordered_at\n1," + "x" * 1_000_000 + ",1,b,2026-01-01\n",
    ",".join(f"c{i}" for i in range(2000)) + "\n" + ",".join("1" * 2000) + "\n",
    "id,customer,amount,status,ordered_at\n" + "1,a,1,b,2026-01-01\n" * 20000,
]  # fmt: skip
JSON_VARIANTS = [
    "", "\n", "not json", "[]", "{}", "[1, 2]", "42", "null", '{"order_id": 1',
    '[{"order_id": 1, "kind": "x"}]',
    '{"order_id": NaN, "kind": "x", "at": "2026-01-01"}\n', '{"order_id": Infinity}\n',
    '{"order_id": 1e400, "kind": "x", "at": "2026-01-01"}\n',
    '{"order_id": "abc", "kind": 1, "at": "yesterday"}\n', '{"order_id": 1}\n{"kind": "x"}\n',
    '{"order_id": 99999999999999999999999, "kind": "x", "at": "2026-01-01"}\n',
    '{"order_id": 1, "kind": "\\ud800", "at": "2026-01-01"}\n', '{"a": {"b": {"c": [1, {"d": null}]}}}\n',
    '{"order_id": 1, "order_id": 2, "kind": "x", "at": "2026-01-01"}\n',
]  # fmt: skip


def data_csv(draw: Draw, tree: Tree) -> str:
    path = _pick(
        draw, sorted(p for p, (k, _) in tree.items() if p.endswith(".csv") and k in ("text", "bytes"))
    )
    if path is None:
        return "noop"
    if chance(draw, 0.2):
        blob = choose(draw, [b"id,customer\n1,\xe9t\xe9\n", b"\xff\xfei\x00d\x00\n\x00", b"\x00" * 100])
        tree[path] = ("bytes", blob)
        return f"{path}: bytes {blob[:16]!r}"
    text = choose(draw, CSV_VARIANTS)
    tree[path] = ("text", text)
    return f"{path}: csv {_short(text)}"


def data_json(draw: Draw, tree: Tree) -> str:
    path = _pick(draw, sorted(p for p in tree if p.endswith(".json") and p.startswith("data/")))
    if path is None:
        return "noop"
    if chance(draw, 0.25):
        depth = choose(draw, [50, 1000, 10000, 100000])
        text = '{"order_id": 1, "kind": "x", "at": "2026-01-01", "deep": ' + "[" * depth + "]" * depth + "}\n"
        detail = f"nested {depth} deep"
    else:
        text = choose(draw, JSON_VARIANTS)
        detail = _short(text)
    tree[path] = ("text", text)
    return f"{path}: json {detail}"


def data_parquet(draw: Draw, tree: Tree) -> str:
    path = _pick(draw, sorted(p for p in tree if p.endswith(".parquet")))
    if path is None:
        return "noop"
    kind, value = tree[path]
    how = choose(draw, ["truncate", "csv_text", "empty", "schema", "schema", "schema"])
    if how == "truncate" and kind == "bytes":
        cut = between(draw, 0, len(value))
        tree[path] = ("bytes", value[:cut])
        return f"{path}: truncated at {cut}"
    if how == "csv_text":
        tree[path] = ("text", "order_id,sku,qty\n1,a,1\n")
        return f"{path}: CSV text"
    if how == "empty":
        tree[path] = ("bytes", b"")
        return f"{path}: empty"
    variant = choose(draw, sorted(PARQUET_VARIANTS))
    tree[path] = ("bytes", _parquet(variant))
    return f"{path}: parquet {variant}"


PARQUET_VARIANTS = {
    "zero_rows", "missing_column", "extra_columns", "string_ids", "decimal_38", "nested", "tz_timestamps",
    "huge_timestamps", "null_type", "duplicate_names", "many_columns", "unicode_names",
}  # fmt: skip


def _parquet(variant: str) -> bytes:
    import datetime as dt
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    base: dict[str, Any] = {"order_id": pa.array([1, 2], pa.int64()), "sku": ["a", "b"], "qty": [1, 2]}
    if variant == "zero_rows":
        base = {
            "order_id": pa.array([], pa.int64()),
            "sku": pa.array([], pa.string()),
            "qty": pa.array([], pa.int32()),
        }
    elif variant == "missing_column":
        del base["qty"]
    elif variant == "extra_columns":
        base["extra"] = [1.5, None]
    elif variant == "string_ids":
        base["order_id"] = ["x", "y"]
    elif variant == "decimal_38":
        base["qty"] = pa.array([decimal.Decimal("1" * 28 + ".5"), None], pa.decimal128(38, 1))
    elif variant == "nested":
        base["qty"] = [{"a": [1, 2]}, {"a": None}]
    elif variant == "tz_timestamps":
        base["qty"] = pa.array([dt.datetime(2026, 1, 1, tzinfo=dt.UTC), None], pa.timestamp("us", "UTC"))
    elif variant == "huge_timestamps":
        base["qty"] = pa.array([-(2**62), 2**62], pa.timestamp("ns"))
    elif variant == "null_type":
        base["qty"] = pa.array([None, None], pa.null())
    elif variant == "many_columns":
        base.update({f"c{i}": [i, i] for i in range(1500)})
    elif variant == "unicode_names":
        base['ü 🙂 "q"'] = [1, 2]
    if variant == "duplicate_names":
        table = pa.Table.from_arrays([pa.array([1, 2]), pa.array([3, 4])], names=["order_id", "order_id"])
    else:
        table = pa.table(base)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def contract_drop(draw: Draw, tree: Tree) -> str:
    pick = _pick(draw, _datasets(tree))
    if pick is None:
        return "noop"
    path, name = pick
    ds = tree[path][1]["datasets"][name]
    if isinstance(ds, dict):
        ds.pop("columns", None)
    return f"{path}: datasets.{name} without columns (inferred)"


def dataset_path(draw: Draw, tree: Tree) -> str:
    pick = _pick(draw, _datasets(tree))
    if pick is None:
        return "noop"
    path, name = pick
    ds = tree[path][1]["datasets"][name]
    if not isinstance(ds, dict):
        return "noop"
    key = choose(draw, ["path", "format", "delimiter", "header", "quote", "null", "files_per_partition"])
    value = draw(
        st.one_of(
            st.sampled_from(
                {
                    "path": ["*.csv", "**/*", "nope.csv", "../../etc/passwd", "/etc/hostname", ".", "*",
                             "[", "orders.csv/", "data/orders.csv", "*.parquet", "{a,b}.csv",
                             "../project.yml"],
                    "format": ["csv", "json", "parquet", "tsv", "xlsx", ""],
                    "delimiter": [";", "\t", "", ",,", "\x00", "'"],
                    "header": [False, True, "yes"],
                    "quote": ["", "'", '"', "ab"],
                    "null": ["", "NULL", "ada", "\\N"],
                    "files_per_partition": [1, 0, -1, 10**9],
                }[key]
            ),
            odd_values(),
        )
    )  # fmt: skip
    ds[key] = value
    return f"{path}: datasets.{name}.{key} = {_short(value)}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:60] + f"... ({len(text)} chars)"


# --- cases ------------------------------------------------------------------------------------------------

MUTATIONS: list[Callable[[Draw, Tree], str]] = [
    yaml_drop_key, yaml_drop_key, yaml_rename_key, yaml_wrong_type, yaml_wrong_type, yaml_add_key,
    yaml_deep_nest, yaml_text_break, yaml_text_break, yaml_top_level,
    contract_type, contract_type, var_types, durations, checks, checks, materialization, output_options,
    output_options, rename_pipeline, rename_dataset, rename_output, rename_instance, rename_column,
    sql_edit, sql_edit, sql_edit, sql_edit,
    fs_empty, fs_binary, fs_delete, fs_file_to_dir, fs_dir_to_file, fs_symlink, fs_symlink, fs_extra_file,
    data_csv, data_csv, data_csv, data_csv, data_json, runtime_failure, runtime_failure, runtime_failure,
    data_parquet, contract_drop, contract_drop, dataset_path,
]  # fmt: skip
RARE_MUTATIONS: list[Callable[[Draw, Tree], str]] = [fs_fifo, fs_huge_file]
SURFACE_CHANCE = 0.25  # cases that also get an issue-20 surface


@st.composite
def cases(hdraw: Callable[..., Any]) -> Case:
    """A seed project, zero to three mutations, and a command line (`validate`, `plan` or `run`)."""
    draw = Drawer(hdraw, hdraw(st.randoms(use_true_random=True)))
    seed = choose(draw, ["tiny", "tiny", "shop", "shop", "quickstart"])
    tree = SEEDS[seed]()
    prelude = copy.deepcopy(tree) if chance(draw, 0.1) else None
    described = []
    for _ in range(choose(draw, [0, 1, 1, 1, 2, 2, 3])):
        op = choose(draw, RARE_MUTATIONS if chance(draw, 0.01) else MUTATIONS)
        described.append(f"{op.__name__}: {op(draw, tree)}")
    glob = ["--log-format", "json"] if chance(draw, 0.08) else []
    tail = ["--log-format", "json"] if chance(draw, 0.03) else []
    first = choose(draw, ["validate"] * 7 + ["plan"] + ["run"] * 12)
    run_flags: list[str] = []
    if chance(draw, 0.2):
        for _ in range(between(draw, 1, 2)):
            run_flags += choose(draw, RUN_FLAGS)
    env = dict(ENV)
    env_change = choose(draw, ["keep"] * 44 + ["drop", "short", "long", "odd"])
    if env_change == "drop":
        env.pop("FZ_TOKEN")
    elif env_change != "keep":
        env["FZ_TOKEN"] = {"short": "ab", "long": "k" * 5000, "odd": "'; DROP TABLE x; --\u00fc\x01"}[
            env_change
        ]
    run = [*glob, "run", *run_flags, *tail]
    case = Case(
        seed=seed,
        tree=tree,
        mutations=described + ([f"env FZ_TOKEN: {env_change}"] if env_change != "keep" else []),
        first=run if first == "run" else [*glob, first, *tail],
        then=None if first == "run" else run,
        force_then=chance(draw, 0.05),
        env=env,
        prelude=prelude,
    )
    if chance(draw, SURFACE_CHANCE):
        op = choose(draw, SURFACES)
        if chance(draw, 0.5):  # the surface alone on the clean seed, so that it reaches the run
            case.tree = tree = SEEDS[seed]()
            case.prelude = None
            case.mutations = [m for m in case.mutations if m.startswith("env ")]
        surface = op(draw, tree)
        case.mutations.append(f"{op.__name__}: {surface.description}")
        if surface.prelude is not None:
            case.prelude = surface.prelude
        if surface.first is not None:
            case.first, case.then, case.force_then = surface.first, surface.then, surface.force_then
        case.signal = surface.signal
    return case
