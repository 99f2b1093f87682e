"""The http connector's keys, read once into typed settings: the connection, a dataset, an output.

The manifest's JSON Schemas check shapes (tier 3); these classes read rendered values and apply the
defaults. Values may hold secrets (an auth header, a token parameter): nothing here prints them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pipelinez.connectors.sdk import ConnectorIssue
from pipelinez.core.durations import parse_duration

DEFAULT_TIMEOUT = 30.0
DEFAULT_BATCH_SIZE = 1000
DEFAULT_PAGE_CAP = 10_000  # pages a read without max_pages may take before it fails (PZ0536)
STYLES = ("cursor", "page", "offset", "link")


def _strings(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): _text(v) for k, v in value.items()}


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def json_path(text: str | None) -> str | None:
    """A JSON path as DuckDB's json functions take it: `data.items` and `$.data.items` alike; None or `$`
    means the document itself."""
    if text is None:
        return None
    text = text.strip()
    if text in ("", "$"):
        return None
    if text.startswith("$"):
        return text
    return "$." + text if not text.startswith("[") else "$" + text


@dataclass(frozen=True)
class HttpConnection:
    base_url: str
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # may hold secrets
    params: dict[str, str] = field(default_factory=dict, repr=False)  # query parameters of every request
    timeout: float = DEFAULT_TIMEOUT

    @staticmethod
    def of(connection: Mapping[str, Any]) -> HttpConnection:
        timeout = connection.get("timeout")
        return HttpConnection(
            str(connection.get("base_url", "")).rstrip("/"),
            _strings(connection.get("headers")),
            _strings(connection.get("params")),
            _seconds(timeout) if timeout is not None else DEFAULT_TIMEOUT,
        )

    @property
    def origin(self) -> str:
        """scheme://host[:port] of the base URL, without credentials (safe to print)."""
        parts = urlsplit(self.base_url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}"


def _seconds(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return parse_duration(str(value))


@dataclass(frozen=True)
class Pagination:
    style: str | None = None  # None: one request
    cursor_param: str = "cursor"
    cursor_path: str | None = None  # cursor: where the next cursor is in the body
    page_param: str = "page"
    start: int = 1  # page: the first page's number; offset: the first offset (0)
    size_param: str | None = None  # page: the page-size parameter
    size: int | None = None  # page: the page size (a shorter page is the last)
    offset_param: str = "offset"
    limit_param: str = "limit"
    limit: int | None = None  # offset: records per request (a shorter page is the last)
    max_pages: int | None = None  # stop after this many pages, on purpose (no error)
    page_cap: int = DEFAULT_PAGE_CAP  # more pages than this, without max_pages: PZ0536

    @staticmethod
    def of(block: Any) -> Pagination:
        if not isinstance(block, Mapping):
            return Pagination()
        style = block.get("style")
        start = block.get("start")
        return Pagination(
            style=str(style) if style else None,
            cursor_param=str(block.get("cursor_param", "cursor")),
            cursor_path=json_path(block.get("cursor_path")),
            page_param=str(block.get("page_param", "page")),
            start=int(start) if start is not None else (0 if style == "offset" else 1),
            size_param=str(block["size_param"]) if block.get("size_param") else None,
            size=int(block["size"]) if block.get("size") is not None else None,
            offset_param=str(block.get("offset_param", "offset")),
            limit_param=str(block.get("limit_param", "limit")),
            limit=int(block["limit"]) if block.get("limit") is not None else None,
            max_pages=int(block["max_pages"]) if block.get("max_pages") is not None else None,
            page_cap=int(block["page_cap"]) if block.get("page_cap") is not None else DEFAULT_PAGE_CAP,
        )


@dataclass(frozen=True)
class RateLimit:
    """At most `requests` requests start in any window of `per` seconds (client-side pacing)."""

    requests: int
    per: float

    @staticmethod
    def of(block: Any) -> RateLimit | None:
        if not isinstance(block, Mapping):
            return None
        return RateLimit(int(block["requests"]), _seconds(block["per"]))


@dataclass(frozen=True)
class HttpDataset:
    path: str
    params: dict[str, str] = field(default_factory=dict, repr=False)
    records: str | None = None  # JSON path of the records list in each page; None: the body itself
    pagination: Pagination = field(default_factory=Pagination)
    rate_limit: RateLimit | None = None

    @staticmethod
    def of(options: Mapping[str, Any]) -> HttpDataset:
        return HttpDataset(
            str(options.get("path", "")),
            _strings(options.get("params")),
            json_path(options.get("records")),
            Pagination.of(options.get("pagination")),
            RateLimit.of(options.get("rate_limit")),
        )


@dataclass(frozen=True)
class HttpOutput:
    path: str
    method: str = "POST"
    batch_size: int = DEFAULT_BATCH_SIZE
    format: str = "json"  # json: one array per request; ndjson: one object per line

    @staticmethod
    def of(options: Mapping[str, Any]) -> HttpOutput:
        return HttpOutput(
            str(options.get("path", "")),
            str(options.get("method", "POST")).upper(),
            int(options.get("batch_size", DEFAULT_BATCH_SIZE)),
            str(options.get("format", "json")),
        )


def issues(
    connection: Mapping[str, Any],
    datasets: Mapping[str, Mapping[str, Any]],
) -> list[ConnectorIssue]:
    """Cross-field rules the JSON Schemas cannot say."""
    found: list[ConnectorIssue] = []
    base = str(connection.get("base_url", ""))
    parts = urlsplit(base)
    if base and (parts.scheme not in ("http", "https") or not parts.hostname):
        found.append(ConnectorIssue("base_url must be an http:// or https:// URL with a host", ("base_url",)))
    elif parts.query or parts.fragment:
        found.append(
            ConnectorIssue(
                "base_url must not carry a query string or fragment; put query parameters under params:",
                ("base_url",),
            )
        )
    timeout = connection.get("timeout")
    if timeout is not None:
        try:
            if _seconds(timeout) <= 0:
                raise ValueError("must be positive")
        except ValueError as exc:
            found.append(ConnectorIssue(f"timeout: {exc}", ("timeout",)))
    for name, block in datasets.items():
        found += _pagination_issues(name, block.get("pagination"))
        found += _rate_limit_issues(name, block.get("rate_limit"))
    return found


def _rate_limit_issues(name: str, block: Any) -> list[ConnectorIssue]:
    if block is None:
        return []
    at = ("rate_limit",)
    if not isinstance(block, Mapping):
        return [
            ConnectorIssue("rate_limit must be { requests: <count>, per: <duration> }", at, "dataset", name)
        ]
    found = []
    count = block.get("requests")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        found.append(
            ConnectorIssue(
                "rate_limit requests must be a whole number of at least 1, e.g. requests: 10",
                (*at, "requests"),
                "dataset",
                name,
            )
        )
    per = block.get("per")
    try:
        if per is None or isinstance(per, bool):
            raise ValueError("is required: the window, e.g. per: 1s")
        if _seconds(per) <= 0:
            raise ValueError("must be a positive duration, e.g. per: 1s")
    except ValueError as exc:
        found.append(ConnectorIssue(f"rate_limit per: {exc}", (*at, "per"), "dataset", name))
    for key in block:
        if key not in ("requests", "per"):
            found.append(
                ConnectorIssue(
                    f"rate_limit key {key} is not known; write {{ requests: <count>, per: <duration> }}",
                    (*at, str(key)),
                    "dataset",
                    name,
                )
            )
    return found


def _pagination_issues(name: str, block: Any) -> list[ConnectorIssue]:
    if not isinstance(block, Mapping):
        return []
    style = block.get("style")
    at = ("pagination",)

    def issue(message: str, *key: str) -> ConnectorIssue:
        return ConnectorIssue(message, (*at, *key), "dataset", name)

    found = []
    if style == "cursor" and not block.get("cursor_path"):
        found.append(issue("pagination style cursor needs cursor_path: where the next cursor is in a page"))
    if style == "offset" and block.get("limit") is None:
        found.append(issue("pagination style offset needs limit: the number of records per request"))
    if style == "page" and block.get("size") is not None and not block.get("size_param"):
        found.append(issue("pagination size needs size_param: the query parameter that sends it", "size"))
    own = {
        "cursor": {"cursor_param", "cursor_path"},
        "page": {"page_param", "start", "size_param", "size"},
        "offset": {"offset_param", "limit_param", "limit", "start"},
        "link": set(),
    }
    if block.get("max_pages") is not None and block.get("page_cap") is not None:
        found.append(
            issue(
                "pagination sets both max_pages (stop after that many pages) and page_cap (fail beyond that "
                "many pages); keep one",
                "page_cap",
            )
        )
    allowed = own.get(str(style), set()) | {"style", "max_pages", "page_cap"}
    for key in block:
        if key not in allowed:
            found.append(issue(f"pagination key {key} does not apply to style {style}", str(key)))
    return found
