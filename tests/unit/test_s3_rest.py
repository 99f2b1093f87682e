"""The S3 REST calls pz signs itself (multipart copy, incomplete uploads): SigV4 signatures equal botocore's
for the same request, and the part ranges of a multipart copy cover an object exactly."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from pipelinez.connectors.s3.connector import MAX_PARTS, part_ranges
from pipelinez.connectors.s3.rest import S3Rest

CASES = [
    # method, path, query, headers, body
    (
        "PUT",
        "/my-bucket/dst/a%20b%3D.parquet",
        "partNumber=1&uploadId=abc%2Bdef",
        {"x-amz-copy-source": "/my-bucket/src/a%20b.parquet", "x-amz-copy-source-range": "bytes=0-99"},
        b"",
    ),
    ("POST", "/my-bucket/k/part-00000.parquet", "uploads=", {}, b""),
    (
        "POST",
        "/my-bucket/k/part-00000.parquet",
        "uploadId=xyz",
        {},
        b'<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"e"</ETag></Part>'
        b"</CompleteMultipartUpload>",
    ),
    ("GET", "/my-bucket", "prefix=out%2F.big.pz-tmp-&uploads=", {}, b""),
]


@pytest.mark.parametrize(("method", "path", "query", "headers", "body"), CASES)
@pytest.mark.parametrize("token", [None, "SESSION/TOKEN=="])
def test_signature_equals_botocores(
    method: str, path: str, query: str, headers: dict[str, str], body: bytes, token: str | None
) -> None:
    rest = S3Rest("my-bucket", "eu-central-1", "127.0.0.1:9000", False, "path", "AKID", "SECRET/x+y=", token)
    url = f"http://127.0.0.1:9000{path}" + (f"?{query}" if query else "")
    request = AWSRequest(method=method, url=url, headers=dict(headers), data=body)
    if body:
        request.headers["content-type"] = "application/xml"
    S3SigV4Auth(Credentials("AKID", "SECRET/x+y=", token), "s3", "eu-central-1").add_auth(request)
    when = datetime.strptime(request.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    mine = rest._signed(method, path, query, dict(headers), body, when)
    assert mine["authorization"] == request.headers["Authorization"]


def test_anonymous_requests_are_not_signed() -> None:
    rest = S3Rest("b", "us-east-1", None, True, "vhost", None, None, None)
    assert "authorization" not in rest._signed("GET", "/", "uploads=", {}, b"")
    assert rest.host == "b.s3.us-east-1.amazonaws.com"


@pytest.mark.parametrize("size", [1, 5, 6, 10, 11, 12_345])
def test_part_ranges_cover_the_object_exactly(size: int) -> None:
    ranges = part_ranges(size, 5)
    assert ranges[0][0] == 0 and ranges[-1][1] == size - 1
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(ranges))
    assert all(last - first + 1 == 5 for first, last in ranges[:-1])


def test_a_huge_object_takes_at_most_the_allowed_parts() -> None:
    size = 5 * 1024**4  # 5 TiB: the largest S3 object
    ranges = part_ranges(size, 512 * 1024**2)
    assert len(ranges) <= MAX_PARTS and ranges[-1][1] == size - 1
    assert max(last - first + 1 for first, last in ranges) <= 5 * 1024**3
