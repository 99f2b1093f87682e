"""An example third-party connector: a universal-tier source of consecutive integers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pipelinez.connectors.sdk import Connector, ConnectorIssue, DatasetRequest, Partition
from pipelinez.core.diagnostics import PzConnectorError


class NumbersConnector(Connector):
    @classmethod
    def validate(
        cls,
        connection: dict[str, Any],
        datasets: dict[str, dict[str, Any]],
        outputs: dict[str, dict[str, Any]],
    ) -> list[ConnectorIssue]:
        issues = []
        for name, block in datasets.items():
            if block.get("batch_rows", 1) > block.get("count", 0) > 0:
                issue = ConnectorIssue("batch_rows is larger than count", ("batch_rows",), "dataset", name)
                issues.append(issue)
        return issues

    def static_schema(self, dataset: DatasetRequest) -> list[tuple[str, str]] | None:
        return [("n", "BIGINT")]

    def fetch_schema(self, dataset: DatasetRequest) -> list[tuple[str, str]]:
        return [("n", "BIGINT")]

    def extract_batches(self, dataset: DatasetRequest, partition: Partition) -> Iterator[Any]:
        import pyarrow as pa  # import heavy modules inside methods: `pz --help` stays fast

        count = int(dataset.options["count"])
        step = int(dataset.options.get("batch_rows", 10_000))
        if count > 10**9:
            raise PzConnectorError(f"dataset '{dataset.name}': count {count} is too large")
        schema = pa.schema([("n", pa.int64())])
        if count == 0:
            yield pa.RecordBatch.from_pylist([], schema=schema)
        for start in range(1, count + 1, step):
            stop = min(start + step, count + 1)
            yield pa.RecordBatch.from_arrays([pa.array(range(start, stop), pa.int64())], schema=schema)
