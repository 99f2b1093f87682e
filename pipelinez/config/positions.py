"""Where things are in a parsed YAML file: 1-based line/column of every mapping key and value.

Paths are JSON paths as tuples of keys (str) and sequence indices (int): `("datasets", "orders", "retry")`.
This module is pure data (no YAML library), so the model and every layer above can use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pipelinez.core.diagnostics import Place

JsonPath = tuple[str | int, ...]
LineCol = tuple[int, int]

ROOT: JsonPath = ()


@dataclass(frozen=True)
class Positions:
    """Positions of one file's keys and values, by JSON path.

    `keys[path]` is where the key naming `path` starts (for a sequence item: where the item starts);
    `values[path]` is where its value starts. The root path `()` maps to the start of the document.
    """

    file: str
    keys: Mapping[JsonPath, LineCol] = field(default_factory=dict)
    values: Mapping[JsonPath, LineCol] = field(default_factory=dict)

    def locate(self, path: JsonPath, *, at: str = "key") -> LineCol:
        """Line and column of `path` (`at` = "key" or "value"); the nearest existing ancestor when missing."""
        table = self.values if at == "value" else self.keys
        probe = tuple(path)
        while probe:
            found = table.get(probe)
            if found is not None:
                return found
            # an ancestor's value is where the missing child would have been written
            probe = probe[:-1]
            table = self.keys
        return self.keys.get(ROOT, (1, 1))

    def place(self, path: JsonPath = ROOT, *, at: str = "key") -> Place:
        line, col = self.locate(path, at=at)
        return Place(self.file, line, col)

    def has(self, path: JsonPath) -> bool:
        return tuple(path) in self.keys


def dotted(path: JsonPath) -> str:
    """A JSON path as users read it: `datasets.orders.checks[2].not_null`."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text
