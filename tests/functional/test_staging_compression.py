"""engine.staging_compression: validated, applied to the staged tables of both tiers, and a staging file of
every mode is what `pz retry` reuses."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from tests.conftest import pz, write_project

ROWS = 150_000  # more than one row group (122,880 rows): those rows land in compressed blocks, not the WAL


def _files(mode: str | None, universal: bool = False) -> dict[str, str]:
    engine = {"threads": 1}
    if mode is not None:
        engine["staging_compression"] = mode  # type: ignore[assignment]
    if universal:
        engine["force_universal"] = True  # type: ignore[assignment]
    return {
        "project.yml": f"name: shop\nengine: {json.dumps(engine)}\n",
        "sources/files.yml": """
            connector: localfiles
            connection: { root: data }
            datasets:
              orders:
                format: csv
                path: orders.csv
                columns: { id: bigint, note: varchar, amount: "decimal(10,2)" }
        """,
        "sinks/wh.yml": """
            connector: duckdb
            connection: { path: out/wh.duckdb }
        """,
        "pipelines/copy.sql": """
            INSERT INTO {{ sink('wh', 'copy') }}
            SELECT * FROM {{ source('files', 'orders') }}
        """,
    }


def _write(project: Path, mode: str | None, universal: bool = False) -> None:
    write_project(project, _files(mode, universal))
    csv = project / "data" / "orders.csv"
    csv.parent.mkdir(parents=True, exist_ok=True)
    duckdb.sql(
        f"COPY (SELECT i AS id, 'note ' || md5(i::VARCHAR) AS note, (i % 1000) / 10 AS amount "
        f"FROM range({ROWS}) t(i)) TO '{csv}' (FORMAT csv, HEADER)"
    )


def _last_run(project: Path) -> Path:
    return sorted(p for p in (project / ".pz" / "runs").iterdir() if p.is_dir())[-1]


def _codecs(run: Path) -> dict[str, set[str]]:
    """Compression of each staged column's data segments (validity left out)."""
    with duckdb.connect(str(run / "staging.duckdb"), read_only=True) as con:
        rows = con.execute(
            "SELECT column_name, compression FROM pragma_storage_info('src_files__orders') "
            "WHERE segment_type <> 'VALIDITY'"
        ).fetchall()
    found: dict[str, set[str]] = {}
    for column, codec in rows:
        found.setdefault(str(column), set()).add(str(codec))
    return found


def test_an_unknown_staging_compression_is_refused(project_dir: Path) -> None:
    _write(project_dir, "tiny")
    result = pz(project_dir, "validate")
    assert result.exit_code == 2
    assert any("PZ0103" in line and "staging_compression" in line for line in result.lines), result.output


@pytest.mark.parametrize(
    ("mode", "universal", "text", "other"),
    [
        (None, False, {"Uncompressed"}, None),  # the default is fast: text as is, numbers compressed
        ("fast", True, {"Uncompressed"}, None),
        ("zstd", False, {"ZSTD"}, None),
        ("zstd", True, {"ZSTD"}, None),
        ("uncompressed", False, {"Uncompressed"}, {"Uncompressed"}),
        ("uncompressed", True, {"Uncompressed"}, {"Uncompressed"}),
        ("auto", False, None, None),
    ],
)
def test_each_mode_compresses_the_staged_table_as_it_says(
    project_dir: Path, mode: str | None, text: set[str] | None, other: set[str] | None, universal: bool
) -> None:
    _write(project_dir, mode, universal)
    assert pz(project_dir, "run").exit_code == 0
    codecs = _codecs(_last_run(project_dir))
    if text is not None:
        assert text <= codecs["note"], codecs
    else:  # auto: DuckDB's own pick for text (FSST or a dictionary), never zstd nor nothing at all
        # (a segment whose sample does not compress may be left Uncompressed by DuckDB's analysis)
        assert "ZSTD" not in codecs["note"] and codecs["note"] - {"Uncompressed"}, codecs
    if other is not None:
        assert codecs["id"] <= other | {"Constant"} and codecs["amount"] <= other | {"Constant"}, codecs
    else:  # numbers keep DuckDB's light codecs in fast, zstd and auto
        assert "Uncompressed" not in codecs["id"], codecs
    with duckdb.connect(str(project_dir / "out" / "wh.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*), count(DISTINCT note) FROM copy").fetchone() == (ROWS, ROWS)


@pytest.mark.parametrize("mode", ["fast", "zstd", "uncompressed"])
def test_a_compressed_staging_is_reused_by_retry(project_dir: Path, mode: str) -> None:
    _write(project_dir, mode)
    failed = pz(project_dir, "run", env={"PZ_FAILPOINTS": "sink.write@wh.copy"})
    assert failed.exit_code == 1, failed.output
    # a re-read would see this
    (project_dir / "data" / "orders.csv").write_text("id,note,amount\n1,changed,1\n")
    retried = pz(project_dir, "retry")
    assert retried.exit_code == 0, retried.output
    results = json.loads((_last_run(project_dir) / "run_results.json").read_text())
    load = next(n for n in results["nodes"] if n["name"] == "src_files__orders")
    assert load.get("provenance") == "reused" and load["rows"] == ROWS
    with duckdb.connect(str(project_dir / "out" / "wh.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM copy").fetchone() == (ROWS,)
