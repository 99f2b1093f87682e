"""Types to the edges: the words of the config, events and artifacts are enums (comparing and serializing as
their strings), the two severities are two types, and run_results' watermark and the shared-staging manifest's
partitions are typed records that write the same JSON they always did."""

from __future__ import annotations

import json
from pathlib import Path

from pipelinez.config.loader import load_project
from pipelinez.core.diagnostics import DiagnosticSeverity, error, warning
from pipelinez.core.vocabulary import (
    BreakerState,
    CheckSeverity,
    Duplicates,
    Materialization,
    NodeKind,
    NodeStatus,
    StagingCompression,
    Strategy,
    VarType,
)
from pipelinez.engine import events
from pipelinez.engine.staging.manifest import ManifestPartition, StagedColumn, TableManifest
from pipelinez.engine.state.run_results import NodeResult, WatermarkRecord
from tests.conftest import write_project


def test_diagnostic_and_check_severities_are_different_types() -> None:
    assert warning("PZ0201", "x").severity is DiagnosticSeverity.WARNING
    assert error("PZ0201", "x").severity is DiagnosticSeverity.ERROR
    assert json.loads(json.dumps(warning("PZ0201", "x").to_dict()))["severity"] == "warning"
    assert [s.value for s in CheckSeverity] == ["error", "warn"]
    assert not isinstance(CheckSeverity.WARN, DiagnosticSeverity)


def test_config_model_holds_enums(tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "p",
        {
            "project.yml": """
                name: shop
                vars: { day: { type: date, default: "2024-01-01" } }
                engine: { staging_compression: auto }
            """,
            "sources/files.yml": """
                connector: localfiles
                connection: { root: data }
                datasets:
                  orders:
                    format: csv
                    path: orders.csv
                    checks: [ { not_null: { columns: [id] }, severity: warn } ]
            """,
            "sinks/lake.yml": """
                connector: localfiles
                connection: { root: out }
                outputs: { p: { format: csv, strategy: append, duplicates: accept } }
            """,
            "pipelines/p.sql": "SELECT 1 AS id",
            "pipelines/p.yml": "materialized: ephemeral\n",
        },
    )
    project, diagnostics = load_project(root)
    assert project is not None, diagnostics
    output = project.sinks["lake"].outputs["p"]
    assert output.strategy is Strategy.APPEND and output.duplicates is Duplicates.ACCEPT
    assert project.sources["files"].datasets["orders"].checks[0].severity is CheckSeverity.WARN
    assert project.pipelines["p"].materialized is Materialization.EPHEMERAL
    assert project.engine.staging_compression is StagingCompression.AUTO
    assert project.vars["day"].type is VarType.DATE
    assert output.strategy == "append"  # a StrEnum still compares equal to what the file says


WATERMARK = {
    "cursor": "updated_at",
    "low": "2024-01-01",
    "high": "2024-01-05",
    "upper": "2024-01-06",
    "previous": "2024-01-01",
    "committed": False,
    "reason": "no sink write reads this dataset, so nothing delivered its rows",
    "null_rows": 1,
    "trimmed": 2,
}


def test_watermark_record_writes_the_json_it_read() -> None:
    record = WatermarkRecord.from_dict(WATERMARK)
    assert isinstance(record, WatermarkRecord) and record.high == "2024-01-05" and record.trimmed == 2
    assert json.dumps(record.to_dict()) == json.dumps(WATERMARK)  # same keys, same order
    node = {
        "id": "0" * 16,
        "name": "src_a__b",
        "kind": "source_load",
        "status": "success",
        "watermark": WATERMARK,
    }
    result = NodeResult.from_dict(node)
    assert result.watermark == record and result.to_dict()["watermark"] == WATERMARK


def test_watermark_record_leaves_out_what_was_not_there() -> None:
    bare = {"cursor": "id", "low": None, "high": "7", "previous": None, "committed": True}
    record = WatermarkRecord.from_dict(bare)
    assert record is not None and (record.null_rows, record.trimmed, record.upper) == (0, 0, None)
    assert record.to_dict() == {**bare, "null_rows": 0, "trimmed": 0}
    assert WatermarkRecord.from_dict(None) is None


def test_manifest_partitions_are_records_with_the_same_json() -> None:
    manifest = TableManifest(
        "r",
        "t",
        "n",
        "0" * 16,
        3,
        ("a.parquet",),
        (StagedColumn("id", "BIGINT", "BIGINT"),),
        (ManifestPartition(0, 2, "sha256:x"), ManifestPartition(1, 1, None)),
    )
    data = json.loads(json.dumps(manifest.to_dict()))
    assert data["partitions"] == [
        {"index": 0, "rows": 2, "fingerprint": "sha256:x"},
        {"index": 1, "rows": 1, "fingerprint": None},
    ]
    assert TableManifest.from_dict(data) == manifest


def test_events_carry_enums_and_serialize_their_strings() -> None:
    done = events.NodeCompleted("r", name="p", kind=NodeKind.PIPELINE, status=NodeStatus.WARN)
    change = events.BreakerStateChanged(
        "r", instance="source:pg", from_state=BreakerState.OPEN, to_state=BreakerState.HALF_OPEN
    )
    assert json.loads(json.dumps(done.to_dict()))["status"] == "warn"
    assert json.loads(json.dumps(change.to_dict()))["to"] == "half_open"


def test_the_published_schema_describes_the_records() -> None:
    from jsonschema import Draft202012Validator

    from pipelinez.engine.state import run_results

    schema = json.loads((Path(run_results.__file__).parent / "schemas" / "run_results.v1.json").read_text())
    node = {"$ref": "#/$defs/node", "$defs": schema["$defs"]}
    result = NodeResult.from_dict(
        {
            "id": "0" * 16,
            "name": "src_a__b",
            "kind": "source_load",
            "status": "failed",
            "watermark": WATERMARK,
        }
    )
    result.partitions = [run_results.PartitionResult(0, 2, NodeStatus.SUCCESS, "sha256:x")]
    Draft202012Validator(node).validate(json.loads(json.dumps(result.to_dict())))
    bad = {**result.to_dict(), "watermark": {**WATERMARK, "high_water": "x"}}
    assert list(Draft202012Validator(node).iter_errors(bad))  # a key the record does not have
