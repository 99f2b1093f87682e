"""Reading a paginated JSON API: one GET per page, in order, until the pagination style says it was the last.

Styles:
- cursor: the next cursor is at `cursor_path` in each page and is sent as `cursor_param`; no cursor ends.
- page: `page_param` counts up from `start`; an empty page (or one shorter than `size`) is the last.
- offset: `offset_param` moves by the records read, `limit` at a time; a page shorter than `limit` is the
  last.
- link: follow the `Link: <url>; rel="next"` header (same origin only: the auth header is never sent to
  another host) until a page has none.
`max_pages` stops any style early, on purpose. Without it, `page_cap` (default 10000) bounds the read: a
read that has taken that many pages while the API still names a next one fails (PZ0536) rather than
reading forever. A server that answers the same page again (same cursor, same body) is an error, not an
endless read.

With a `Spool` (`resume`), every page's batches are spooled and the walk's state recorded after each
complete page, and a walk whose spool holds an earlier attempt's pages replays them and continues at the
page that failed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import urljoin

from pipelinez.connectors.http.client import HttpStatusError, Response, request, shown, with_params
from pipelinez.connectors.http.pacing import pacer_for
from pipelinez.connectors.http.pages import Page, PageReader
from pipelinez.connectors.http.resume import Spool, WalkState
from pipelinez.connectors.http.settings import HttpConnection, HttpDataset, Pagination
from pipelinez.connectors.http.transport import origin
from pipelinez.core.diagnostics import PzConnectorError

if TYPE_CHECKING:
    import pyarrow as pa

_LINK = re.compile(r"<([^>]*)>((?:\s*;\s*[^;,]+)*)")
_REL = re.compile(r"""rel\s*=\s*"?([^";]+)"?""", re.IGNORECASE)


def endpoint_url(conn: HttpConnection, path: str) -> str:
    """base_url joined with a dataset's or output's path (an absolute path keeps base_url's own path)."""
    if not path:
        return conn.base_url
    return conn.base_url + ("" if path.startswith("/") else "/") + path


def next_link(links: tuple[str, ...]) -> str | None:
    """The target of the rel="next" link among the Link header values, if any."""
    for value in links:
        for match in _LINK.finditer(value):
            for rel in _REL.findall(match.group(2)):
                if "next" in rel.lower().split():
                    return match.group(1).strip()
    return None


def _first_params(p: Pagination) -> dict[str, str]:
    if p.style == "page":
        first = {p.page_param: str(p.start)}
        if p.size_param and p.size is not None:
            first[p.size_param] = str(p.size)
        return first
    if p.style == "offset":
        return {p.offset_param: str(p.start), p.limit_param: str(p.limit)}
    return {}


class PageWalk:
    """The requests of one dataset read, page after page."""

    def __init__(self, conn: HttpConnection, ds: HttpDataset, reader: PageReader, dataset_name: str):
        self.conn = conn
        self.ds = ds
        self.reader = reader
        self.url = endpoint_url(conn, ds.path)
        self.params = {**conn.params, **ds.params}
        self.dataset_name = dataset_name
        self.pacer = pacer_for(self.url, ds.rate_limit) if ds.rate_limit else None

    def batches(self, first_page_only: bool = False, spool: Spool | None = None) -> Iterator[pa.RecordBatch]:
        p = self.ds.pagination
        url: str | None = with_params(self.url, {**self.params, **_first_params(p)})
        pages = records = 0
        seen_cursors: set[str] = set()
        last_digest = ""
        state = spool.state if spool is not None else None
        if spool is not None and state is not None:
            yield from spool.replay()
            url, pages, records = state.next_url, state.pages, state.records
            seen_cursors, last_digest = set(state.seen_cursors), state.last_digest
            self.reader.resume(state.schema, state.unread, state.pages)
        if spool is not None:
            spool.begin()
        while url is not None:
            what = f"GET {shown(url)} (page {pages + 1})"
            response = self._get(url, pages + 1)
            digest = hashlib.sha256(response.body).hexdigest()
            if pages and digest == last_digest and p.style in ("page", "offset", "link"):
                raise PzConnectorError(
                    f"{what}: the server answered the same page as page {pages}; check the pagination "
                    f"keys ({p.style}) against the API's documentation"
                )
            last_digest = digest
            page = self.reader.parse(response.body, p.cursor_path, what)
            for batch in self.reader.batches(page, what):
                if spool is not None:
                    spool.write(batch)
                yield batch
            pages += 1
            records += page.rows
            if first_page_only or (p.max_pages is not None and pages >= p.max_pages):
                url = None
            else:
                url = self._next(p, page, response, url, records, pages, seen_cursors, what)
                if url is not None and p.max_pages is None and pages >= p.page_cap:
                    raise self._cap_reached(pages, what)
            if spool is not None:
                spool.commit(
                    WalkState(
                        url,
                        pages,
                        records,
                        frozenset(seen_cursors),
                        last_digest,
                        self.reader.schema,
                        self.reader.unread,
                    )
                )

    def _cap_reached(self, pages: int, what: str) -> PzConnectorError:
        return PzConnectorError(
            f"{what}: the read took {pages} pages, its page cap, and the API still names a next page; "
            f"a pagination that never ends would read forever. If the API really holds more, raise "
            f"pagination.page_cap on dataset '{self.dataset_name}' (or set max_pages to stop early on "
            "purpose)",
            code="PZ0536",
        )

    def _get(self, url: str, page: int) -> Response:
        if self.pacer is not None:
            self.pacer.wait()
        try:
            return request(
                "GET",
                url,
                self.conn.headers,
                self.conn.timeout,
                label=f" (page {page})",
                private_params=self.params,
            )
        except HttpStatusError as exc:
            if exc.status != 429 or self.pacer is not None:
                raise
            raise HttpStatusError(
                f"{exc.message}; the next attempt resumes at this page, but declare rate_limit: "
                f"{{ requests: <count>, per: <duration> }} on dataset '{self.dataset_name}' to pace "
                "its requests within the API's quota",
                exc.status,
                is_transient=True,
                retry_after=exc.retry_after,
            ) from None

    def _next(
        self,
        p: Pagination,
        page: Page,
        response: Response,
        url: str,
        records: int,
        pages: int,
        seen_cursors: set[str],
        what: str,
    ) -> str | None:
        if p.style == "cursor":
            cursor = page.cursor
            if cursor is None or cursor == "":
                return None
            if cursor in seen_cursors:
                raise PzConnectorError(
                    f"{what}: the server returned a cursor it returned before; the read would never end"
                )
            seen_cursors.add(cursor)
            return with_params(self.url, {**self.params, p.cursor_param: cursor})
        if p.style == "page":
            if page.rows == 0 or (p.size is not None and page.rows < p.size):
                return None
            return with_params(
                self.url, {**self.params, **_first_params(p), p.page_param: str(p.start + pages)}
            )
        if p.style == "offset":
            if page.rows == 0 or (p.limit is not None and page.rows < p.limit):
                return None
            return with_params(
                self.url, {**self.params, **_first_params(p), p.offset_param: str(p.start + records)}
            )
        if p.style == "link":
            target = next_link(response.links)
            if not target:
                return None
            absolute = urljoin(url, target)
            if origin(absolute) != origin(self.url):
                raise PzConnectorError(
                    f"{what}: the next-page link points to another host ({origin(absolute)}); pz follows "
                    f"links on {origin(self.url)} only, so the connection's headers are never sent elsewhere"
                )
            return with_params(absolute, self.conn.params, keep=True)
        return None
