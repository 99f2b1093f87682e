"""What a template render records and returns: the placeholder tokens of ref()/sink()/watermark(), the calls
it saw (`Call`, each at its place in the file), its output (`Rendered`) and a template that cannot render
(`TemplateFailure`). No Jinja here: later compile stages import these names without rendering anything.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from pipelinez.config.positions import JsonPath
from pipelinez.core.diagnostics import Diagnostic, Place

REF_TOKEN = "__pz_ref_{}__"
SINK_TOKEN = "__pz_sink_{}__"
WATERMARK_TOKEN = "__pz_wm_{}__"  # the i-th watermark() call; replaced by its typed literal after inference
REF_TOKEN_RE = re.compile(r"__pz_ref_([A-Za-z_][A-Za-z0-9_]*)__")
SINK_TOKEN_RE = re.compile(r"__pz_sink_(\d+)__")
WATERMARK_TOKEN_RE = re.compile(r"__pz_wm_(\d+)__")


PlaceOf = Callable[[JsonPath], Place]  # the place of the value at a path (keys, indices) inside a YAML value


def staging_table(source: str, dataset: str) -> str:
    return f"src_{source}__{dataset}"


@dataclass(frozen=True)
class Call:
    """One call a template made (ref, source, sink, var, env, ...): its arguments and place."""

    function: str
    args: tuple[str, ...]
    place: Place


@dataclass
class Rendered:
    """A rendered template: its text, the calls it made, its display text and soft failures."""

    text: str
    calls: list[Call] = field(default_factory=list)
    display_text: str = ""  # the same rendering with secret values masked
    # undeclared var()/env() and the like: reported, rendered as NULL so the rest of the file still renders
    failures: list[Diagnostic] = field(default_factory=list)

    def of(self, function: str) -> list[Call]:
        return [c for c in self.calls if c.function == function]


class TemplateFailure(Exception):
    """A template that cannot be rendered (all of its reportable problems), with the calls seen before."""

    def __init__(self, diagnostics: Diagnostic | list[Diagnostic], calls: list[Call] | None = None):
        found = [diagnostics] if isinstance(diagnostics, Diagnostic) else list(diagnostics)
        super().__init__("; ".join(d.message for d in found))
        self.diagnostics = tuple(found)
        self.diagnostic = found[0]
        self.calls = calls or []
