"""Valid project trees the fuzzer starts from. Each runs cleanly (exit 0) on local files and DuckDB only.

A tree maps a project-relative POSIX path to an entry:
  ("yaml", obj)  a YAML file, kept as data so mutations can work on its structure
  ("text", str)  a text file (SQL, CSV, JSON lines, or YAML already turned into text)
  ("bytes", b)   raw bytes (Parquet, binary junk)
  ("link", tgt)  a symbolic link to `tgt` (relative to the link's folder, or absolute)
  ("dir", None)  an empty folder
  ("fifo", None) a named pipe
"""

from __future__ import annotations

import copy
import functools
import io
from pathlib import Path
from typing import Any

Entry = tuple[str, Any]
Tree = dict[str, Entry]

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "examples" / "quickstart"

ENV = {"FZ_TOKEN": "s3cr3t-t0ken-value", "FZ_REGION": "eu"}

ORDERS_CSV = (
    "id,customer,amount,status,ordered_at\n"
    "1,ada,10.50,shipped,2026-01-01\n"
    "2,grace,20.00,open,2026-01-02\n"
    "3,ada,5.25,shipped,2026-01-03\n"
    '4,"O\'Brien, Siobhán",7.00,returned,2026-01-04\n'
)
CUSTOMERS_CSV = 'customer,country\nada,GB\ngrace,US\n"O\'Brien, Siobhán",IE\n'
EVENTS_JSON = (
    '{"order_id": 1, "kind": "shipped", "at": "2026-01-05 10:00:00"}\n'
    '{"order_id": 2, "kind": "created", "at": "2026-01-05 11:00:00"}\n'
    '{"order_id": 3, "kind": "shipped", "at": "2026-01-06 12:00:00"}\n'
)


@functools.cache
def items_parquet() -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "order_id": pa.array([1, 1, 2, 3], pa.int64()),
            "sku": pa.array(["a-1", "b-2", "a-1", "c-3"]),
            "qty": pa.array([1, 2, 3, 4], pa.int32()),
        }
    )
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def tiny() -> Tree:
    return {
        "project.yml": ("yaml", {"name": "tiny"}),
        "sources/files.yml": (
            "yaml",
            {
                "connector": "localfiles",
                "connection": {"root": "data"},
                "datasets": {
                    "orders": {
                        "format": "csv",
                        "path": "orders.csv",
                        "columns": {
                            "id": "bigint",
                            "customer": "varchar",
                            "amount": "decimal(10,2)",
                            "status": "varchar",
                            "ordered_at": "date",
                        },
                    }
                },
            },
        ),
        "sinks/wh.yml": (
            "yaml",
            {
                "connector": "duckdb",
                "connection": {"path": "out/wh.duckdb"},
                "outputs": {"totals": {"table": "main.totals"}},
            },
        ),
        "pipelines/totals.sql": (
            "text",
            "INSERT INTO {{ sink('wh', 'totals') }}\n"
            "SELECT customer, sum(amount) AS total\n"
            "FROM {{ source('files', 'orders') }}\n"
            "GROUP BY customer\n",
        ),
        "data/orders.csv": ("text", ORDERS_CSV),
    }


def shop() -> Tree:
    """Every feature the core has on local files: vars, env, retry, checks, ephemeral, three strategies."""
    return {
        "project.yml": (
            "yaml",
            {
                "name": "shop",
                "vars": {
                    "min_amount": {"type": "decimal", "default": "0"},
                    "since": {"type": "date", "default": "2024-01-01"},
                    "label": {"type": "string", "default": "x"},
                    "top_n": {"type": "int", "default": 100},
                    "strict": {"type": "bool", "default": True},
                },
                "env": {
                    "FZ_TOKEN": {"required": True, "secret": True},
                    "FZ_REGION": {"default": "eu"},
                },
                "engine": {
                    "threads": 2,
                    "fail_fast": False,
                    "retry": {"max_attempts": 1, "base_delay": "10ms", "max_delay": "20ms"},
                },
                "retention": {"keep_last": 2},
            },
        ),
        "sources/files.yml": (
            "yaml",
            {
                "connector": "localfiles",
                "connection": {"root": "data"},
                "retry": {"max_attempts": 1},
                "datasets": {
                    "orders": {
                        "format": "csv",
                        "path": "orders.csv",
                        "columns": {
                            "id": "bigint",
                            "customer": "varchar",
                            "amount": "decimal(10,2)",
                            "status": "varchar",
                            "ordered_at": "date",
                        },
                        "checks": [{"not_null": {"columns": ["id"]}}],
                    },
                    "customers": {"path": "customers.csv"},
                    "events": {
                        "format": "json",
                        "path": "events.json",
                        "columns": {"order_id": "bigint", "kind": "varchar", "at": "timestamp"},
                    },
                    "items": {
                        "format": "parquet",
                        "path": "items.parquet",
                        "columns": {"order_id": "bigint", "sku": "varchar", "qty": "integer"},
                    },
                },
            },
        ),
        "sinks/wh.yml": (
            "yaml",
            {
                "connector": "duckdb",
                "connection": {"path": "out/wh.duckdb"},
                "max_concurrency": 1,
                "outputs": {
                    "totals": {"table": "main.totals", "strategy": "replace"},
                    "merged": {"strategy": "merge", "keys": ["id"]},
                    "log": {"strategy": "append", "table": "audit.log"},
                },
            },
        ),
        "sinks/lake.yml": (
            "yaml",
            {
                "connector": "localfiles",
                "connection": {"root": "out/lake"},
                "outputs": {"enriched": {"format": "csv"}, "shipped": {"format": "json"}},
            },
        ),
        "pipelines/enriched.sql": (
            "text",
            "-- orders with their customer's country\n"
            "INSERT INTO {{ sink('lake', 'enriched') }}\n"
            "SELECT o.id, o.customer, o.amount, o.status, o.ordered_at, c.country\n"
            "FROM {{ source('files', 'orders') }} AS o\n"
            "LEFT JOIN {{ source('files', 'customers') }} AS c ON c.customer = o.customer\n"
            "WHERE o.amount >= {{ var('min_amount') }} AND o.ordered_at >= {{ var('since') }}\n",
        ),
        "pipelines/enriched.yml": (
            "yaml",
            {
                "description": "Orders joined to their customer.",
                "tags": ["daily"],
                "checks": [
                    {"not_null": {"columns": ["id", "customer"]}},
                    {"unique": {"columns": ["id"]}},
                    {"accepted_values": {"column": "status", "values": ["open", "shipped", "returned"]}},
                    {"row_count": {"min": 1, "max": 1000}},
                    {"expression": {"sql": "amount >= 0", "name": "non_negative"}},
                    {"freshness": {"column": "ordered_at", "max_age": "36500d"}, "severity": "warn"},
                ],
            },
        ),
        "pipelines/totals.sql": (
            "text",
            "INSERT INTO {{ sink('wh', 'totals') }}\n"
            "SELECT country, count(*) AS orders, sum(amount) AS revenue, {{ env('FZ_REGION') }} AS region\n"
            "FROM {{ ref('enriched') }}\n"
            "GROUP BY ALL\n"
            "ORDER BY revenue DESC\n"
            "LIMIT {{ var('top_n') }}\n",
        ),
        "pipelines/totals.yml": (
            "yaml",
            {"checks": [{"relationships": {"column": "country", "to": "enriched", "field": "country"}}]},
        ),
        "pipelines/merged.sql": (
            "text",
            "INSERT INTO {{ sink('wh', 'merged') }}\n"
            "SELECT id, amount, status FROM {{ source('files', 'orders') }}\n"
            "{% if var('strict') %}WHERE id IS NOT NULL{% endif %}\n",
        ),
        "pipelines/staging/shipped_events.sql": (
            "text",
            "SELECT ev.order_id, ev.at FROM {{ source('files', 'events') }} AS ev\n"
            "WHERE ev.kind = 'shipped'\n",
        ),
        "pipelines/staging/shipped_events.yml": ("yaml", {"materialized": "ephemeral"}),
        "pipelines/shipped.sql": (
            "text",
            "INSERT INTO {{ sink('lake', 'shipped') }}\n"
            "INSERT INTO {{ sink('wh', 'log') }}\n"
            "SELECT e.order_id, e.at, i.sku, i.qty, {{ var('label') }} AS label\n"
            "FROM {{ ref('shipped_events') }} AS e\n"
            "JOIN {{ source('files', 'items') }} AS i USING (order_id)\n",
        ),
        "data/orders.csv": ("text", ORDERS_CSV),
        "data/customers.csv": ("text", CUSTOMERS_CSV),
        "data/events.json": ("text", EVENTS_JSON),
        "data/items.parquet": ("bytes", items_parquet()),
    }


@functools.cache
def _quickstart() -> Tree:
    from ruamel.yaml import YAML

    tree: Tree = {}
    for path in sorted(QUICKSTART.rglob("*")):
        rel = path.relative_to(QUICKSTART).as_posix()
        if not path.is_file() or rel.startswith((".", "out/")) or "/." in rel:
            continue
        raw = path.read_bytes()
        if path.suffix == ".yml":
            tree[rel] = ("yaml", _plain(YAML(typ="safe", pure=True).load(raw.decode())))
        elif path.suffix in (".sql", ".csv", ".json"):
            tree[rel] = ("text", raw.decode())
        else:
            tree[rel] = ("bytes", raw)
    return tree


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def quickstart() -> Tree:
    return copy.deepcopy(_quickstart())


SEEDS = {"tiny": tiny, "shop": shop, "quickstart": quickstart}
