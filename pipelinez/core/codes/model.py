"""One entry of the error registry."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Code:
    """One PZ code of the registry: its number, name, when it is raised and the next step it suggests."""

    code: str
    name: str
    when: str
    next_step: str
    retired: bool = False
