"""PZ06xx: Connectivity (tier 5, `pz validate --connect`)."""

from __future__ import annotations

from pipelinez.core.codes.model import Code

CODES: tuple[Code, ...] = (
    Code(
        "PZ0601",
        "ConnectionFailed",
        "pz validate --connect could not connect to a source or sink",
        "check host, port, credentials and network access",
    ),
    Code(
        "PZ0602",
        "DatasetMissing",
        "a declared dataset does not exist at the source",
        "fix the table/path, or create it",
    ),
    Code(
        "PZ0603",
        "ColumnMissing",
        "a contract column does not exist in the live dataset",
        "update columns: to match the source, or fix the source",
    ),
    Code(
        "PZ0604",
        "ColumnTypeDrift",
        "a contract column's type differs from the live column's type",
        "update the type in columns:, or cast at the source",
    ),
    Code(
        "PZ0605",
        "ColumnUndeclared",
        "the live dataset has a column the contract does not declare (warning)",
        "add it to columns: if pipelines need it",
    ),
    Code(
        "PZ0606",
        "SinkPermission",
        "the sink permission probe could not create or replace the target",
        "grant the user create/replace rights on the target schema or folder",
    ),
)
