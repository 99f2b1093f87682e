"""One parsed project YAML file as plain data with its positions (`YamlDoc`), apart from the parser: a file
replayed from the parse cache, and the code that builds specs from it, never import the YAML parser."""

from __future__ import annotations

from dataclasses import dataclass

from pipelinez.config.positions import JsonPath, LineCol, Positions
from pipelinez.core.json_types import JsonObject


@dataclass(frozen=True)
class YamlDoc:
    """One parsed project YAML file: its top-level mapping as plain data, and where everything is."""

    file: str  # project-relative POSIX path
    data: JsonObject
    positions: Positions

    def locate(self, path: JsonPath, *, at: str = "key") -> LineCol:
        return self.positions.locate(path, at=at)


def position_of(doc: YamlDoc, path: JsonPath, *, at: str = "key") -> LineCol:
    """1-based (line, col) of `path` in `doc` (`at`: "key"/"value"); nearest existing ancestor if absent."""
    return doc.positions.locate(path, at=at)
