"""One HTTP request of an object store's own signed REST calls (`s3.rest`, `azureblob.rest`), over the
standard library's client: one attempt, no retries (the engine owns them), the connection closed after it."""

from __future__ import annotations

import http.client
import ssl
from dataclasses import dataclass

TRANSIENT_STATUS = (408, 429, 500, 502, 503, 504)  # an answer another attempt may not get


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes


class NoReply(OSError):
    """No answer came (a refused, reset or timed-out connection): whether the call took effect is unknown;
    another attempt may succeed."""


def send(
    host: str, use_ssl: bool, method: str, target: str, headers: dict[str, str], body: bytes, timeout: float
) -> Reply:
    """Send one request to `host` (`name[:port]`) and read the whole answer, whatever its status."""
    conn: http.client.HTTPConnection
    if use_ssl:
        conn = http.client.HTTPSConnection(host, timeout=timeout, context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(host, timeout=timeout)
    try:
        conn.request(method, target, body=body or None, headers=headers)
        response = conn.getresponse()
        data = response.read()
        return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
    except TimeoutError as exc:
        raise NoReply(f"timed out ({exc})") from None
    except (ConnectionError, http.client.HTTPException, OSError) as exc:
        raise NoReply(f"connection error ({type(exc).__name__}: {exc})") from None
    finally:
        conn.close()
