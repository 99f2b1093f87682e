"""Peak RSS of the http connector alone (no engine, no staging) reading N records as cursor pages of 10,000
from a loopback API in the same process. It stays flat as N grows: one page is held at a time.

    .venv/bin/python benchmarks/http_connector_memory.py 200000
    .venv/bin/python benchmarks/http_connector_memory.py 2000000
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipelinez.connectors.http.connector import HttpConnector
from pipelinez.connectors.sdk import ConnectorContext, DatasetRequest, Partition
from tests import http_server

PAGE = 10_000


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    rows = [
        {"id": i, "name": f"customer_{i % 100000}", "amount": (i % 1000) / 10, "ts": "2024-01-01T10:00:00"}
        for i in range(PAGE)
    ]

    def same_page(
        self: Any, style: str, name: str, records: Any, query: dict[str, list[str]]
    ) -> tuple[int, dict[str, str], Any]:
        nxt = int(query.get("cursor", ["0"])[0] or 0) + 1
        return (
            200,
            {},
            {"data": {"items": rows}, "meta": {"next_cursor": str(nxt) if nxt < n // PAGE else None}},
        )

    http_server._Handler._page = same_page  # type: ignore[method-assign]
    server = http_server.ApiServer().start()
    server.state.datasets["items"] = []
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    connector = HttpConnector(ConnectorContext("api", Path("."), {"base_url": server.url}))
    request = DatasetRequest(
        "items",
        {
            "path": "/cursor/items",
            "records": "data.items",
            "pagination": {"style": "cursor", "cursor_path": "meta.next_cursor"},
        },
        None,
    )
    try:
        total = sum(b.num_rows for b in connector.extract_batches(request, Partition(0, "all")))
    finally:
        server.stop()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"{total} records read; peak RSS {before} MiB before, {after} MiB after")


if __name__ == "__main__":
    main()
