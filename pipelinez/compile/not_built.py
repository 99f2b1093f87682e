"""Configuration pz parses but does not implement yet: refused (or warned about), never accepted silently.

One function per feature; when the feature ships, delete its function and its call in `check`.
"""

from __future__ import annotations

from pipelinez.config.model import Project
from pipelinez.core.diagnostics import Diagnostic


def check(project: Project) -> list[Diagnostic]:
    """Errors and warnings for every use of a feature this version does not have (none today: `sync:` is
    read incrementally, `engine.breaker` is built)."""
    return []
