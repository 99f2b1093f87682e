"""One HTTP request, and what its failure means: transient (retried by the engine, `retry_after` from the
server's Retry-After) or terminal. The connector never retries: it raises and the engine decides.

`timeout` bounds the whole answer: connecting, the status line, the headers and the body (through
redirects) must all arrive within it, so a server that trickles bytes cannot hold a read open. A redirect
to another origin (scheme, host or port) is followed without the connection's headers and query
parameters: credentials (an auth header, an API key, a cookie) are only ever sent to the origin they were
configured for.

Messages name the method and the URL without its query string or credentials, since a query parameter may
be a token; header values are never printed.
"""

from __future__ import annotations

import email.utils
import http.client
import time
import urllib.error
import urllib.request
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pipelinez.connectors.http.transport import Deadline, opener
from pipelinez.connectors.http.transport import shown as shown  # messages everywhere print URLs this way
from pipelinez.connectors.sdk_errors import ConnectorError
from pipelinez.core.diagnostics import PzConnectorError

MAX_BODY = 256 << 20  # one page or response larger than this is refused (memory stays bounded)
TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
USER_AGENT = "pipelinez-http"


class HttpStatusError(ConnectorError):
    """The server answered, with a status other than 2xx (`status`)."""

    def __init__(
        self, message: str, status: int, *, is_transient: bool = False, retry_after: float | None = None
    ):
        super().__init__(message, is_transient=is_transient, retry_after=retry_after)
        self.status = status


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]
    links: tuple[str, ...]  # the raw Link header values
    body: bytes


def with_params(url: str, params: Mapping[str, str], keep: bool = False) -> str:
    """`url` with `params` set in its query string (replacing the same names, or, with `keep`, only
    adding those the URL does not have yet)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    present = {k for k, _ in query}
    if keep:
        query += [(k, v) for k, v in params.items() if k not in present]
    else:
        query = [(k, v) for k, v in query if k not in params] + list(params.items())
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds a Retry-After header asks to wait: delta-seconds or an HTTP date; None when absent or not
    understood."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def request(
    method: str,
    url: str,
    headers: Mapping[str, str],
    timeout: float,
    body: bytes | None = None,
    label: str = "",
    private_params: Collection[str] = (),
) -> Response:
    """Send one request and return the response of a 2xx status; PzConnectorError otherwise. `label` follows
    the request in messages (e.g. " (page 3)"). The whole answer must arrive within `timeout`; a redirect
    to another origin goes without `headers` and without the query parameters `private_params` names."""
    what = f"{method} {shown(url)}{label}"
    req = urllib.request.Request(url, data=body, method=method)
    req.add_header("User-Agent", USER_AGENT)
    req.add_header("Accept", "application/json")
    for name, value in headers.items():
        req.add_header(name, value)
    late = PzConnectorError(
        f"{what}: the answer did not arrive within the timeout of {timeout:g}s (the whole answer counts: "
        "connecting, headers and body); raise the connection's timeout: if the API is that slow",
        is_transient=True,
    )
    with Deadline(timeout) as deadline:
        try:
            with opener(url, deadline, private_params).open(req, timeout=timeout) as resp:
                data = _read(resp, what)
                if deadline.expired:
                    raise late
                return Response(
                    resp.status, dict(resp.headers.items()), tuple(resp.headers.get_all("Link") or ()), data
                )
        except urllib.error.HTTPError as exc:
            status = _status_error(what, exc)
            if deadline.expired:
                raise late from None
            raise status from None
        except (OSError, http.client.HTTPException) as exc:
            if deadline.expired:
                raise late from None
            failure = _network_error(what, exc, timeout)
            if failure is None:
                raise
            raise failure from None


def _network_error(
    what: str, exc: OSError | http.client.HTTPException, timeout: float
) -> PzConnectorError | None:
    """What a failure to get an answer means; None: not a network failure (raised as it is)."""
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        text = reason.strerror if isinstance(reason, OSError) and reason.strerror else str(reason)
        return PzConnectorError(f"{what}: cannot connect: {text}", is_transient=_transient_os(reason))
    if isinstance(exc, TimeoutError):
        return PzConnectorError(f"{what}: timed out after {timeout:g}s", is_transient=True)
    if isinstance(exc, ConnectionError | http.client.HTTPException):
        return PzConnectorError(f"{what}: connection error: {type(exc).__name__}: {exc}", is_transient=True)
    return None


def _read(resp: http.client.HTTPResponse, what: str) -> bytes:
    data = resp.read(MAX_BODY + 1)
    if len(data) > MAX_BODY:
        raise PzConnectorError(
            f"{what}: the response is larger than {MAX_BODY >> 20} MiB; ask for smaller pages "
            "(pagination size or limit)"
        )
    return data


def _transient_os(reason: object) -> bool:
    """A refused or reset connection and a timeout clear by themselves; a bad host name does not."""
    return isinstance(reason, ConnectionError | TimeoutError)


def _status_error(what: str, exc: urllib.error.HTTPError) -> HttpStatusError:
    status = exc.code
    try:
        snippet = exc.read(300).decode("utf-8", "replace").strip()
    except OSError:
        snippet = ""
    finally:
        exc.close()
    detail = f": {' '.join(snippet.split())[:200]}" if snippet else ""
    wait = retry_after(exc.headers.get("Retry-After") if exc.headers else None)
    if status in TRANSIENT_STATUS:
        asked = f" (Retry-After {wait:g}s)" if wait is not None else ""
        return HttpStatusError(
            f"{what}: HTTP {status} {exc.reason}{asked}{detail}", status, is_transient=True, retry_after=wait
        )
    hint = {
        401: "; check the auth header or token (headers:/params: of the connection)",
        403: "; the credentials lack access to this endpoint",
        404: "; check base_url and path",
    }.get(status, "")
    return HttpStatusError(f"{what}: HTTP {status} {exc.reason}{detail}{hint}", status)
