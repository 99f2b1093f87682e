"""The error registry: every PZ code, its name, when it fires and the next step.

This table is the single source of truth: diagnostics take their next step from it and
`docs/errors.md` is generated from it (`python -m pipelinez.core.codes > docs/errors.md`). The codes of each
tier live in a data module of their own (`shape.py` PZ01xx, `semantic.py` PZ02xx, `connectors.py` PZ03xx,
`sql.py` PZ04xx, `runtime.py` PZ05xx, `connectivity.py` PZ06xx, `host.py` PZ07xx).
"""

from __future__ import annotations

import re

from pipelinez.core.codes import connectivity, connectors, host, runtime, semantic, shape, sql
from pipelinez.core.codes.model import Code

__all__ = ["BY_CODE", "CODE_PATTERN", "REGISTRY", "Code", "lookup", "render_markdown"]

CODE_PATTERN = re.compile(r"^PZ0[1-7]\d\d$")

_TIERS = {
    "01": "Shape and configuration (tier 1)",
    "02": "Semantic (tier 2)",
    "03": "Connectors and data-plane tiers (tier 3)",
    "04": "SQL dry-compile (tier 4)",
    "05": "Runtime",
    "06": "Connectivity (tier 5, `pz validate --connect`)",
    "07": "Restore, connector host and executors",
}

REGISTRY: tuple[Code, ...] = (
    *shape.CODES,
    *semantic.CODES,
    *connectors.CODES,
    *sql.CODES,
    *runtime.CODES,
    *connectivity.CODES,
    *host.CODES,
)

BY_CODE: dict[str, Code] = {c.code: c for c in REGISTRY}


def lookup(code: str) -> Code:
    return BY_CODE[code]


def render_markdown() -> str:
    """The docs page of error codes, generated from REGISTRY."""
    lines = [
        "# Error codes",
        "",
        "Generated from `pipelinez/core/codes/` by `python -m pipelinez.core.codes > docs/errors.md`.",
        "Every error pz prints names its code, the file/node, the cause and the next step below.",
        "",
    ]
    current = ""
    for c in REGISTRY:
        tier = c.code[2:4]
        if tier != current:
            current = tier
            lines += [
                f"## PZ{tier}xx: {_TIERS[tier]}",
                "",
                "| code | name | fires when | next step |",
                "| --- | --- | --- | --- |",
            ]
        name = f"~~{c.name}~~ (retired)" if c.retired else c.name
        lines.append(f"| {c.code} | {name} | {c.when} | {c.next_step} |")
        if c is REGISTRY[-1] or REGISTRY[REGISTRY.index(c) + 1].code[2:4] != tier:
            lines.append("")
    return "\n".join(lines)
