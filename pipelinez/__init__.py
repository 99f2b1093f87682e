"""PipelineZ: sources to sinks through SQL, validated before data moves.

The Python API: `from pipelinez import Project` (see docs/api.md). It is imported on first use, so that
`pz --help` and the modules that only need `__version__` do not load the engine.
"""

from __future__ import annotations

__version__ = "0.1.0"

_API = frozenset({"Project", "PzError", "PzConfigError", "PzValidationError"})


def __getattr__(name: str) -> object:
    # nothing imported at the top: this module runs before `pz` records stop signals (cli/entry.py)
    if name in _API:
        import importlib

        return getattr(importlib.import_module("pipelinez.api"), name)
    raise AttributeError(f"module 'pipelinez' has no attribute {name!r}")
