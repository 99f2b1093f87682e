"""The bounds of one template render, and rendering within them: no Jinja needed.

A template made only of `{{ f('literal') }}` calls (template_cache) renders here without the sandbox, so a
project whose templates are all such calls never imports Jinja; the sandbox (sandbox.py) renders every
other template within the same bounds.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any, Protocol

MAX_OUTPUT_CHARS = 10 * 1024 * 1024  # a project file is at most 10 MiB; a rendering no larger
MAX_LOOP_ITERATIONS = 1_000_000
MAX_SECONDS = 10.0
MAX_MACRO_DEPTH = 100  # macro calls open at once (a macro calling itself without end stops here)
OUTPUT_BATCH = 64  # output chunks are counted this many at a time (each at most a bounded value)


class SandboxLimit(Exception):
    """A template went past one of the sandbox's bounds; the message says which, in words a user reads."""


class MacroTooDeep(SandboxLimit):
    """Macro calls nested past MAX_MACRO_DEPTH (PZ0240)."""


class Budget:
    """The bounds of one render (the macros it calls render within it too)."""

    def __init__(self) -> None:
        self.deadline = time.monotonic() + MAX_SECONDS
        self.iterations = 0
        self.output = 0
        self.macro_depth = 0

    def enter_macro(self) -> None:
        self.macro_depth += 1
        if self.macro_depth > MAX_MACRO_DEPTH:
            raise MacroTooDeep(f"macro calls nested more than {MAX_MACRO_DEPTH} deep")
        self.check_time()

    def check_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise SandboxLimit(f"the template ran longer than the sandbox allows ({MAX_SECONDS:.0f}s)")

    def tick(self, steps: int) -> None:
        self.iterations += steps
        if self.iterations > MAX_LOOP_ITERATIONS:
            raise SandboxLimit(f"the template's loops ran more than {MAX_LOOP_ITERATIONS:,} iterations")
        self.check_time()

    def wrote(self, chars: int) -> None:
        self.output += chars
        if self.output > MAX_OUTPUT_CHARS:
            raise SandboxLimit(
                f"the template's output is larger than the sandbox allows ({MAX_OUTPUT_CHARS:,} characters)"
            )
        self.check_time()


class Generating(Protocol):
    def generate(self, context: dict[str, Any]) -> Iterator[str]: ...


def render_within(template: Generating, context: dict[str, Any], budget: Budget) -> str:
    """The template's output, counted against `budget` as it is made; SandboxLimit past a bound."""
    parts: list[str] = []
    chunks = template.generate(context)
    try:
        while batch := list(itertools.islice(chunks, OUTPUT_BATCH)):
            budget.wrote(sum(map(len, batch)))
            parts += batch
    except MemoryError:
        raise SandboxLimit("the template needs more memory than the sandbox allows") from None
    return "".join(parts)
