"""Fuzz generators for the surfaces of issue 20: incremental cursors and watermark() expressions, outputs
whose paths overlap sources or project folders, http APIs that misbehave, and signals sent during a run.

Each generator adds its own small flow to the project (files named `fz_*`), so it composes with the seed and
with whatever the other mutations did to it, and returns a `Surface`: what it did, and, when the case needs
it, a prelude (a run before the case's own commands: an existing watermark, existing outputs), the commands
and the signal. Values are drawn with the case's `Drawer`, so a case is reproducible from hypothesis'
choices alone; every choice that could make pz wait (Retry-After, trickle, a slow query) is bounded.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.fuzz.misbehaving_http import BEHAVIOURS
from tests.fuzz.seeds import Tree

Draw = Any  # tests.fuzz.mutations.Drawer (not imported: mutations imports this module)

HTTP = "__FZ_HTTP__"  # replaced by the case's base URL on the misbehaving server
ROOT = "__FZ_ROOT__"  # replaced by the project folder's absolute path


@dataclass
class Surface:
    description: str
    prelude: Tree | None = None  # a tree `pz run` runs once before the case's own (state, outputs)
    first: list[str] | None = None  # the case's first command, when the surface decides it
    then: list[str] | None = None
    force_then: bool = False
    signal: list[Any] | None = None  # [signal name, "startup" or seconds after the first node line]


def _choose(draw: Draw, items: list[Any]) -> Any:
    return items[int(draw.rng.random() * len(items))]


def _chance(draw: Draw, p: float) -> bool:
    return bool(draw.rng.random() < p)


def _yaml_doc(tree: Tree, path: str) -> dict[str, Any] | None:
    kind, doc = tree.get(path, ("", None))
    return doc if kind == "yaml" and isinstance(doc, dict) else None


def _declare_secret(tree: Tree) -> bool:
    """Declare FZ_TOKEN as a secret env var in project.yml; False when project.yml is not a mapping."""
    doc = _yaml_doc(tree, "project.yml")
    if doc is None:
        return False
    env = doc.get("env")
    if not isinstance(env, dict):
        env = doc["env"] = {}
    env["FZ_TOKEN"] = {"required": True, "secret": True}
    return True


def _out_sink(tree: Tree, outputs: dict[str, Any]) -> None:
    """sinks/fz_out.yml: a DuckDB file of the surface's own, with `outputs` added to it."""
    doc = _yaml_doc(tree, "sinks/fz_out.yml")
    if doc is None:
        doc = {"connector": "duckdb", "connection": {"path": "out/fz.duckdb"}, "outputs": {}}
        tree["sinks/fz_out.yml"] = ("yaml", doc)
    doc["outputs"].update(outputs)


ROWS_CSV = "id,ts,n\n1,2026-01-01 10:00:00,10\n2,2026-01-02 10:00:00,20\n3,2026-01-03 10:00:00,30\n"


def _rows_source(tree: Tree) -> None:
    """sources/fz_src.yml reading fz_data/rows.csv."""
    tree["sources/fz_src.yml"] = (
        "yaml",
        {
            "connector": "localfiles",
            "connection": {"root": "fz_data"},
            "datasets": {
                "rows": {
                    "format": "csv",
                    "path": "rows.csv",
                    "columns": {"id": "bigint", "ts": "timestamp", "n": "bigint"},
                }
            },
        },
    )
    tree["fz_data/rows.csv"] = ("text", ROWS_CSV)


# --- incremental cursors and watermark() expressions ---------------------------------------------------

CURSOR_TYPES = ["timestamp", "timestamp", "date", "bigint", "decimal(18,3)"]  # the allowed ones (PZ0227)
ODD_CURSOR_TYPES = ["timestamptz", "double", "varchar", "interval", "time"]
GOOD_VALUES = {
    "timestamp": ["2026-01-01 10:00:00", "2026-01-02 10:00:00", "2026-01-03 10:00:00.5", "2026-01-04"],
    "date": ["2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04"],
    "bigint": ["1", "2", "3", "4"],
    "decimal(18,3)": ["1.5", "2.25", "3.125", "4"],
}
ODD_VALUES = {  # values of the cursor's own type at its edges, NULLs, and offsets DuckDB reads as UTC
    "timestamp": [
        "", "infinity", "-infinity", "2026-01-01 10:00:00+05:30", "2026-01-01T10:00:00Z",
        "2026-01-03 10:00:00.123456789", "epoch", "294247-01-10 04:00:54", "9999-12-31 23:59:59.999999",
        "0001-01-01", "2026-01-02 10:00:00-12:00",
    ],
    "date": ["", "infinity", "-infinity", "9999-12-31", "0001-01-01", "5877642-06-25", "epoch"],
    "bigint": ["", "9223372036854775807", "-9223372036854775808", "0", "-1"],
    "decimal(18,3)": ["", "999999999999999.999", "-0.0005", "0.0005", "1e3"],
}  # fmt: skip
ODD_CURSOR_VALUES = [  # values that don't fit the type at all
    "NaN", "2026-02-30", "99999999999999999999", "1e30", "yesterday", "2026-01-01 25:00:00",
]  # fmt: skip
GOOD_STARTS: dict[str, list[Any]] = {
    "timestamp": ["2026-01-01", "2026-01-01 00:00:00", "2026-01-02 10:00:00+02", "2026-01-01T00:00:00Z",
                  "-infinity", "infinity", "0001-01-01", "{{ var('since') }}"],
    "date": ["2026-01-01", "2025-12-31", "-infinity", "infinity", "{{ var('since') }}"],
    "bigint": [0, 1, -9223372036854775808, 9223372036854775807, "2"],
    "decimal(18,3)": [0, 1.5, "2.25", -1],
}  # fmt: skip
ODD_STARTS: list[Any] = [
    "epoch", "now", "", None, 2**63, "1e30", "2026-13-01", "{{ var('nope') }}", "'; DROP TABLE x; --",
    "294247-01-10", [1], {"a": 1}, True, "2026-01-01 10:00:00 Europe/Paris",
]  # fmt: skip
DURATIONS = {"date": ["1d", "2d", "1d"], "timestamp": ["1d", "1h", "30m", "2d", "1ms"]}
ODD_DURATIONS: list[Any] = ["0s", "-1d", "36500d", "1y", "", 5, "1h", "1.5d"]
WATERMARK = "{{ watermark('fz_inc', 'ticks') }}"
GOOD_EXPRS = {
    "timestamp": [WATERMARK, f"{WATERMARK} - INTERVAL '1 day'", f"{WATERMARK} - INTERVAL 1 HOUR",
                  f"{WATERMARK} + INTERVAL '1 month'", f"{WATERMARK} - INTERVAL '-5 minutes'",
                  f"{WATERMARK} - INTERVAL '1000000 years'", f"{WATERMARK} - INTERVAL '100000000 days'",
                  f"coalesce({WATERMARK}, TIMESTAMP '2020-01-01')", f"date_trunc('day', {WATERMARK})",
                  f"({WATERMARK})", f"{WATERMARK}::TIMESTAMP", f"{WATERMARK} - to_days(2)"],
    "date": [WATERMARK, f"{WATERMARK} - INTERVAL '1 day'", f"{WATERMARK} - 1", f"CAST({WATERMARK} AS DATE)",
             f"{WATERMARK} + INTERVAL '1000000 years'", f"{WATERMARK} - INTERVAL 2 DAY"],
    "bigint": [WATERMARK, f"{WATERMARK} - 1", f"{WATERMARK} - 9223372036854775807", f"{WATERMARK} * 2",
               f"abs({WATERMARK})"],
    "decimal(18,3)": [WATERMARK, f"{WATERMARK} - 0.5", f"{WATERMARK} + 1e20", f"round({WATERMARK}, 1)"],
}  # fmt: skip
ODD_EXPRS = [
    f"{WATERMARK} - INTERVAL (1) DAY", f"{WATERMARK} || 'x'", f"{WATERMARK} - INTERVAL 'infinity'",
    "{{ watermark('fz_inc', 'nope') }}", "{{ watermark('fz_inc') }}", f"CAST({WATERMARK} AS VARCHAR)",
    "{{ watermark('fz_inc', 'ticks', 'x') }}", f"{WATERMARK} + n",
]  # fmt: skip
ODD_SIDES = ["t.ts", "id", "n + 1", "CAST(ts AS DATE)", "nope", "TS", '"at"']
INC_OUTPUTS: list[dict[str, Any]] = [
    {"strategy": "merge", "keys": ["id"]},
    {"strategy": "merge", "keys": ["id"]},
    {"strategy": "append", "duplicates": "accept"},
    {"strategy": "append"},
    {"strategy": "replace"},
]


def _cursor_csv(draw: Draw, typ: str, rows: int, hostile: bool) -> str:
    good = GOOD_VALUES.get(typ, GOOD_VALUES["timestamp"])
    values = [good[i % len(good)] for i in range(rows)]
    for _ in range(_choose(draw, [0, 1, 1, 2])):
        odd = ODD_CURSOR_VALUES if hostile and _chance(draw, 0.5) else ODD_VALUES.get(typ, [""])
        values[int(draw.rng.random() * rows)] = _choose(draw, odd)
    lines = [f'{i + 1},"{v}",{i * 10}\n' if v else f"{i + 1},,{i * 10}\n" for i, v in enumerate(values)]
    return "id,ts,n\n" + "".join(lines)


def _sync(draw: Draw, typ: str, hostile: bool) -> dict[str, Any]:
    """A YAML `sync:` block: well formed for the cursor's type, or (hostile) not."""
    sync: dict[str, Any] = {"mode": "incremental", "cursor": "ts"}
    if hostile:
        sync["mode"] = _choose(draw, ["incremental"] * 4 + ["full", "nope"])
        sync["cursor"] = _choose(draw, ["ts", "ts", "id", "n", "nope", "TS"])
    if _chance(draw, 0.6):
        starts = GOOD_STARTS.get(typ, []) + (ODD_STARTS if hostile else [])
        sync["start"] = _choose(draw, starts or ODD_STARTS)
    durations = DURATIONS.get(typ, []) + (ODD_DURATIONS if hostile else [])
    if durations and ("start" in sync or hostile) and _chance(draw, 0.3):
        sync["window"] = _choose(draw, durations)
    if durations and _chance(draw, 0.3):
        sync["lag"] = _choose(draw, durations)
    return sync


def _watermark_filter(draw: Draw, typ: str, hostile: bool) -> str:
    """A pipeline's WHERE clause comparing the cursor to a watermark() expression."""
    side, op = "ts", _choose(draw, [">", ">", ">="])
    exprs = GOOD_EXPRS.get(typ, [WATERMARK])
    if hostile:
        side = _choose(draw, ["ts", *ODD_SIDES])
        op = _choose(draw, [">", ">=", "<", "=", "<>"])
        exprs = exprs + ODD_EXPRS
    expr = _choose(draw, exprs)
    shapes = [
        f"WHERE {side} {op} {expr}\n",
        f"WHERE n >= 0 AND {side} {op} {expr}\n",
        f"WHERE {side} {op} {expr} OR n IS NULL\n",
    ]
    return str(_choose(draw, shapes + ([f"WHERE {expr} < {side}\n"] if hostile else [])))


def incremental(draw: Draw, tree: Tree) -> Surface:
    """An incremental dataset (YAML `sync:` or SQL `watermark()`) whose cursor holds edge values (infinity,
    timestamps with offsets, NULLs, the type's limits), run after a first run that committed a watermark
    most of the time. Half the cases are well formed (they run); the other half are hostile (odd cursor
    types, starts, windows and expressions: refused with a code, or failed with one)."""
    hostile = _chance(draw, 0.4)
    typ = _choose(draw, CURSOR_TYPES + (ODD_CURSOR_TYPES if hostile else []))
    rows = _choose(draw, [3, 4, 6])
    dataset: dict[str, Any] = {"format": "csv", "path": "ticks.csv"}
    if not hostile or _chance(draw, 0.8):
        dataset["columns"] = {"id": "bigint", "ts": typ, "n": "bigint"}
    sql_route = _chance(draw, 0.35)
    if not sql_route or (hostile and _chance(draw, 0.2)):  # both routes at once is PZ0225
        dataset["sync"] = _sync(draw, typ, hostile)
    tree["sources/fz_inc.yml"] = (
        "yaml",
        {"connector": "localfiles", "connection": {"root": "fz_data"}, "datasets": {"ticks": dataset}},
    )
    where = _watermark_filter(draw, typ, hostile) if sql_route else ""
    output = copy.deepcopy(_choose(draw, INC_OUTPUTS[:3] + (INC_OUTPUTS[3:] if hostile else [])))
    _out_sink(tree, {"ticks": {"table": "main.ticks", **output}})
    tree["pipelines/fz_ticks.sql"] = (
        "text",
        "INSERT INTO {{ sink('fz_out', 'ticks') }}\n"
        f"SELECT t.* FROM {{{{ source('fz_inc', 'ticks') }}}} AS t\n{where}",
    )
    tree["fz_data/ticks.csv"] = ("text", _cursor_csv(draw, typ, rows, hostile))
    prelude = None
    if _chance(draw, 0.7):  # a first run commits a watermark over the first rows only
        prelude = copy.deepcopy(tree)
        head = tree["fz_data/ticks.csv"][1].splitlines(keepends=True)
        prelude["fz_data/ticks.csv"] = ("text", "".join(head[: 1 + _choose(draw, [1, 2, 2])]))
    route = f"sql: {where.strip()}" if sql_route else f"yaml sync: {dataset.get('sync')}"
    return Surface(
        f"incremental{' (hostile)' if hostile else ''} {typ} cursor, {route}, output {output}, "
        f"data {tree['fz_data/ticks.csv'][1]!r}{', after a first run' if prelude else ''}",
        prelude=prelude,
    )


# --- outputs that overlap sources and project folders --------------------------------------------------

LAKE_ROOTS = [
    "fz_data", "fz_data", ".", ".", "pipelines", "sources", "sinks", ".pz", ".pz/runs", "out/../fz_data",
    "fz_data/sub", ROOT, f"{ROOT}/fz_data", "..", "out", "data",
]  # fmt: skip
LAKE_PATHS = [
    None, "rows.csv", "rows.csv", "pipelines", "sources", "project.yml", "fz_data", "fz_data/rows.csv",
    "fz_copy.sql", ".", "..", "out", ".pz", "state.duckdb", "runs", "rows.csv/inner.csv",
]  # fmt: skip
DB_PATHS = [
    "fz_data/rows.csv", "project.yml", ".pz/state.duckdb", ".pz/lock", "pipelines", "fz_data",
    "out/wh.duckdb", "out/fz.duckdb", "pipelines/fz_copy.sql", f"{ROOT}/sources/fz_src.yml", ".",
    ".pz/runs/x.duckdb", "sinks/fz_db.yml",
]  # fmt: skip


def overlapping_output(draw: Draw, tree: Tree) -> Surface:
    """A sink whose output lands on a source's file, a project folder or pz's own state; or a source that
    reads what a sink writes. Runs after a prelude run half the time (the target then exists)."""
    _rows_source(tree)
    how = _choose(draw, ["lake", "lake", "duckdb", "reads_output"])
    if how == "lake":
        output: dict[str, Any] = {"format": _choose(draw, ["csv", "csv", "parquet", "json"])}
        path = _choose(draw, LAKE_PATHS)
        if path is not None:
            output["path"] = path
        output["strategy"] = _choose(draw, ["replace", "replace", "append"])
        root = _choose(draw, LAKE_ROOTS)
        name = _choose(draw, ["rows", "fz_copy", "pipelines", "project"])
        tree["sinks/fz_lake.yml"] = (
            "yaml",
            {"connector": "localfiles", "connection": {"root": root}, "outputs": {name: output}},
        )
        target, detail = f"'fz_lake', '{name}'", f"localfiles root {root!r}, output {name} {output}"
    elif how == "duckdb":
        path = _choose(draw, DB_PATHS)
        tree["sinks/fz_db.yml"] = (
            "yaml",
            {"connector": "duckdb", "connection": {"path": path}, "outputs": {"copy": {}}},
        )
        target, detail = "'fz_db', 'copy'", f"duckdb path {path!r}"
    else:  # a source whose root is where a sink writes
        _out_sink(tree, {"copy": {"table": "main.copy"}})
        reader = _choose(draw, ["duckdb", "localfiles"])
        if reader == "duckdb":
            ds = {"fz_back": {"connector": "duckdb", "connection": {"path": "out/fz.duckdb"},
                              "datasets": {"back": {"table": "main.copy"}}}}  # fmt: skip
        else:
            ds = {"fz_back": {"connector": "localfiles", "connection": {"root": "out"},
                              "datasets": {"back": {"format": "csv", "path": "**/*.csv"}}}}  # fmt: skip
        tree["sources/fz_back.yml"] = ("yaml", ds["fz_back"])
        tree["pipelines/fz_back.sql"] = (
            "text",
            "INSERT INTO {{ sink('fz_out', 'back') }}\nSELECT * FROM {{ source('fz_back', 'back') }}\n",
        )
        target, detail = "'fz_out', 'copy'", f"a {reader} source reading out/ (where sinks write)"
    tree["pipelines/fz_copy.sql"] = (
        "text",
        f"INSERT INTO {{{{ sink({target}) }}}}\nSELECT * FROM {{{{ source('fz_src', 'rows') }}}}\n",
    )
    prelude = copy.deepcopy(tree) if _chance(draw, 0.5) else None
    return Surface(f"overlapping output: {detail}{', after a first run' if prelude else ''}", prelude=prelude)


# --- http APIs that misbehave -------------------------------------------------------------------------

PAGINATION: list[dict[str, Any] | None] = [
    {"style": "cursor", "cursor_path": "next", "cursor_param": "cursor"},
    {"style": "cursor", "cursor_path": "next", "cursor_param": "cursor"},
    {"style": "page", "page_param": "page", "size_param": "per_page", "size": 2},
    {"style": "offset", "limit": 2},
    {"style": "link"},
    None,
]


def _behaviour(draw: Draw) -> list[str]:
    family = _choose(draw, sorted(BEHAVIOURS))
    return [family, *_choose(draw, BEHAVIOURS[family])]


def misbehaving_http(draw: Draw, tree: Tree) -> Surface:
    """An http source (or, a quarter of the time, sink) on a loopback API that redirects, paginates
    forever, throttles with odd Retry-After values, trickles, answers garbage or fails."""
    behaviour = _behaviour(draw)
    secret = _declare_secret(tree) and _chance(draw, 0.8)
    connection: dict[str, Any] = {"base_url": HTTP, "timeout": _choose(draw, ["1s", "1s", "2s"])}
    if secret:
        connection["headers"] = {"Authorization": "Bearer {{ env('FZ_TOKEN') }}"}
    # a long Retry-After with a second attempt would wait that long: give such a case one attempt
    long_wait = behaviour[0] == "throttle" and behaviour[2] in ("99999999999999999999", "3600")
    attempts = 1 if long_wait else _choose(draw, [1, 2, 2, 3])
    retry = {"max_attempts": attempts, "base_delay": "10ms", "max_delay": "200ms"}
    path = "/".join(behaviour)
    if _chance(draw, 0.75):
        dataset: dict[str, Any] = {"path": path, "records": _choose(draw, ["data"] * 5 + ["$.data", "nope"])}
        pagination = copy.deepcopy(_choose(draw, PAGINATION))
        if pagination is not None:
            if _chance(draw, 0.3):
                pagination["max_pages"] = _choose(draw, [1, 3, 50, 0, -1])
            dataset["pagination"] = pagination
        if _chance(draw, 0.5):
            dataset["columns"] = {"id": "bigint", "at": "timestamp", "n": "bigint"}
        tree["sources/fz_api.yml"] = (
            "yaml",
            {"connector": "http", "connection": connection, "retry": retry, "datasets": {"items": dataset}},
        )
        _out_sink(tree, {"api_rows": {"table": "main.api_rows"}})
        tree["pipelines/fz_api_rows.sql"] = (
            "text",
            "INSERT INTO {{ sink('fz_out', 'api_rows') }}\nSELECT * FROM {{ source('fz_api', 'items') }}\n",
        )
        return Surface(f"http source {path}, pagination {pagination}, {attempts} attempt(s)")
    _rows_source(tree)
    output = {
        "path": path,
        "strategy": "append",
        "duplicates": "accept",
        "batch_size": _choose(draw, [1, 2, 1000]),
        "format": _choose(draw, ["json", "ndjson"]),
        "method": _choose(draw, ["POST", "POST", "PUT", "PATCH"]),
    }
    tree["sinks/fz_api.yml"] = (
        "yaml",
        {"connector": "http", "connection": connection, "retry": retry, "outputs": {"events": output}},
    )
    tree["pipelines/fz_to_api.sql"] = (
        "text",
        "INSERT INTO {{ sink('fz_api', 'events') }}\n"
        "SELECT * FROM {{ source('fz_src', 'rows') }} ORDER BY id\n",
    )
    return Surface(f"http sink {path}, output {output}, {attempts} attempt(s)")


# --- signals during a run -----------------------------------------------------------------------------

SIGNAL_DELAYS: list[float | str] = ["startup", 0.0, 0.0, 0.3, 1.0]  # see guards.run_signalled


def signalled_run(draw: Draw, tree: Tree) -> Surface:
    """`pz run` as its own process, sent SIGTERM or SIGINT as it starts or a drawn delay after the run's
    first node line, with a slow node so that the signal lands while something runs; then another command
    on the same project (the lock must be free, the records readable)."""
    slow = _choose(draw, ["http", "http", "sql"])
    if slow == "http":
        tree["sources/fz_slow.yml"] = (
            "yaml",
            {
                "connector": "http",
                "connection": {"base_url": HTTP, "timeout": "5s"},
                "retry": {"max_attempts": 1},
                "datasets": {"items": {"path": "trickle/full", "records": "data",
                                       "pagination": {"style": "cursor", "cursor_path": "next"}}},
            },
        )  # fmt: skip
        query = "SELECT * FROM {{ source('fz_slow', 'items') }}"
    else:  # a query that keeps DuckDB busy for a second or a few (under load): the signal lands while
        # it runs, and a later `pz retry` that runs it again still ends well within the command's time limit
        query = "SELECT count(*) AS n FROM range(8000) a, range(8000) b WHERE (a.range + b.range) % 7 = 3"
    _out_sink(tree, {"slow": {"table": "main.slow"}})
    tree["pipelines/fz_slow.sql"] = ("text", "INSERT INTO {{ sink('fz_out', 'slow') }}\n" + query + "\n")
    sig = _choose(draw, ["SIGTERM", "SIGTERM", "SIGINT"])
    delay = _choose(draw, SIGNAL_DELAYS)
    then = _choose(draw, [["run"], ["run"], ["retry"], ["runs"]])
    return Surface(
        f"{sig} {'at startup' if delay == 'startup' else f'{delay}s after the first node line'}, "
        f"slow node: {slow}; then pz {' '.join(then)}",
        first=["run"],
        then=then,
        force_then=True,
        signal=[sig, delay],
    )


SURFACES: list[Callable[[Draw, Tree], Surface]] = [
    incremental, incremental, incremental, overlapping_output, overlapping_output, misbehaving_http,
    misbehaving_http, signalled_run,
]  # fmt: skip
