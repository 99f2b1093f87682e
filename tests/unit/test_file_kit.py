"""The file-format kit's pure helpers: globs over object keys, formats, option rules."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from pipelinez.connectors.files import formats
from pipelinez.connectors.files.objconnector import key_problem
from pipelinez.connectors.files.objects import _hidden
from tests.conftest import pz, write_project


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("a/*.csv", "a/x.csv", True),
        ("a/*.csv", "a/b/x.csv", False),
        ("a/**/x.csv", "a/x.csv", True),
        ("a/**/x.csv", "a/b/c/x.csv", True),
        ("a/**", "a/b/c", True),
        ("d/[ab]?.json", "d/a1.json", True),
        ("d/[!ab]?.json", "d/a1.json", False),
        ("d/[!ab]?.json", "d/c1.json", True),
        ("e/v1.2/*.parquet", "e/v1x2/p.parquet", False),  # '.' is literal
        ("e/*.parquet", "e/.hidden.parquet", True),  # hidden names are dropped by the listing, not the glob
    ],
)
def test_glob_regex(pattern: str, name: str, matches: bool) -> None:
    assert bool(formats.glob_regex(pattern).match(name)) is matches


def test_hidden_segments_below_the_listed_prefix_never_match() -> None:
    assert _hidden("out/.orders.pz-tmp-1/part-00000.parquet", "out")
    assert _hidden("data/x/.keep", "data")
    assert not _hidden(".config/data/x.csv", ".config/data")  # a hidden folder the user names is read
    assert not _hidden("data/x.csv", "data")


def test_formats_and_option_rules() -> None:
    assert formats.format_of_path("a/b.tsv.gz") == "csv"
    assert formats.format_of_path("prefix/") is None
    assert formats.glob_escaped("s3://b/k[1]*.csv") == "s3://b/k[[]1][*].csv"
    issues = formats.dataset_issues({"path": "x.parquet", "delimiter": ";"}, key_problem)
    assert issues == [("'delimiter' is a csv option, but this dataset's format is parquet", ("delimiter",))]
    assert key_problem("a/../b") is not None and key_problem("a/b/") is None


def test_localfiles_reads_hive_partitions_natively_and_refuses_them_universally(tmp_path: Path) -> None:
    for part, rows in (("year=2024", "id\n1\n2\n"), ("year=2025", "id\n3\n")):
        (tmp_path / "data" / part).mkdir(parents=True)
        (tmp_path / "data" / part / "x.csv").write_text(rows)
    files = {
        "project.yml": "name: hv\n",
        "sources/files.yml": """
            connector: localfiles
            datasets:
              orders: { path: "data/**/*.csv", hive_partitioning: true }
        """,
        "sinks/wh.yml": "connector: duckdb\nconnection: { path: out/wh.duckdb }\n",
        "pipelines/p.sql": "INSERT INTO {{ sink('wh', 'p') }}\n"
        "SELECT * FROM {{ source('files', 'orders') }}\n",
    }
    project = write_project(tmp_path, files)
    result = pz(project, "run")
    assert result.exit_code == 0, result.output
    con = duckdb.connect(str(project / "out" / "wh.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT * FROM p ORDER BY id").fetchall() == [(1, 2024), (2, 2024), (3, 2025)]
    finally:
        con.close()
    (project / "project.yml").write_text("name: hv\nengine: { force_universal: true }\n")
    forced = pz(project, "run")
    assert forced.exit_code == 1 and "PZ0312" in forced.output and "hive_partitioning" in forced.output


def test_s3_settings_from_the_connection() -> None:
    from pipelinez.connectors.s3.connector import S3Store

    local = S3Store({"bucket": "b", "endpoint": "http://127.0.0.1:9000"})
    assert (local.endpoint, local.use_ssl, local.url_style, local.region) == (
        "127.0.0.1:9000",
        False,
        "path",
        "us-east-1",
    )
    aws = S3Store({"bucket": "/b/", "region": "eu-west-1", "access_key_id": "k", "secret_access_key": "s"})
    assert (aws.root, aws.endpoint, aws.use_ssl, aws.url_style) == ("b", None, True, "vhost")
    assert "SECRET 's'" in aws.secret_options() and "ENDPOINT" not in aws.secret_options()


def test_azure_account_from_a_connection_string_or_keys() -> None:
    from pipelinez.connectors.azureblob.connector import Account

    azurite = Account.of(
        {
            "connection_string": "DefaultEndpointsProtocol=http;AccountName=dev;AccountKey=k==;"
            "BlobEndpoint=http://127.0.0.1:10000/dev;"
        }
    )
    assert (azurite.name, azurite.key, azurite.blob_url) == ("dev", "k==", "http://127.0.0.1:10000/dev")
    cloud = Account.of({"account_name": "acme", "account_key": "k"})
    assert cloud.blob_url == "https://acme.blob.core.windows.net"
    assert cloud.connection_string() == (
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=k;"
        "BlobEndpoint=https://acme.blob.core.windows.net;"
    )


@pytest.mark.parametrize("universal", [False, True], ids=["native", "universal"])
def test_localfiles_partitioned_output_on_both_tiers(tmp_path: Path, universal: bool) -> None:
    files = {
        "project.yml": f"name: pb\nengine: {{ force_universal: {str(universal).lower()} }}\n",
        "sinks/lake.yml": """
            connector: localfiles
            connection: { root: out }
            outputs:
              days: { partition_by: [day] }
              log: { format: csv, strategy: append, partition_by: [day] }
              bad: { format: json, partition_by: [day] }
        """,
        "pipelines/days.sql": "INSERT INTO {{ sink('lake', 'days') }}\n"
        "INSERT INTO {{ sink('lake', 'log') }}\n"
        "SELECT range AS id, range % 2 AS day FROM range(5)\n",
    }
    project = write_project(tmp_path, files)
    refused = pz(project, "validate")
    assert (
        refused.exit_code == 2
        and "PZ0304" in refused.output
        and "partition_by is available" in refused.output
    )
    (project / "sinks" / "lake.yml").write_text(
        (project / "sinks" / "lake.yml")
        .read_text()
        .replace("  bad: { format: json, partition_by: [day] }\n", "")
    )
    for _ in range(2):
        result = pz(project, "run")
        assert result.exit_code == 0, result.output
    days = sorted(
        p.relative_to(project / "out") for p in (project / "out" / "days.parquet").rglob("*.parquet")
    )
    assert [str(p) for p in days] == [
        "days.parquet/day=0/part-0.parquet",
        "days.parquet/day=1/part-0.parquet",
    ]
    logs = [p for p in (project / "out" / "log.csv").rglob("*.csv")]
    hidden = [p for p in (project / "out").rglob("*") if p.name.startswith(".")]
    assert len(logs) == 4 and [p.name for p in hidden] == [".pz-manifest.json"] * 2
    con = duckdb.connect()
    try:
        rows = con.execute(
            f"SELECT id, day FROM read_parquet('{project}/out/days.parquet/**/*.parquet', "
            "hive_partitioning=true) ORDER BY id"
        ).fetchall()
    finally:
        con.close()
    assert rows == [(i, i % 2) for i in range(5)]
