"""PZ03xx: Connectors and data-plane tiers (tier 3)."""

from __future__ import annotations

from pipelinez.core.codes.model import Code

CODES: tuple[Code, ...] = (
    Code(
        "PZ0301",
        "InvalidConnection",
        "a `connection:` block does not match the connector's schema",
        "fix the key shown; the connector's keys are listed in docs/connectors.md",
    ),
    Code(
        "PZ0302",
        "InvalidDataset",
        "a dataset block does not match the connector's dataset schema",
        "fix the key shown; the connector's dataset keys are listed in docs/connectors.md",
    ),
    Code(
        "PZ0303",
        "InvalidOutput",
        "an output block does not match the connector's output schema",
        "fix the key shown; the connector's output keys are listed in docs/connectors.md",
    ),
    Code(
        "PZ0304",
        "ConnectorRule",
        "the connector's own validation refused a combination of settings",
        "follow the connector's message",
    ),
    Code(
        "PZ0305",
        "UnsupportedStrategy",
        "an output asks for a strategy the connector cannot do, or merge has no keys, or "
        "on_delete/duplicates is used with the wrong strategy",
        "pick a strategy the connector supports (pz plan shows capabilities); merge needs keys: [...]",
    ),
    Code(
        "PZ0306",
        "NotASource",
        "a source file names a connector that cannot read, or a sink file one that cannot write",
        "use a connector that supports this direction (docs/connectors.md)",
    ),
    Code(
        "PZ0312",
        "NativePathRequired",
        "configuration requires the universal tier on a native-only connector or format (force_universal, "
        "files_per_partition)",
        "remove engine.force_universal (or files_per_partition) for this source/sink",
    ),
    Code(
        "PZ0313",
        "WindowNotSupported",
        "a windowed dataset is read through a connector that cannot bound its native extraction",
        "remove window:, or use a connector that supports windowed reads",
    ),
)
