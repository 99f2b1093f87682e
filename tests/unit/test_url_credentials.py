"""User info in a URL pz prints could hold a credential: messages and descriptions never show it."""

from __future__ import annotations

import pytest

from pipelinez.connectors.s3.place import S3Place
from pipelinez.core.diagnostics import PzConfigError
from pipelinez.engine.run.executor_choice import staging_location


@pytest.mark.parametrize("endpoint", ["user:s3cr3t@minio:9000", "http://user:s3cr3t@minio:9000"])
def test_an_s3_endpoint_keeps_only_its_host_and_port(endpoint: str) -> None:
    place = S3Place.of({"endpoint": endpoint})
    assert place.endpoint == "minio:9000"
    assert "s3cr3t" not in place.where()


def test_a_file_url_naming_another_host_is_refused_without_its_user_info() -> None:
    with pytest.raises(PzConfigError) as refused:
        staging_location("file://user:s3cr3t@otherhost/data", "command line")
    text = str(refused.value) + " ".join(d.message for d in refused.value.diagnostics)
    assert "PZ0711" in " ".join(d.code for d in refused.value.diagnostics)
    assert "s3cr3t" not in text and "***@otherhost" in text
