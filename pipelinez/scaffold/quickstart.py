"""`pz init`: a small runnable project. CSV, Parquet and JSON files in; a DuckDB file and a Parquet
folder out; one ephemeral pipeline, checks, and a var. `examples/quickstart` is this scaffold's output."""

from __future__ import annotations

from pathlib import Path

from pipelinez.core import duck_connect
from pipelinez.core.diagnostics import PzConfigError, error
from pipelinez.core.oserrors import os_error

FILES: dict[str, str] = {
    "project.yml": """\
name: quickstart
vars:
  min_amount: { type: decimal, default: "0" }
engine:
  threads: 2
retention: { keep_last: 5 }
""",
    "sources/files.yml": """\
connector: localfiles
connection:
  root: data
datasets:
  customers:
    format: csv
    path: customers.csv
    columns: { id: bigint, name: varchar, country: varchar, updated_at: timestamp }
  orders:
    format: parquet
    path: orders.parquet
    columns: { id: bigint, customer_id: bigint, amount: "decimal(10,2)", status: varchar, ordered_at: date }
  events:
    format: json
    path: events.json
    columns: { order_id: bigint, kind: varchar, at: timestamp }
""",
    "sinks/warehouse.yml": """\
connector: duckdb
connection:
  path: out/warehouse.duckdb
outputs:
  customer_revenue:
    table: main.customer_revenue
    strategy: replace
""",
    "sinks/lake.yml": """\
connector: localfiles
connection:
  root: out/lake
outputs:
  orders_enriched:
    format: parquet
""",
    "pipelines/shipped_orders.sql": """\
-- Ephemeral: inlined into the pipelines that ref() it, never materialized on its own.
SELECT o.*, e.at AS shipped_at
FROM {{ source('files', 'orders') }} AS o
JOIN {{ source('files', 'events') }} AS e ON e.order_id = o.id AND e.kind = 'shipped'
""",
    "pipelines/shipped_orders.yml": """\
description: Orders with their shipping event.
materialized: ephemeral
""",
    "pipelines/orders_enriched.sql": """\
INSERT INTO {{ sink('lake', 'orders_enriched') }}
SELECT s.id AS order_id, s.amount, s.status, s.ordered_at, s.shipped_at,
       c.name AS customer, c.country
FROM {{ ref('shipped_orders') }} AS s
JOIN {{ source('files', 'customers') }} AS c ON c.id = s.customer_id
WHERE s.amount >= {{ var('min_amount') }}
""",
    "pipelines/orders_enriched.yml": """\
description: Shipped orders joined to their customer.
tags: [daily]
checks:
  - not_null: { columns: [order_id, customer] }
  - unique: { columns: [order_id] }
  - accepted_values: { column: status, values: [shipped, returned] }
  - expression: { sql: "amount >= 0", name: non_negative_amount }
""",
    "pipelines/customer_revenue.sql": """\
INSERT INTO {{ sink('warehouse', 'customer_revenue') }}
SELECT customer, country, count(*) AS orders, sum(amount) AS revenue
FROM {{ ref('orders_enriched') }}
GROUP BY customer, country
ORDER BY revenue DESC
""",
    "pipelines/customer_revenue.yml": """\
checks:
  - row_count: { min: 1 }
  - unique: { columns: [customer] }
""",
    "data/customers.csv": """\
id,name,country,updated_at
1,Ada Lovelace,GB,2026-11-01 09:00:00
2,Grace Hopper,US,2026-11-02 10:30:00
3,Jürgen Müller,DE,2026-11-03 11:15:00
4,"O'Brien, Siobhán",IE,2026-11-04 08:45:00
""",
    "data/events.json": """\
{"order_id": 100, "kind": "shipped", "at": "2026-11-10 12:00:00"}
{"order_id": 101, "kind": "shipped", "at": "2026-11-11 13:00:00"}
{"order_id": 102, "kind": "created", "at": "2026-11-11 14:00:00"}
{"order_id": 103, "kind": "shipped", "at": "2026-11-12 15:00:00"}
{"order_id": 104, "kind": "shipped", "at": "2026-11-13 16:00:00"}
""",
    ".gitignore": ".pz/\nout/\n",
}

ORDERS_SQL = """
COPY (SELECT * FROM (VALUES
  (100, 1, 120.50, 'shipped', DATE '2026-11-09'),
  (101, 2, 80.00, 'shipped', DATE '2026-11-10'),
  (102, 3, 42.10, 'open', DATE '2026-11-11'),
  (103, 1, 15.99, 'returned', DATE '2026-11-12'),
  (104, 4, 230.00, 'shipped', DATE '2026-11-12')
) AS t(id, customer_id, amount, status, ordered_at)) TO '{path}' (FORMAT parquet)
"""


def write_quickstart(directory: Path, force: bool = False) -> list[Path]:
    try:
        return _write_quickstart(directory, force)
    except OSError as exc:
        raise PzConfigError(
            [os_error(exc, "pz init cannot write here", next_step="pass pz init a folder you can write")]
        ) from None


def _write_quickstart(directory: Path, force: bool) -> list[Path]:

    if directory.exists() and any(directory.iterdir()) and not force:
        raise PzConfigError(
            [
                error(
                    "PZ0513",
                    f"{directory} is not empty; pz init writes a new project",
                    next_step="pick an empty folder, or pass --force to write into it",
                    file=str(directory),
                )
            ]
        )
    written = []
    for rel, text in FILES.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    orders = directory / "data" / "orders.parquet"
    con = duck_connect.connect()
    try:
        con.execute(ORDERS_SQL.format(path=orders.as_posix().replace("'", "''")))
    finally:
        con.close()
    written.append(orders)
    return written
