"""One entry of the error registry."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Code:
    code: str
    name: str
    when: str
    next_step: str
    retired: bool = False
