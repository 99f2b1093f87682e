"""Every dataclass a `pz validate` imports has its own docstring. Python's `dataclass` gives a class
without one a docstring made from `inspect.signature(cls)`, at class creation, in every process: 65 such
classes cost about 6 ms of each pz command's start-up (issue 22, lane edit3). Counted, never timed."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import inspect
import click  # what the CLI imports first (its own classes are not pz's)

made = []
signature = inspect.signature

def recording(obj, *args, **kwargs):
    if isinstance(obj, type) and obj.__module__.startswith("pipelinez"):
        made.append(f"{obj.__module__}.{obj.__qualname__}")
    return signature(obj, *args, **kwargs)

inspect.signature = recording
import pipelinez.api
import pipelinez.cli.main
import pipelinez.connectors.localfiles.connector
import pipelinez.engine.run.validate_cache
print("\\n".join(made))
"""


def test_no_dataclass_of_a_validate_makes_its_docstring_from_its_signature() -> None:
    found = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert found.stdout.split() == []
