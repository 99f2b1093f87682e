"""The http connector: JSON APIs as a source (paginated GETs) and a sink (batched POSTs with checkpointed
delivery). Universal tier only: pages are parsed by DuckDB into Arrow batches, and a sink consumes the
engine's batch stream. It never retries: a 429/503 (or any 408/5xx, a refused or reset connection, a
timeout) is a transient PzConnectorError carrying the server's Retry-After, and the engine's retry policy
decides.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.http import resume, sink
from pipelinez.connectors.http.client import HttpStatusError, request
from pipelinez.connectors.http.pages import PageReader
from pipelinez.connectors.http.settings import HttpConnection, HttpDataset, HttpOutput, issues
from pipelinez.connectors.http.source import PageWalk
from pipelinez.connectors.sdk import (
    Connector,
    ConnectorIssue,
    DatasetRequest,
    OutputRequest,
    Partition,
    WriteResult,
)
from pipelinez.connectors.sdk_sql import canonical_contract
from pipelinez.core.diagnostics import PzConnectorError
from pipelinez.core.vocabulary import Strategy

if TYPE_CHECKING:
    import pyarrow as pa


class HttpConnector(Connector):
    @classmethod
    def validate(
        cls,
        connection: dict[str, Any],
        datasets: dict[str, dict[str, Any]],
        outputs: dict[str, dict[str, Any]],
    ) -> list[ConnectorIssue]:
        return issues(connection, datasets)

    @property
    def conn(self) -> HttpConnection:
        return HttpConnection.of(self.context.connection)

    # -- source ------------------------------------------------------------------------------
    def _walk(self, dataset: DatasetRequest) -> tuple[PageWalk, PageReader]:
        ds = HttpDataset.of(dataset.options)
        contract = canonical_contract(dataset.columns)
        reader = PageReader(ds.records, contract, self.context.note)
        return PageWalk(self.conn, ds, reader, dataset.name), reader

    def extract_batches(self, dataset: DatasetRequest, partition: Partition) -> Iterator[pa.RecordBatch]:
        walk, reader = self._walk(dataset)
        spool = None
        if self.context.run_id:  # the engine's next attempt of this read (same run) resumes where it failed
            key = resume.read_key(
                self.context.run_id, self.context.instance, dataset.name, dataset.options, dataset.columns
            )
            spool = resume.spool_for(key)
            if spool.state is not None:
                self.context.note(
                    f"source '{self.context.instance}' dataset '{dataset.name}': resuming at page "
                    f"{spool.state.pages + 1}; the {spool.state.pages} page(s) ({spool.state.records} "
                    "records) an earlier attempt fetched are not requested again"
                )
        done = False
        try:
            produced = False
            for batch in walk.batches(spool=spool):
                produced = True
                yield batch
            if not produced:
                empty = reader.empty_batch()
                if empty is not None:
                    yield empty
            done = True
        finally:
            reader.close()
            if spool is not None:
                if done:
                    resume.finished(spool)
                else:
                    resume.release(spool)

    def fetch_schema(self, dataset: DatasetRequest) -> list[tuple[str, str]]:
        walk, reader = self._walk(DatasetRequest(dataset.name, dataset.options, None))
        try:
            for _batch in walk.batches(first_page_only=True):
                pass
            if reader.schema is None:
                raise PzConnectorError(
                    "the first page has no records to infer columns from; declare columns: for the dataset"
                )
            return list(reader.schema)
        finally:
            reader.close()

    def check_connection(self) -> None:
        """Any HTTP answer from base_url means it is reachable (an API root often answers 404)."""
        conn = self.conn
        try:
            request("GET", conn.base_url, conn.headers, conn.timeout)
        except HttpStatusError:
            return

    # -- sink --------------------------------------------------------------------------------
    def write_batches(self, output: OutputRequest, reader: pa.RecordBatchReader) -> WriteResult:
        if output.strategy != Strategy.APPEND:
            raise PzConnectorError(
                f"output '{output.name}': the http connector only appends (a POST cannot replace or merge "
                "what the API holds); declare the output with strategy: append",
            )
        return sink.write(
            self.conn, HttpOutput.of(output.options), reader, output.resume_from, self.context.note
        )
